// Package sameorigin keeps an HTTP client's credentials on the origin
// they were configured for. Go's http.Client copies the Authorization
// header to a redirect target whenever the target's host is the
// original's (or a subdomain of it), whatever its scheme or port: a 307
// from the homeserver's port to another local port, or from https to
// http on the same name, would hand Lisa's access token or LLM key to
// another listener or to the network in clear text. [CheckRedirect]
// follows a redirect only within the scheme, host and port of the
// request that started the chain. It is pure: no I/O.
package sameorigin
