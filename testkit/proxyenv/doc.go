// Package proxyenv helps tests prove that an HTTP client ignores the
// proxy environment variables: a loopback "proxy" that counts and drops
// every connection, and the environment that points every proxy variable
// at it. Go reads the proxy variables once per process, so tests run
// their client in a re-executed test binary with [Env].
package proxyenv
