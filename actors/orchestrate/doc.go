// Package orchestrate runs one LLM invocation: it builds the host-owned
// system prompt around the operator's persona, hands the bounded room
// context to the model as untrusted data, executes the tools the model
// asks for one at a time, and validates the model's final structured
// answer.
//
// The package is pure logic behind two small ports: [LLM] (one
// chat-completion request) and [Tool] (one host-side capability). The
// adapters that implement them live elsewhere and are wired in cmd/lisa;
// nothing here performs network IO.
//
// Every call to [Run] owns its conversation, tool registry, source
// registry and counters, so concurrent runs cannot see each other's data.
// Budgets ([Limits]) bound LLM requests, tool calls, request size, answer
// size and tool output. A run that exhausts a budget ends with
// [FallbackOverload]; a final answer that is still malformed after one
// repair request ends with [FallbackGeneric]; failures of the LLM itself
// are returned as errors for the invocation layer to retry or report.
package orchestrate
