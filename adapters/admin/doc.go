// Package admin serves Lisa's local admin socket: a Unix socket (mode
// 0600) speaking line-delimited JSON, one request and one response per
// line. The daemon answers through a Handler that reads the mailbox
// registry and asks actors by message with short timeouts; the socket
// never touches actor state directly. lisa shell and lisa health are its
// clients.
//
// The socket lives only in a directory that the current user owns and
// nobody else can write to, and is never reachable with a wider mode (see
// ListenLimits). The server bounds what clients hold (see Limits): a few
// concurrent connections, a deadline for each request line and each
// answer, and a maximum request size.
package admin
