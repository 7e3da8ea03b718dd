package invocation

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/lisabot/lisa/messages"
)

// step is one scripted LLM reply.
type step func(req messages.ChatRequest) (messages.ChatResponse, error)

// fakeLLM replays steps in order and records every request.
type fakeLLM struct {
	mu    sync.Mutex
	steps []step
	reqs  []messages.ChatRequest
}

func newFakeLLM(steps ...step) *fakeLLM { return &fakeLLM{steps: steps} }

func (f *fakeLLM) Chat(_ context.Context, req messages.ChatRequest) (messages.ChatResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	cp := messages.ChatRequest{Messages: slices.Clone(req.Messages), Tools: slices.Clone(req.Tools), AnswerOnly: req.AnswerOnly, AnswerSchema: req.AnswerSchema}
	for i := range cp.Messages {
		cp.Messages[i].ToolCalls = slices.Clone(cp.Messages[i].ToolCalls)
	}
	f.reqs = append(f.reqs, cp)
	if len(f.steps) == 0 {
		return messages.ChatResponse{}, errors.New("fake LLM: script exhausted")
	}
	s := f.steps[0]
	f.steps = f.steps[1:]
	return s(cp)
}

func (f *fakeLLM) requests() []messages.ChatRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.reqs)
}

// final replies with the answer contract.
func final(markdown string, urls ...string) step {
	if urls == nil {
		urls = []string{}
	}
	b, _ := json.Marshal(map[string]any{"markdown": markdown, "source_urls": urls})
	return text(string(b))
}

// text replies with raw assistant text.
func text(s string) step {
	return func(messages.ChatRequest) (messages.ChatResponse, error) {
		return messages.ChatResponse{Content: s}, nil
	}
}

// calls replies with tool calls.
func calls(cs ...messages.ModelToolCall) step {
	return func(messages.ChatRequest) (messages.ChatResponse, error) {
		return messages.ChatResponse{ToolCalls: cs}, nil
	}
}

// fail replies with an error.
func fail(err error) step {
	return func(messages.ChatRequest) (messages.ChatResponse, error) { return messages.ChatResponse{}, err }
}

func call(id, name, args string) messages.ModelToolCall {
	return messages.ModelToolCall{ID: id, Name: name, Arguments: args}
}

// fakeTool records its arguments and answers with fn.
type fakeTool struct {
	spec messages.ToolSpec
	fn   func(args json.RawMessage) messages.ToolResult

	mu   sync.Mutex
	args []string
}

func (f *fakeTool) Spec() messages.ToolSpec { return f.spec }

func (f *fakeTool) Call(_ context.Context, args json.RawMessage) messages.ToolResult {
	f.mu.Lock()
	f.args = append(f.args, string(args))
	f.mu.Unlock()
	return f.fn(args)
}

func (f *fakeTool) calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.args)
}

const querySchema = `{"type":"object","properties":{"query":{"type":"string"},"limit":{"type":"integer"}},` +
	`"required":["query"],"additionalProperties":false}`

func newTool(name string, fn func(args json.RawMessage) messages.ToolResult) *fakeTool {
	return &fakeTool{
		spec: messages.ToolSpec{Name: name, Description: "Test tool " + name + ".", Parameters: json.RawMessage(querySchema)},
		fn:   fn,
	}
}

// okTool returns content and sources on every call.
func okTool(name, content string, urls ...string) *fakeTool {
	return newTool(name, func(json.RawMessage) messages.ToolResult {
		return messages.ToolResult{OK: true, Content: content, SourceURLs: urls}
	})
}

// decodeTool parses a tool message as the model sees it.
func decodeTool(t *testing.T, m messages.ChatMessage) toolPayload {
	t.Helper()
	if m.Role != messages.RoleTool {
		t.Fatalf("message role = %q, want tool", m.Role)
	}
	var p toolPayload
	if err := json.Unmarshal([]byte(m.Content), &p); err != nil {
		t.Fatalf("tool message is not JSON: %v: %s", err, m.Content)
	}
	return p
}

// toolMessages returns the tool messages of a request.
func toolMessages(req messages.ChatRequest) []messages.ChatMessage {
	var out []messages.ChatMessage
	for _, m := range req.Messages {
		if m.Role == messages.RoleTool {
			out = append(out, m)
		}
	}
	return out
}
