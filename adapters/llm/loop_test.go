package llm

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lisabot/lisa/actors/orchestrate"
	"github.com/lisabot/lisa/messages"
	"github.com/lisabot/lisa/testkit/llmfake"
)

// echoTool is a test tool: it returns its query and cites one URL.
type echoTool struct{ calls int }

func (e *echoTool) Spec() orchestrate.ToolSpec {
	return orchestrate.ToolSpec{Name: "web_search", Description: "search the web",
		Parameters: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string"}},"required":["query"],"additionalProperties":false}`)}
}

func (e *echoTool) Call(_ context.Context, args json.RawMessage) orchestrate.ToolResult {
	e.calls++
	var a struct{ Query string }
	_ = json.Unmarshal(args, &a)
	return orchestrate.ToolResult{OK: true, Code: "ok", Content: "results for " + a.Query, SourceURLs: []string{"https://example.org/" + a.Query}}
}

// TestLoopOverTheWire runs the orchestrator with the go-openai adapter
// against the scripted server, so every case crosses the real wire format.
func TestLoopOverTheWire(t *testing.T) {
	noSleep := func(ctx context.Context, _ time.Duration) error { return ctx.Err() }
	cases := []struct {
		name     string
		steps    []llmfake.Step
		lim      orchestrate.Limits
		timeout  time.Duration
		want     orchestrate.Answer
		wantErr  messages.Code
		wantReqs int
	}{
		{name: "final answer", steps: []llmfake.Step{llmfake.Answer("hi")}, want: orchestrate.Answer{Markdown: "hi"}, wantReqs: 1},
		{name: "several tool rounds", steps: []llmfake.Step{
			llmfake.ToolCalls(llmfake.Call("web_search", map[string]string{"query": "a"})),
			llmfake.ToolCalls(llmfake.Call("web_search", map[string]string{"query": "b"})),
			llmfake.Answer("found", "https://example.org/a", "https://example.org/b", "https://invented.example/"),
		}, want: orchestrate.Answer{Markdown: "found", SourceURLs: []string{"https://example.org/a", "https://example.org/b"}}, wantReqs: 3},
		{name: "malformed tool arguments", steps: []llmfake.Step{
			llmfake.ToolCalls(llmfake.Call("web_search", `{"query": `)),
			llmfake.Answer("recovered"),
		}, want: orchestrate.Answer{Markdown: "recovered"}, wantReqs: 2},
		{name: "unknown tool", steps: []llmfake.Step{
			llmfake.ToolCalls(llmfake.Call("launch_rockets", map[string]int{"count": 3})),
			llmfake.Answer("no rockets"),
		}, want: orchestrate.Answer{Markdown: "no rockets"}, wantReqs: 2},
		{name: "iteration budget exhausted", lim: orchestrate.Limits{MaxIterations: 2, MaxToolCalls: 10}, steps: []llmfake.Step{
			llmfake.ToolCalls(llmfake.Call("web_search", map[string]string{"query": "1"})),
			llmfake.ToolCalls(llmfake.Call("web_search", map[string]string{"query": "2"})),
		}, want: orchestrate.Answer{Fallback: orchestrate.FallbackOverload}, wantReqs: 2},
		{name: "tool budget exhausted", lim: orchestrate.Limits{MaxIterations: 8, MaxToolCalls: 1}, steps: []llmfake.Step{
			llmfake.ToolCalls(llmfake.Call("web_search", map[string]string{"query": "1"})),
			llmfake.ToolCalls(llmfake.Call("web_search", map[string]string{"query": "2"})),
		}, want: orchestrate.Answer{Fallback: orchestrate.FallbackOverload}, wantReqs: 2},
		{name: "malformed final JSON repaired", steps: []llmfake.Step{
			llmfake.Text("plain prose, not JSON"), llmfake.Answer("fixed"),
		}, want: orchestrate.Answer{Markdown: "fixed"}, wantReqs: 2},
		{name: "malformed twice falls back", steps: []llmfake.Step{
			llmfake.Text("nope"), llmfake.Text(`{"markdown": 3}`),
		}, want: orchestrate.Answer{Fallback: orchestrate.FallbackGeneric}, wantReqs: 2},
		{name: "429 then success", steps: []llmfake.Step{
			llmfake.Error(429, "slow down"), llmfake.Answer("after the wait"),
		}, want: orchestrate.Answer{Markdown: "after the wait"}, wantReqs: 2},
		{name: "timeout", timeout: 200 * time.Millisecond, steps: []llmfake.Step{
			llmfake.Answer("late").After(5 * time.Second), llmfake.Answer("late").After(5 * time.Second), llmfake.Answer("late").After(5 * time.Second),
		}, wantErr: messages.CodeLLMTimeout, wantReqs: 3},
		{name: "persistent 500", steps: []llmfake.Step{
			llmfake.Error(500, "a"), llmfake.Error(500, "b"), llmfake.Error(500, "c"),
		}, wantErr: messages.CodeLLMUnavailable, wantReqs: 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := llmfake.Start(t, llmfake.WithModels("m"), llmfake.WithDefault(llmfake.Error(500, "script exhausted")))
			srv.Enqueue(c.steps...)
			timeout := c.timeout
			if timeout == 0 {
				timeout = 5 * time.Second
			}
			client := New(Config{BaseURL: srv.URL(), Model: "m", MaxOutputTokens: 100, Timeout: timeout,
				Sleep: noSleep, Jitter: func() float64 { return 0 }})
			lim := c.lim
			if lim.MaxIterations == 0 {
				lim = orchestrate.Limits{MaxIterations: 8, MaxToolCalls: 6, MaxRequestCharacters: 50000, MaxResponseCharacters: 5000, MaxToolOutputCharacters: 2000}
			}
			got, err := orchestrate.Run(context.Background(), client, []orchestrate.Tool{&echoTool{}}, orchestrate.Prompt{Persona: "be kind", ContextBlock: "<room_context/>"}, lim)
			if c.wantErr != "" {
				var le *messages.Error
				if !errors.As(err, &le) || le.Code != c.wantErr {
					t.Fatalf("err = %v, want code %s", err, c.wantErr)
				}
			} else if err != nil {
				t.Fatal(err)
			} else if got.Markdown != c.want.Markdown || got.Fallback != c.want.Fallback || strings.Join(got.SourceURLs, " ") != strings.Join(c.want.SourceURLs, " ") {
				t.Fatalf("answer = %+v, want %+v", got, c.want)
			}
			reqs := srv.Requests()
			if len(reqs) != c.wantReqs {
				t.Fatalf("requests = %d, want %d", len(reqs), c.wantReqs)
			}
			if len(reqs[0].Tools) != 1 || reqs[0].Tools[0].Name != "web_search" {
				t.Fatalf("tools on the wire = %+v", reqs[0].Tools)
			}
			if !strings.HasPrefix(reqs[0].Messages[0].Content, orchestrate.SystemPrompt("be kind", nil)[:40]) {
				t.Fatalf("system prompt does not start with host policy: %.80q", reqs[0].Messages[0].Content)
			}
		})
	}
}
