// Package faultproxy is an HTTP reverse proxy on 127.0.0.1 that sits in
// front of a test homeserver and injects scripted faults: answer a matching
// request with an error without forwarding it (the server never saw it),
// or forward it and then answer with an error (the server did it, the
// client cannot know). Tests use it to prove replies survive 429s and 5xx.
package faultproxy
