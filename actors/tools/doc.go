// Package tools implements the tool pool: a supervised, fixed set of
// worker actors that run tool calls (search, fetch, conversion) one at a
// time each. It is written for Lisa instead of using protoactor's router
// pools, which shrink and can panic their senders.
//
// A tool call is a typed message, *messages.ToolCall, answered with
// exactly one *messages.ToolResult; nothing but data crosses the
// mailboxes. Tool implementations are registered by name as [Handler]s,
// each with an optional concurrency limit. Calls wait in a bounded FIFO
// queue whose length is the pool's back-pressure: a call beyond the
// bound is answered at once with a "busy" result, and a call whose tool
// is at its limit waits while later calls of other tools start.
//
// Callers use a [Client] from their own goroutines (never from inside an
// actor's Receive): it sends the call with RequestFuture and waits for the
// result or for its context to end; a call whose caller gave up is
// dropped from the queue, or cancelled while it runs. The call's deadline
// travels with it and bounds the handler. A handler that panics answers
// its caller with a tool_failed result, and its worker is replaced by the
// pool's supervision.
package tools
