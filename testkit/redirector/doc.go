// Package redirector is a pair of loopback HTTP servers for tests that
// prove a client's credentials stay home: every request to the home
// server is redirected to the other server (another port of 127.0.0.1),
// which counts the requests that reach it and those that carry
// credentials.
package redirector
