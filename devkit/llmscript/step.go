package llmscript

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"
)

type stepKind int

const (
	kindText stepKind = iota
	kindToolCalls
	kindError
	kindRaw
	kindDrop
	kindHang
	kindFunc
	kindEndless
)

// Step is one scripted model behaviour: the reply to a single
// chat-completions request. Steps are immutable values; the modifier methods
// return changed copies. Build them with [Text], [Answer], [ToolCalls],
// [Error], [ErrorTyped], [Raw], [Truncated], [EmptyChoices], [Drop], [Hang]
// or [Func].
type Step struct {
	kind         stepKind
	content      string
	calls        []ToolCall
	status       int
	errType      string
	errCode      string
	contentType  string
	body         []byte
	finishReason string
	usage        *Usage
	header       [][2]string
	delay        time.Duration
	gate         *Gate
	fn           func(Request) Step
}

// ToolCall is one function call, either scripted in a [ToolCalls] step or
// recorded from an assistant message in a [Request].
type ToolCall struct {
	// ID is the tool call ID; scripted calls with an empty ID get a
	// generated, unique one.
	ID string
	// Name is the function name.
	Name string
	// Arguments is the raw JSON arguments string, sent verbatim.
	Arguments string
}

// Usage is the token accounting reported with a successful completion.
type Usage struct {
	// PromptTokens is reported as usage.prompt_tokens.
	PromptTokens int
	// CompletionTokens is reported as usage.completion_tokens.
	CompletionTokens int
}

// Text replies with assistant content and finish_reason "stop".
func Text(content string) Step {
	return Step{kind: kindText, content: content, finishReason: "stop"}
}

// Answer replies with Lisa's final-answer contract: a JSON object
// {"markdown": ..., "source_urls": [...]} as the assistant content.
func Answer(markdown string, sourceURLs ...string) Step {
	if sourceURLs == nil {
		sourceURLs = []string{}
	}
	b, err := json.Marshal(struct {
		Markdown   string   `json:"markdown"`
		SourceURLs []string `json:"source_urls"`
	}{markdown, sourceURLs})
	if err != nil { // unreachable: strings always marshal
		panic(err)
	}
	return Text(string(b))
}

// ToolCalls replies with one or more tool calls and finish_reason
// "tool_calls".
func ToolCalls(calls ...ToolCall) Step {
	return Step{kind: kindToolCalls, calls: slices.Clone(calls), finishReason: "tool_calls"}
}

// Call builds a [ToolCall] with a generated ID. A string or []byte args is
// used verbatim (so tests can send invalid JSON); anything else is
// JSON-encoded and panics if that fails.
func Call(name string, args any) ToolCall {
	var s string
	switch a := args.(type) {
	case string:
		s = a
	case []byte:
		s = string(a)
	default:
		b, err := json.Marshal(a)
		if err != nil {
			panic(fmt.Sprintf("llmscript.Call(%q): %v", name, err))
		}
		s = string(b)
	}
	return ToolCall{Name: name, Arguments: s}
}

// Error replies with an HTTP error status and an OpenAI-style body
// {"error":{"message","type","code"}}; type and code are derived from the
// status (for example 429 → "rate_limit_error"/"rate_limit_exceeded").
func Error(status int, message string) Step {
	typ, code := errorDefaults(status)
	return ErrorTyped(status, typ, code, message)
}

// ErrorTyped is [Error] with an explicit error type and code.
func ErrorTyped(status int, errType, code, message string) Step {
	return Step{kind: kindError, status: status, errType: errType, errCode: code, content: message}
}

// Raw replies with exactly the given status, Content-Type and body, for
// malformed or unexpected responses (for example an HTML error page).
func Raw(status int, contentType, body string) Step {
	return Step{kind: kindRaw, status: status, contentType: contentType, body: []byte(body)}
}

// Truncated replies 200 with a chat completion cut off mid-JSON.
func Truncated() Step {
	return Raw(http.StatusOK, "application/json",
		`{"id":"chatcmpl-fake","object":"chat.completion","choices":[{"index":0,"message":{"role":"assist`)
}

// EmptyChoices replies 200 with a well-formed completion whose choices
// array is empty.
func EmptyChoices() Step {
	return Raw(http.StatusOK, "application/json",
		`{"id":"chatcmpl-fake","object":"chat.completion","created":0,"model":"fake","choices":[],`+
			`"usage":{"prompt_tokens":1,"completion_tokens":0,"total_tokens":1}}`)
}

// Drop closes the connection without sending any response.
func Drop() Step { return Step{kind: kindDrop} }

// Hang never replies: the request stays in flight until the client cancels
// it or the server closes. Use [Step.Until] for a call the caller releases.
func Hang() Step { return Step{kind: kindHang} }

// Endless replies with status and Content-Type, writes prefix, then
// writes filler over and over without ever ending the body, until the
// client goes away or the server closes: a model stuck in a loop behind a
// server that streams its output.
func Endless(status int, contentType, prefix, filler string) Step {
	return Step{kind: kindEndless, status: status, contentType: contentType, body: []byte(prefix), content: filler}
}

// Func computes the step from the recorded request, for example to echo the
// last user message. The returned step may itself be a Func.
func Func(fn func(Request) Step) Step { return Step{kind: kindFunc, fn: fn} }

// After returns a copy of s that waits d before replying. The wait ends
// early, without a reply, if the client disconnects or the server closes.
func (s Step) After(d time.Duration) Step {
	s.delay = d
	return s
}

// Until returns a copy of s that replies only once g is released. The wait
// ends early, without a reply, if the client disconnects or the server
// closes. A delay set with [Step.After] starts after the release.
func (s Step) Until(g *Gate) Step {
	s.gate = g
	return s
}

// WithHeader returns a copy of s that also sets the response header key,
// for example "Retry-After".
func (s Step) WithHeader(key, value string) Step {
	s.header = append(slices.Clone(s.header), [2]string{key, value})
	return s
}

// WithUsage returns a copy of s that reports the given token usage instead
// of the default word-count estimate.
func (s Step) WithUsage(u Usage) Step {
	s.usage = &u
	return s
}

// WithFinishReason returns a copy of s that reports finish_reason r (for
// example "length") instead of "stop" or "tool_calls".
func (s Step) WithFinishReason(r string) Step {
	s.finishReason = r
	return s
}

// Gate holds [Step.Until] steps in flight until the caller releases it. One
// gate may hold any number of requests; Release lets all of them proceed.
type Gate struct {
	once sync.Once
	ch   chan struct{}
}

// NewGate returns an unreleased gate.
func NewGate() *Gate { return &Gate{ch: make(chan struct{})} }

// Release lets every current and future waiter proceed. It is idempotent.
func (g *Gate) Release() { g.once.Do(func() { close(g.ch) }) }

func errorDefaults(status int) (typ, code string) {
	switch {
	case status == http.StatusUnauthorized:
		return "invalid_request_error", "invalid_api_key"
	case status == http.StatusTooManyRequests:
		return "rate_limit_error", "rate_limit_exceeded"
	case status == http.StatusNotFound:
		return "invalid_request_error", "not_found"
	case status >= 500:
		return "server_error", "server_error"
	default:
		return "invalid_request_error", "invalid_request"
	}
}
