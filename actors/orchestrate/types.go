package orchestrate

import (
	"context"
	"encoding/json"
)

// Conversation roles used in [Message.Role].
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Message is one entry of the conversation sent to the model.
type Message struct {
	// Role is one of RoleSystem, RoleUser, RoleAssistant or RoleTool.
	Role string
	// Content is the message text (for a tool message, the serialized
	// tool result).
	Content string
	// ToolCalls are the calls an assistant message requested.
	ToolCalls []ToolCall
	// ToolCallID ties a tool message to the call it answers.
	ToolCallID string
}

// ToolCall is one function call requested by the model.
type ToolCall struct {
	// ID identifies the call within the conversation.
	ID string
	// Name is the requested tool's name.
	Name string
	// Arguments is the raw JSON arguments text as the model produced it.
	Arguments string
}

// ToolSpec describes a tool to the model.
type ToolSpec struct {
	// Name is the exact name the model must use.
	Name string
	// Description tells the model what the tool does.
	Description string
	// Parameters is a strict JSON schema of the arguments object.
	Parameters json.RawMessage
}

// ChatRequest is one request to the model: the whole conversation so far
// and the tools on offer.
type ChatRequest struct {
	// Messages is the conversation in order; the callee must not modify it.
	Messages []Message
	// Tools are the tools the model may call.
	Tools []ToolSpec
}

// ChatResponse is the model's reply to a [ChatRequest]: either tool calls
// or final text.
type ChatResponse struct {
	// Content is the assistant text.
	Content string
	// ToolCalls are the calls requested, in the model's order.
	ToolCalls []ToolCall
}

// LLM sends one chat-completion request. Implementations classify their
// failures as *messages.Error values and must be safe for concurrent use.
type LLM interface {
	// Chat returns the model's reply to req.
	Chat(ctx context.Context, req ChatRequest) (ChatResponse, error)
}

// ToolResult is the outcome of one tool call. Run bounds it before the
// model sees it and serializes it as a JSON object: a success carries ok,
// content and source_urls; a failure carries ok, code, message and
// retryable.
type ToolResult struct {
	// OK reports success.
	OK bool
	// Code is a stable, non-sensitive failure code such as
	// "invalid_arguments" or "timeout"; it is empty on success.
	Code string
	// Content is the output on success, or a short safe explanation on
	// failure.
	Content string
	// SourceURLs are the web sources this successful result drew on; only
	// these may be cited by the final answer.
	SourceURLs []string
	// Retryable tells the model, on failure, whether trying again may help.
	Retryable bool
	// SourceTitles optionally names sources by URL (as given in
	// SourceURLs), for the Sources section.
	SourceTitles map[string]string
}

// Tool is one host-side capability offered to the model. Implementations
// must be safe for concurrent use by several runs.
type Tool interface {
	// Spec describes the tool; Run reads it once per run.
	Spec() ToolSpec
	// Call runs the tool with a JSON object of arguments that Run has
	// already checked against the basic shape of Spec().Parameters.
	// Failures are reported in the result, not by panicking.
	Call(ctx context.Context, args json.RawMessage) ToolResult
}

// Limits bounds one run. A zero or negative field takes its default.
type Limits struct {
	// MaxIterations bounds LLM requests, including a repair request.
	MaxIterations int
	// MaxToolCalls bounds tool calls, including invalid and failed ones.
	MaxToolCalls int
	// MaxRequestCharacters bounds the characters of one request: every
	// message's content, every tool call's name and arguments, and the
	// tool specs.
	MaxRequestCharacters int
	// MaxResponseCharacters bounds the final answer's markdown.
	MaxResponseCharacters int
	// MaxToolOutputCharacters bounds the content of one tool result.
	MaxToolOutputCharacters int
}

// Defaults for the fields of [Limits].
const (
	DefaultMaxIterations           = 8
	DefaultMaxToolCalls            = 6
	DefaultMaxRequestCharacters    = 120000
	DefaultMaxResponseCharacters   = 12000
	DefaultMaxToolOutputCharacters = 30000
)

// withDefaults replaces non-positive fields with their defaults.
func (l Limits) withDefaults() Limits {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&l.MaxIterations, DefaultMaxIterations)
	def(&l.MaxToolCalls, DefaultMaxToolCalls)
	def(&l.MaxRequestCharacters, DefaultMaxRequestCharacters)
	def(&l.MaxResponseCharacters, DefaultMaxResponseCharacters)
	def(&l.MaxToolOutputCharacters, DefaultMaxToolOutputCharacters)
	return l
}

// Prompt is the invocation-specific input to a run.
type Prompt struct {
	// Persona is the operator's persona text; it is placed after the host
	// policy and cannot override it.
	Persona string
	// ContextBlock is the bounded room context built by the context
	// builder; it is given to the model as untrusted data.
	ContextBlock string
}

// Fallback says which configured in-character error replaces a model
// answer.
type Fallback int

// Fallback values.
const (
	// FallbackNone means the answer is usable as is.
	FallbackNone Fallback = iota
	// FallbackGeneric selects the persona's generic error: the model did
	// not produce a valid answer.
	FallbackGeneric
	// FallbackOverload selects the persona's overload error: the request
	// did not fit the iteration, tool-call or size budget.
	FallbackOverload
)

// String returns "none", "generic" or "overload".
func (f Fallback) String() string {
	switch f {
	case FallbackNone:
		return "none"
	case FallbackGeneric:
		return "generic"
	case FallbackOverload:
		return "overload"
	default:
		return "unknown"
	}
}

// Answer is the result of a run. When Fallback is not FallbackNone,
// Markdown and SourceURLs are empty and the caller sends the matching
// persona error instead.
type Answer struct {
	// Markdown is the reply text.
	Markdown string
	// SourceURLs are the cited sources, each one returned by a successful
	// tool call of this run, without duplicates.
	SourceURLs []string
	// Fallback selects a persona error instead of Markdown.
	Fallback Fallback
	// Titles maps cited URLs to titles the tools reported, when known.
	Titles map[string]string
}
