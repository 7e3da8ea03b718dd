package llmfake

import (
	"testing"
	"time"

	"github.com/lisabot/lisa/devkit/llmscript"
)

// The types are aliases of devkit/llmscript's, so values pass freely between
// code written against either package.
type (
	// Server is [llmscript.Server].
	Server = llmscript.Server
	// Option is [llmscript.Option].
	Option = llmscript.Option
	// Step is [llmscript.Step].
	Step = llmscript.Step
	// ToolCall is [llmscript.ToolCall].
	ToolCall = llmscript.ToolCall
	// Usage is [llmscript.Usage].
	Usage = llmscript.Usage
	// Gate is [llmscript.Gate].
	Gate = llmscript.Gate
	// Request is [llmscript.Request].
	Request = llmscript.Request
	// Message is [llmscript.Message].
	Message = llmscript.Message
	// Tool is [llmscript.Tool].
	Tool = llmscript.Tool
)

// Start returns a listening server that is closed when t's test ends. Any
// failure to listen fails the test.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	s := llmscript.New(opts...)
	if err := s.Listen(); err != nil {
		t.Fatalf("llmfake: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// New is [llmscript.New].
func New(opts ...Option) *Server { return llmscript.New(opts...) }

// WithTrace is [llmscript.WithTrace].
func WithTrace(fn func(arrived, answered time.Time)) Option { return llmscript.WithTrace(fn) }

// WithAPIKey is [llmscript.WithAPIKey].
func WithAPIKey(key string) Option { return llmscript.WithAPIKey(key) }

// WithModels is [llmscript.WithModels].
func WithModels(names ...string) Option { return llmscript.WithModels(names...) }

// WithRoute is [llmscript.WithRoute].
func WithRoute(method, path string, step Step) Option { return llmscript.WithRoute(method, path, step) }

// WithDefault is [llmscript.WithDefault].
func WithDefault(step Step) Option { return llmscript.WithDefault(step) }

// WithClock is [llmscript.WithClock].
func WithClock(now func() time.Time) Option { return llmscript.WithClock(now) }

// Text is [llmscript.Text].
func Text(content string) Step { return llmscript.Text(content) }

// Answer is [llmscript.Answer].
func Answer(markdown string, sourceURLs ...string) Step {
	return llmscript.Answer(markdown, sourceURLs...)
}

// ToolCalls is [llmscript.ToolCalls].
func ToolCalls(calls ...ToolCall) Step { return llmscript.ToolCalls(calls...) }

// Call is [llmscript.Call].
func Call(name string, args any) ToolCall { return llmscript.Call(name, args) }

// Error is [llmscript.Error].
func Error(status int, message string) Step { return llmscript.Error(status, message) }

// ErrorTyped is [llmscript.ErrorTyped].
func ErrorTyped(status int, errType, code, message string) Step {
	return llmscript.ErrorTyped(status, errType, code, message)
}

// Raw is [llmscript.Raw].
func Raw(status int, contentType, body string) Step {
	return llmscript.Raw(status, contentType, body)
}

// Truncated is [llmscript.Truncated].
func Truncated() Step { return llmscript.Truncated() }

// EmptyChoices is [llmscript.EmptyChoices].
func EmptyChoices() Step { return llmscript.EmptyChoices() }

// Drop is [llmscript.Drop].
func Drop() Step { return llmscript.Drop() }

// Hang is [llmscript.Hang].
func Hang() Step { return llmscript.Hang() }

// Func is [llmscript.Func].
func Func(fn func(Request) Step) Step { return llmscript.Func(fn) }

// NewGate is [llmscript.NewGate].
func NewGate() *Gate { return llmscript.NewGate() }

// Endless is [llmscript.Endless].
func Endless(status int, contentType, prefix, filler string) Step {
	return llmscript.Endless(status, contentType, prefix, filler)
}
