package messages

import (
	"encoding/json"
	"regexp"
	"strings"
)

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
	// AnswerOnly asks for the final answer without tool calls (a repair
	// request): Tools stay listed, so the prompt keeps its prefix, but
	// the model is told not to call them (tool_choice "none").
	AnswerOnly bool
	// AnswerSchema is the JSON schema of the final answer. The callee may
	// ask the server for structured output with it, but only on requests
	// in which no tool may be called (AnswerOnly, or no Tools): servers
	// that enforce a schema by grammar apply it to the whole reply, so a
	// tool call could never be written.
	AnswerSchema json.RawMessage
}

// ChatResponse is the model's reply to a [ChatRequest]: either tool calls
// or final text.
type ChatResponse struct {
	// Content is the assistant text.
	Content string
	// ToolCalls are the calls requested, in the model's order.
	ToolCalls []ModelToolCall
	// Usage is the token usage the server reported for the request; zero
	// when it reported none.
	Usage TokenUsage
	// FinishReason is why the model stopped ("stop", "length",
	// "tool_calls", "content_filter", …), as the server said; "" when it
	// said nothing.
	FinishReason string
	// Refusal is the model's refusal text (OpenAI's message.refusal),
	// when it declined to answer.
	Refusal string
	// TextToolCalls reports that ToolCalls were read from tool-call markup
	// the model wrote into its text (<tool_call>…</tool_call>), not from
	// the server's tool_calls field.
	TextToolCalls bool
	// Unanswered counts the attempts before this reply that reached the
	// server and failed, and were retried (see [LLMFailure.Sent]): their
	// usage is unknown, and not in Usage.
	Unanswered int
}

// FinishLength is the finish reason of a reply cut off at the output
// token limit.
const FinishLength = "length"

// TokenUsage counts the tokens of one chat request, as the server reports
// them (usage.prompt_tokens and usage.completion_tokens).
type TokenUsage struct {
	// PromptTokens are the tokens of the request.
	PromptTokens int
	// CompletionTokens are the tokens of the reply.
	CompletionTokens int
}

// Reported tells whether the server reported any usage.
func (u TokenUsage) Reported() bool { return u.PromptTokens > 0 || u.CompletionTokens > 0 }

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
	// ToolURLs are the URLs successful tool calls of this invocation
	// returned (the source registry), whether cited or not: links to them
	// in Markdown are verified.
	ToolURLs []string
}

// Excerpt is the room context of one invocation in parts, so that the
// prompt can drop its oldest events when a request would not fit the
// model's window: Open, then Events in order (the invoking message is the
// last one), then Close. Their concatenation is the context block.
type Excerpt struct {
	// Open starts the block.
	Open string
	// Events are the rendered events, oldest first; each renders the same
	// way in every excerpt it appears in, except the invoking one, which
	// is marked as such.
	Events []string
	// Close ends the block.
	Close string
}

// Block returns the whole context block.
func (e Excerpt) Block() string {
	n := len(e.Open) + len(e.Close)
	for _, ev := range e.Events {
		n += len(ev)
	}
	var b strings.Builder
	b.Grow(n)
	b.WriteString(e.Open)
	for _, ev := range e.Events {
		b.WriteString(ev)
	}
	b.WriteString(e.Close)
	return b.String()
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
	// CheckLinks is set when Markdown is the model's: a link or bare URL
	// in it to an http(s) URL that is not one of KnownURLs (compared
	// after normalisation) is shown as text, not as a link, and counted.
	// Links to Matrix users and rooms (matrix.to, matrix:) keep the
	// renderer's other rules. The persona's own texts are not checked.
	CheckLinks bool
	// KnownURLs are the URLs that appeared in this invocation: in the
	// invoking message, the room context or a successful tool result.
	KnownURLs []string
}

// Rendered is the reply content the renderer made of a [Reply], and what
// it changed in the answer.
type Rendered struct {
	// Content is the exact JSON content of the reply event.
	Content []byte
	// LinksUnverified counts the links and bare URLs of the answer shown
	// as text because their URL did not appear in the invocation (see
	// Reply.CheckLinks).
	LinksUnverified int
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
	// ThreadRoot is the root event of the thread the invoking event is
	// in, or "" on the main timeline; the reply goes to that thread.
	ThreadRoot EventID
}

