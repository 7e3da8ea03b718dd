// Package matrix adapts mautrix-go (no crypto) to Lisa: it restores the
// session from an access token and checks it with whoami, sends replies
// with a caller-chosen transaction ID, and finds a reply Lisa already sent
// so it is never sent twice. Errors become messages.Error values that tell
// rate limits (with the server's retry_after_ms), permanent refusals and
// ambiguous failures apart. Access tokens never appear in errors or logs.
package matrix
