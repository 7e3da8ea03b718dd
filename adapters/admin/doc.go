// Package admin serves Lisa's local admin socket: a Unix socket (mode
// 0600) speaking line-delimited JSON, one request and one response per
// line. The daemon answers through a Handler that reads the mailbox
// registry and asks actors by message with short timeouts; the socket
// never touches actor state directly. lisa shell and lisa health are its
// clients.
package admin