// RoomFacts are what the context builder learned about the room of an
// invocation, for the prompt. Name and Topic are set by room members:
// untrusted data, already bounded and made a single line of plain text.
// Each field is empty when unknown.
type RoomFacts struct {
	// Name is the room's name (m.room.name).
	Name string
	// Topic is the room's topic (m.room.topic).
	Topic string
	// BotName is Lisa's own display name in the room.
	BotName string
}

// reasoningTags are the tags reasoning models wrap their thinking in.
var reasoningTags = []string{"thinking", "think"}

// StripReasoning removes the reasoning a model may write before its
// answer, so that it never reaches a room, a log or a later request:
//
//   - leading <think>…</think> and <thinking>…</thinking> blocks (tag names
//     in any ASCII case, any number of them, white space around them);
//   - text that starts with neither such a tag nor "{" or "`" (a JSON
//     answer or a fenced one) up to and including the first </think> or
//     </thinking>: chat templates that put the opening tag in the prompt
//     make the model's text start inside the block.
//
// An opening tag that is never closed makes everything after it
// reasoning: the result is "", which is no answer. Text without reasoning
// is returned unchanged; anything after the reasoning is returned with
// leading white space removed. Tags after the answer has started are
// left alone.
func StripReasoning(s string) string {
	out, stripped := s, false
	for {
		t := strings.TrimLeft(out, " \t\r\n")
		if tag, n := reasoningOpen(t); n > 0 {
			end, m := indexClose(t[n:], tag)
			if end < 0 {
				return ""
			}
			out, stripped = t[n+end+m:], true
			continue
		}
		if !stripped && !strings.HasPrefix(t, "{") && !strings.HasPrefix(t, "`") {
			if end, m := indexClose(t, ""); end >= 0 {
				out, stripped = t[end+m:], true
				continue
			}
		}
		if !stripped {
			return s
		}
		return t
	}
}

// reasoningOpen returns the tag name and length of the opening reasoning
// tag s starts with, or 0.
func reasoningOpen(s string) (string, int) {
	for _, tag := range reasoningTags {
		open := "<" + tag + ">"
		if hasPrefixFold(s, open) {
			return tag, len(open)
		}
	}
	return "", 0
}

// indexClose returns the index and length of the first closing tag of tag
// in s (of any reasoning tag when tag is ""), or -1.
func indexClose(s, tag string) (int, int) {
	for i := 0; i+2 < len(s); i++ {
		if s[i] != '<' || s[i+1] != '/' {
			continue
		}
		for _, t := range reasoningTags {
			if tag != "" && t != tag {
				continue
			}
			if c := "</" + t + ">"; hasPrefixFold(s[i:], c) {
				return i, len(c)
			}
		}
	}
	return -1, 0
}

// hasPrefixFold is strings.HasPrefix ignoring ASCII case; prefix is
// lower-case ASCII.
func hasPrefixFold(s, prefix string) bool {
	if len(s) < len(prefix) {
		return false
	}
	for i := 0; i < len(prefix); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != prefix[i] {
			return false
		}
	}
	return true
}

// answerSchemaJSON is the JSON schema of the final answer.
const answerSchemaJSON = `{"type":"object","properties":{"markdown":{"type":"string"},"source_urls":{"type":"array","items":{"type":"string"}}},"required":["markdown","source_urls"],"additionalProperties":false}`

// AnswerSchema returns the JSON schema of the final answer (an object
// with the string markdown and the list of strings source_urls, nothing
// else), as [ChatRequest.AnswerSchema] carries it; `lisa doctor` asks the
// server for structured output with the same schema.
func AnswerSchema() json.RawMessage { return json.RawMessage(answerSchemaJSON) }

// specialTokenRE matches a chat template's special token written out as
// text: "<|im_end|>", "<|eot_id|>", "<|endoftext|>" and DeepSeek's
// full-width "<｜end▁of▁sentence｜>". Servers render them into the content
// when a model emits one that is not a stop token of its template (Ollama
// with a template that does not match the model, for one).
var specialTokenRE = regexp.MustCompile(`<[|｜][^\s<>|｜]{1,48}[|｜]>`)

// StripSpecialTokens removes the special tokens a server left in a
// model's text (see specialTokenRE); text without one is returned as it
// is.
func StripSpecialTokens(s string) string {
	if !strings.Contains(s, "<|") && !strings.Contains(s, "<｜") {
		return s
	}
	return specialTokenRE.ReplaceAllString(s, "")
}
