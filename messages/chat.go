package messages

import "encoding/json"

// Conversation roles used in [ChatMessage.Role].
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// ChatMessage is one entry of the conversation sent to the model.
type ChatMessage struct {
	// Role is one of RoleSystem, RoleUser, RoleAssistant or RoleTool.
	Role string
	// Content is the message text (for a tool message, the serialized
	// tool result).
	Content string
	// ToolCalls are the calls an assistant message requested.
	ToolCalls []ModelToolCall
	// ToolCallID ties a tool message to the call it answers.
	ToolCallID string
}

// ModelToolCall is one function call requested by the model, as it
// appears in the conversation. The host runs it as a [ToolCall].
type ModelToolCall struct {
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
	Messages []ChatMessage
	// Tools are the tools the model may call.
	Tools []ToolSpec
}

// ChatResponse is the model's reply to a [ChatRequest]: either tool calls
// or final text.
type ChatResponse struct {
	// Content is the assistant text.
	Content string
	// ToolCalls are the calls requested, in the model's order.
	ToolCalls []ModelToolCall
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

// Answer is the result of the LLM tool loop. When Fallback is not
// FallbackNone, Markdown and SourceURLs are empty and the caller sends the
// matching persona error instead.
type Answer struct {
	// Markdown is the reply text.
	Markdown string
	// SourceURLs are the cited sources, each one returned by a successful
	// tool call of this invocation, without duplicates.
	SourceURLs []string
	// Fallback selects a persona error instead of Markdown.
	Fallback Fallback
	// Titles maps cited URLs to titles the tools reported, when known.
	Titles map[string]string
}

// Reply is what the renderer turns into the reply event of one
// invocation: the answer text, the sources the host lists under it, and
// the message it answers.
type Reply struct {
	// Markdown is the answer (or the persona's error text). It is
	// untrusted: raw HTML in it is shown as text.
	Markdown string
	// Sources are listed after the answer by the renderer.
	Sources []Source
	// InReplyTo is the invoking message.
	InReplyTo Invoking
}

// Source is one cited web source.
type Source struct {
	// URL is the source's absolute http or https URL.
	URL string
	// Title is the page or search-result title, if known.
	Title string
}

// Invoking identifies the message a reply answers.
type Invoking struct {
	// EventID is the invoking event.
	EventID EventID
	// Sender is the invoking event's sender.
	Sender UserID
	// Body is the invoking event's plain-text body.
	Body string
}
