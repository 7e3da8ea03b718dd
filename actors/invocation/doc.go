// Package invocation owns the answer to one invocation: room context →
// LLM turns → tool calls → rendered reply.
//
// The invocation child ([Props]) is a short-lived actor that runs one
// attempt of one invocation and reports the result to its room. The work
// runs in a goroutine the actor owns, with a context that is cancelled
// when the actor stops or restarts, so Receive never blocks. The work
// itself is an [Invoker]; the production one is the [Answerer].
//
// The [Answerer] talks to the outside only through small ports declared
// here — [ContextBuilder], [LLM], [Renderer], [ToolSessions] and
// [ToolRunner] — whose data types live in package messages. The adapters
// that implement them are wired in cmd/lisa; nothing here performs
// network IO. Each invocation opens its own tool session (artifacts,
// sources, known URLs) and closes it when done; its tool calls go to the
// tool pool as typed [messages.ToolCall] messages naming that session.
//
// [Run] is the LLM tool loop: it builds the host-owned system prompt
// around the operator's persona, hands the bounded room context to the
// model as untrusted data, executes the tools the model asks for one at a
// time, and validates the model's final structured answer. Every call to
// Run owns its conversation, tool registry, source registry and counters,
// so concurrent runs cannot see each other's data. Budgets ([Limits])
// bound LLM requests, tool calls, request size, answer size and tool
// output, and every request is made to fit the model's context window
// (Limits.ContextWindowTokens less MaxOutputTokens, estimated from bytes
// by a [TokenEstimator] that learns from the server's prompt_tokens): the
// room excerpt's oldest events go first, tool output is shortened next,
// the system prompt and the invoking message always stay. What changes
// with every invocation (the time, the room's details, which message to
// answer) follows the excerpt, so that an LLM server can reuse the prompt
// prefix of the previous invocation.
//
// Real models do not always keep the answer contract. The answer is the
// first JSON object with a "markdown" string in the reply, wherever it
// stands; without one, Run asks once more (a repair request in which no
// tool may be called, with the answer's schema for structured output).
// After that, plain prose is posted as the answer (logged as
// final_not_json), and so is a well-formed answer whose only fault is its
// citations; where pages were fetched, the host lists them as Sources. A
// refusal is the answer as it is. One LLM request is kept in reserve:
// when the tool-call budget is spent (calls beyond it are not run) or
// only that request is left, it goes without tools and asks the model to
// answer from what it gathered; only if it gives no answer either does
// the run end with [messages.FallbackOverload], as does a conversation
// too large for the window or the request budget. A run with no answer
// at all (an empty or cut-off reply) ends with
// [messages.FallbackGeneric]; failures of the LLM
// itself are returned as errors for the invocation layer to retry or
// report. The [Answerer] answers without tools, from then on, once the
// server says the model cannot take them.
package invocation
