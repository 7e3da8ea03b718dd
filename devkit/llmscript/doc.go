// Package llmscript is a scripted, in-process OpenAI-compatible
// chat-completions server. It is part of the local development stack used
// by `lisa demo` and by the test kit; it never imports testing (tests use
// the thin wrapper testkit/llmfake, whose Start ties a server to a test's
// lifetime).
//
// A [Server] listens on 127.0.0.1 on a random port and serves
// POST /v1/chat/completions (non-streaming only) and GET /v1/models. Each
// chat-completions request consumes the next scripted [Step] from a FIFO
// queue (see [Server.Enqueue]); when the queue is empty the default step
// (see [WithDefault]) answers instead.
//
// Steps describe what the model "does": final text ([Text], [Answer]), tool
// calls ([ToolCalls]), OpenAI-style HTTP errors ([Error]), malformed bodies
// ([Raw], [Truncated], [EmptyChoices]), a dropped connection ([Drop]), a
// reply computed from the request ([Func]), hanging calls ([Hang]) and a
// body that never ends ([Endless]). Any
// step can be delayed ([Step.After]) or held until the caller releases a
// [Gate] ([Step.Until]); both stop waiting when the client goes away or the
// server closes.
//
// Every chat-completions request is recorded as a parsed [Request] (without
// the Authorization header value), and the server tracks how many calls are
// in flight and the maximum concurrency ever observed, so a caller can
// assert, for example, that two invocations in one room never overlap at the
// LLM.
//
// Use [New], [Server.Listen] and [Server.Close].
package llmscript
