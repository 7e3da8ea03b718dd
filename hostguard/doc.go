// Package hostguard decides whether a request's Host header names this
// machine, for the local HTTP endpoints (the status page, /metrics) that
// answer without a token: a web page the operator opens could otherwise
// rebind its own name to 127.0.0.1 and read them (DNS rebinding). An IP
// literal or "localhost" cannot be rebound by a web site. It is pure: no
// I/O.
package hostguard
