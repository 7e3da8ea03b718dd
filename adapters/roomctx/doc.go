// Package roomctx builds the conversation context Lisa gives the model for
// one invocation (design §11).
//
// A [Builder] asks the homeserver for the events just before the invoking
// event (GET /context), never the events after it and never events of
// another room. It keeps only text messages (m.text, m.notice, m.emote),
// including Lisa's own, removes reply fallbacks, turns Matrix HTML into
// Markdown-like text, applies edits made by the original author inside the
// fetched window, shows redacted messages as "[message redacted]", and
// names every author by display name and user ID. Replies point at the
// local sequence number of their target, or carry a short excerpt of a
// target fetched from outside the window, following at most
// Limits.MaxReplyDepth targets. Characters are budgeted per event and for
// the whole block, newest history first, and the invocation always stays.
//
// The result is an explicitly delimited <room_context> block in which every
// attribute value and message body is escaped, so room content can never
// close the block or forge markup of its own. If GET /context fails, the
// block holds the invocation alone.
package roomctx
