// Package roomctx builds the conversation context Lisa gives the model for
// one invocation (design §11).
//
// A [Builder] asks the homeserver for the events just before the invoking
// event (GET /context), never the events after it and never events of
// another room. It keeps only text messages (m.text, m.notice, m.emote),
// including Lisa's own, removes reply fallbacks, turns Matrix HTML into
// Markdown-like text, applies edits made by the original author inside the
// fetched window, shows redacted messages as "[message redacted]", and
// names every author by display name and user ID. A history message
// names the event it replies to by ID (the target may or may not be in
// the block); the invoking message's reply chain is followed outside the
// block (at most Limits.MaxReplyDepth targets) and quoted as short
// excerpts. Characters are budgeted per
// event and for the whole block, and the invocation always stays.
//
// Successive blocks of a room share their beginning, so that an LLM
// server can reuse the prompt prefix it computed: each message renders
// the same way in every block that holds it, whatever the block's start
// (no position numbers; the invoking one is marked),
// and the block's start stays where the previous block of the room (or
// thread) began until the budgets force it on, then moves
// Limits.WindowStepEvents messages at once. [Builder.BuildExcerpt] gives
// the block in parts, so that a request can leave out its oldest
// messages when it would not fit the model's window.
//
// An invocation in a thread (roompb.Candidate.ThreadRootEventId) gets that
// thread as its context: the root and the thread's events before the
// invocation, read backwards in pages from GET /relations/{root}/m.thread
// (a [ThreadFetcher]); without it, or when it fails, the thread's events
// are picked out of the room timeline. A main-timeline invocation's
// context leaves the events of threads out. When Limits.MaxEvents asks for
// more than one GET /context gives (50 events before the anchor on
// Dendrite), older events are read with GET /messages (a
// [HistoryFetcher]) in bounded pages. Edits of thread events are not
// applied in a thread's context: they relate to the edited event, not to
// the thread root, so /relations on the root does not list them.
//
// The result is an explicitly delimited <room_context> block in which every
// attribute value and message body is escaped, so room content can never
// close the block or forge markup of its own. If GET /context fails, the
// block holds the invocation and the preceding events of its /sync batch.
// [Builder.BuildWithFacts] also returns the room's name and topic (from
// its state, through a [StateFetcher]) and Lisa's display name, bounded
// single lines for the prompt.
package roomctx
