// Package llm adapts go-openai to Lisa's LLM port (invocation.LLM, with
// the messages chat types). [Client.Chat] works against any
// OpenAI-compatible /v1 endpoint: it sends the conversation and the tools
// as strict function tools with the configured model, token limit and
// temperature, bounds each attempt by the configured timeout inside the
// caller's deadline, and retries rate limits, 5xx responses, timeouts
// and network failures with jittered exponential backoff (honouring
// Retry-After) for a bounded number of attempts. [Client.Complete] is the
// older single-attempt, text-only call.
//
// Failures are classified as messages.Error codes: rate limits, 5xx and
// network errors are transient, other 4xx are permanent, and undecodable
// or incomplete replies are bad responses. The provider's error text is
// dropped because it may echo the prompt, and the package never logs
// prompts, replies or keys.
package llm
