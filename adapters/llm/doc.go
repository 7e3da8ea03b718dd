// Package llm adapts go-openai to Lisa's LLM port (invocation.LLM, with
// the messages chat types). [Client.Chat] works against any
// OpenAI-compatible /v1 endpoint: it sends the conversation and the tools
// as strict function tools with the configured model, token limit (under
// max_tokens or max_completion_tokens) and temperature (none when unset),
// asks for structured output only where no tool may be called, bounds
// each attempt by the configured timeout inside the caller's deadline,
// and retries rate limits, 5xx responses, timeouts and network failures
// with jittered exponential backoff (honouring Retry-After) for a bounded
// number of attempts. [Client.Complete] is the older single-attempt,
// text-only call.
//
// Real servers do not all speak the same dialect (see testkit/llmcorpus
// for the shapes and their sources). A transport in front of go-openai
// bounds every reply's body, reads error objects in all their shapes,
// turns a 200 that carries an error object into the failure it is,
// assembles an event stream nobody asked for, and rewrites tool arguments
// sent as objects and content sent as chunks into what go-openai decodes.
// Tool calls the model wrote into its text (<tool_call>…</tool_call>, LM
// Studio's [TOOL_REQUEST]…) become tool calls when Config.TextToolCalls
// is set. Reasoning (reasoning_content, reasoning, <think> blocks) is
// dropped.
//
// Failures are classified as messages.Error codes carrying a
// messages.LLMFailure: the status, a cause (unauthorized, model not
// found, context too long, a refused parameter, tools unsupported, rate
// limited, server error, timeout, malformed or too large a reply) and the
// server's message — passed through Config.Redact and rid of the API key,
// then bounded to 300 bytes — kept out of the error's text because it may
// echo the prompt. Rate limits, 5xx and network errors are transient;
// refusals are permanent. Every failed attempt is logged with the code,
// the cause, the status and the server's message: those only the
// operator can fix at ERROR once per cause, with the configuration key to
// change (for an unknown model, with the names GET /models lists), and at
// WARN when they repeat within the hour; all others at WARN, saying
// whether another attempt follows. Config.OnAttempt hears of every
// attempt (metrics, health). The package never logs prompts, replies or
// keys.
package llm
