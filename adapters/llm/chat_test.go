package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lisabot/lisa/messages"
	"github.com/lisabot/lisa/testkit/llmfake"
)

const (
	testKey      = "sk-CANARY-chat-key-456"
	providerText = "PROVIDER-CANARY echoing the prompt"
	searchSchema = `{"type":"object","properties":{"query":{"type":"string"}},"required":["query"],"additionalProperties":false}`
)

// sleepLog records the waits of a client instead of sleeping.
type sleepLog struct {
	mu sync.Mutex
	d  []time.Duration
}

func (s *sleepLog) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.d = append(s.d, d)
	s.mu.Unlock()
	return ctx.Err()
}

func (s *sleepLog) waits() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.d...)
}

// chatClient returns a client for srv with deterministic jitter (backoff
// exactly 100ms, 200ms, ...) and recorded sleeps.
func chatClient(srv *llmfake.Server, mod func(*Config)) (*Client, *sleepLog) {
	sl := &sleepLog{}
	cfg := Config{
		BaseURL: srv.URL(), APIKey: testKey, Model: "m", MaxOutputTokens: 70, Temperature: ptr(0.25),
		Timeout: 2 * time.Second, RetryBaseDelay: 100 * time.Millisecond,
		Jitter: func() float64 { return 0.5 }, Sleep: sl.sleep,
	}
	if mod != nil {
		mod(&cfg)
	}
	return New(cfg), sl
}

func simpleRequest() messages.ChatRequest {
	return messages.ChatRequest{
		Messages: []messages.ChatMessage{
			{Role: messages.RoleSystem, Content: "system prompt"},
			{Role: messages.RoleUser, Content: "user says hi"},
		},
		Tools: []messages.ToolSpec{{Name: "web_search", Description: "Search.", Parameters: json.RawMessage(searchSchema)}},
	}
}

const toolCallBody = `{"id":"x","object":"chat.completion","created":0,"model":"m","choices":[{"index":0,` +
	`"message":{"role":"assistant","content":null,"tool_calls":[{"id":%q,"type":"function","function":{"name":%q,"arguments":"{}"}}]},` +
	`"finish_reason":"tool_calls"}]}`

func TestChat(t *testing.T) {
	ms := time.Millisecond
	cases := []struct {
		name     string
		steps    []llmfake.Step
		mod      func(*Config)
		deadline time.Duration // caller deadline; 0 means none
		want     messages.ChatResponse
		code     messages.Code
		perm     bool
		reqs     int
		waits    []time.Duration
		after    time.Duration // expected RetryAfter on the error
	}{
		{name: "text answer", steps: []llmfake.Step{llmfake.Answer("hello", "https://a.example/")},
			want: messages.ChatResponse{Content: `{"markdown":"hello","source_urls":["https://a.example/"]}`}, reqs: 1},
		{name: "tool calls parsed",
			steps: []llmfake.Step{llmfake.ToolCalls(
				llmfake.Call("web_search", map[string]string{"query": "go"}),
				llmfake.ToolCall{ID: "call_mine", Name: "fetch_web_page", Arguments: `{"url":"https://a.example/"}`})},
			want: messages.ChatResponse{ToolCalls: []messages.ModelToolCall{
				{ID: "call_fake_0_0", Name: "web_search", Arguments: `{"query":"go"}`},
				{ID: "call_mine", Name: "fetch_web_page", Arguments: `{"url":"https://a.example/"}`},
			}}, reqs: 1},
		{name: "unknown response fields ignored",
			steps: []llmfake.Step{llmfake.Raw(200, "application/json",
				`{"id":"x","novel":{"a":[1,2]},"choices":[{"index":0,"extra":true,"message":{"role":"assistant","content":"ok","mood":"good"},"finish_reason":"stop"}]}`)},
			want: messages.ChatResponse{Content: "ok"}, reqs: 1},
		{name: "429 then success honours Retry-After",
			steps: []llmfake.Step{llmfake.Error(429, providerText).WithHeader("Retry-After", "2"), llmfake.Text("ok")},
			want:  messages.ChatResponse{Content: "ok", Unanswered: 1}, reqs: 2, waits: []time.Duration{2 * time.Second}},
		{name: "429 without Retry-After backs off",
			steps: []llmfake.Step{llmfake.Error(429, providerText), llmfake.Text("ok")},
			want:  messages.ChatResponse{Content: "ok", Unanswered: 1}, reqs: 2, waits: []time.Duration{100 * ms}},
		{name: "dropped connection then success",
			steps: []llmfake.Step{llmfake.Drop(), llmfake.Text("ok")},
			want:  messages.ChatResponse{Content: "ok", Unanswered: 1}, reqs: 2, waits: []time.Duration{100 * ms}},
		{name: "persistent 500 gives up after bounded attempts",
			steps: []llmfake.Step{llmfake.Error(500, providerText), llmfake.Error(502, providerText), llmfake.Error(503, providerText), llmfake.Text("never")},
			code:  messages.CodeLLMUnavailable, reqs: 3, waits: []time.Duration{100 * ms, 200 * ms}},
		{name: "jitter scales the backoff",
			steps: []llmfake.Step{llmfake.Error(500, providerText), llmfake.Error(500, providerText), llmfake.Error(500, providerText)},
			mod:   func(c *Config) { c.Jitter = func() float64 { return 0.99 } },
			code:  messages.CodeLLMUnavailable, reqs: 3, waits: []time.Duration{149 * ms, 298 * ms}},
		{name: "400 is not retried",
			steps: []llmfake.Step{llmfake.Error(400, providerText), llmfake.Text("never")},
			code:  messages.CodeLLMRejected, perm: true, reqs: 1},
		{name: "every attempt times out",
			steps: []llmfake.Step{llmfake.Hang(), llmfake.Hang(), llmfake.Hang()},
			mod:   func(c *Config) { c.Timeout = 100 * ms },
			code:  messages.CodeLLMTimeout, reqs: 3, waits: []time.Duration{100 * ms, 200 * ms}},
		{name: "timeout then success",
			steps: []llmfake.Step{llmfake.Text("late").After(5 * time.Second), llmfake.Text("ok")},
			mod:   func(c *Config) { c.Timeout = 100 * ms },
			want:  messages.ChatResponse{Content: "ok", Unanswered: 1}, reqs: 2, waits: []time.Duration{100 * ms}},
		{name: "caller deadline ends the call",
			steps:    []llmfake.Step{llmfake.Hang(), llmfake.Text("never")},
			deadline: 150 * ms, code: messages.CodeLLMTimeout, reqs: 1},
		{name: "no retry when the wait would pass the caller deadline",
			steps:    []llmfake.Step{llmfake.Error(503, providerText).WithHeader("Retry-After", "5"), llmfake.Text("never")},
			deadline: time.Second, code: messages.CodeLLMUnavailable, reqs: 1, after: 5 * time.Second},
		{name: "Retry-After beyond the maximum delay is reported, not waited",
			steps: []llmfake.Step{llmfake.Error(429, providerText).WithHeader("Retry-After", "120"), llmfake.Text("never")},
			code:  messages.CodeLLMUnavailable, reqs: 1, after: 2 * time.Minute},
		{name: "truncated body",
			steps: []llmfake.Step{llmfake.Truncated(), llmfake.Text("never")},
			code:  messages.CodeLLMBadResponse, reqs: 1},
		{name: "empty choices",
			steps: []llmfake.Step{llmfake.EmptyChoices(), llmfake.Text("never")},
			code:  messages.CodeLLMBadResponse, reqs: 1},
		// llama.cpp leaves the id out for templates that make none
		// (common/chat.cpp, common_chat_msg::to_json_oaicompat): the call
		// is kept and the loop gives it an id.
		{name: "tool call without id",
			steps: []llmfake.Step{llmfake.Raw(200, "application/json", fmt.Sprintf(toolCallBody, "", "web_search"))},
			want:  messages.ChatResponse{ToolCalls: []messages.ModelToolCall{{Name: "web_search", Arguments: "{}"}}}, reqs: 1},
		{name: "tool call without name",
			steps: []llmfake.Step{llmfake.Raw(200, "application/json", fmt.Sprintf(toolCallBody, "call_1", ""))},
			code:  messages.CodeLLMBadResponse, reqs: 1},
		{name: "retries disabled",
			steps: []llmfake.Step{llmfake.Error(500, providerText), llmfake.Text("never")},
			mod:   func(c *Config) { c.MaxAttempts = 1 },
			code:  messages.CodeLLMUnavailable, reqs: 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := llmfake.Start(t, llmfake.WithAPIKey(testKey), llmfake.WithModels("m"))
			srv.Enqueue(c.steps...)
			cl, sl := chatClient(srv, c.mod)
			ctx := context.Background()
			if c.deadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, c.deadline)
				defer cancel()
			}
			got, err := cl.Chat(ctx, simpleRequest())
			if n := len(srv.Requests()); n != c.reqs {
				t.Errorf("%d requests on the wire, want %d", n, c.reqs)
			}
			if w := sl.waits(); !reflect.DeepEqual(w, c.waits) {
				t.Errorf("waits = %v, want %v", w, c.waits)
			}
			if c.code == "" {
				got.Usage = messages.TokenUsage{} // TestChatReportsUsage covers it
				got.FinishReason = ""             // TestWireShapes covers it
				if err != nil || !reflect.DeepEqual(got, c.want) {
					t.Fatalf("Chat = %+v, %v; want %+v", got, err, c.want)
				}
				return
			}
			var le *messages.Error
			if !errors.As(err, &le) || le.Code != c.code || le.Permanent != c.perm || le.RetryAfter != c.after {
				t.Fatalf("err = %#v, want code %s permanent=%v retryAfter=%v", err, c.code, c.perm, c.after)
			}
			for _, leak := range []string{testKey, providerText, "user says hi", "system prompt"} {
				if strings.Contains(err.Error(), leak) {
					t.Errorf("error leaks %q: %v", leak, err)
				}
			}
		})
	}
}

func TestChatWireFormat(t *testing.T) {
	srv := llmfake.Start(t, llmfake.WithAPIKey(testKey), llmfake.WithModels("m"))
	srv.Enqueue(llmfake.Text("one"), llmfake.Text("two"), llmfake.Text("three"))
	cl, _ := chatClient(srv, nil)
	req := messages.ChatRequest{
		Messages: []messages.ChatMessage{
			{Role: messages.RoleSystem, Content: "host policy"},
			{Role: messages.RoleUser, Content: "room context"},
			{Role: messages.RoleAssistant, ToolCalls: []messages.ModelToolCall{{ID: "call_1", Name: "web_search", Arguments: `{"query":"q"}`}}},
			{Role: messages.RoleTool, ToolCallID: "call_1", Content: `{"ok":true}`},
		},
		Tools: []messages.ToolSpec{
			{Name: "web_search", Description: "Search the web.", Parameters: json.RawMessage(searchSchema)},
			{Name: "no_args", Description: "Takes nothing."},
		},
	}
	if _, err := cl.Chat(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	r := srv.Requests()[0]
	if !r.Authorized || r.Model != "m" || r.MaxTokens != 70 || r.Temperature == nil || *r.Temperature != 0.25 || r.Stream {
		t.Fatalf("request = %+v", r)
	}
	wantMsgs := []llmfake.Message{
		{Role: "system", Content: "host policy"},
		{Role: "user", Content: "room context"},
		{Role: "assistant", ToolCalls: []llmfake.ToolCall{{ID: "call_1", Name: "web_search", Arguments: `{"query":"q"}`}}},
		{Role: "tool", ToolCallID: "call_1", Content: `{"ok":true}`},
	}
	if !reflect.DeepEqual(r.Messages, wantMsgs) {
		t.Errorf("messages = %+v", r.Messages)
	}
	if len(r.Tools) != 2 || string(r.ToolChoice) != `"auto"` {
		t.Fatalf("tools = %+v, tool_choice = %s", r.Tools, r.ToolChoice)
	}
	if tl := r.Tools[0]; tl.Type != "function" || tl.Name != "web_search" || tl.Description != "Search the web." || !tl.Strict || !jsonEqual(tl.Parameters, searchSchema) {
		t.Errorf("tool 0 = %+v (%s)", tl, tl.Parameters)
	}
	if tl := r.Tools[1]; !tl.Strict || !jsonEqual(tl.Parameters, `{"type":"object","properties":{},"additionalProperties":false}`) {
		t.Errorf("tool without schema = %+v (%s)", tl, tl.Parameters)
	}

	strictOff, _ := chatClient(srv, func(c *Config) { c.DisableStrictTools = true })
	if _, err := strictOff.Chat(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if r := srv.Requests()[1]; r.Tools[0].Strict || bytes.Contains(r.Body, []byte(`"strict"`)) {
		t.Errorf("strict sent although disabled: %s", r.Body)
	}

	if _, err := cl.Chat(context.Background(), messages.ChatRequest{Messages: req.Messages[:2]}); err != nil {
		t.Fatal(err)
	}
	if r := srv.Requests()[2]; len(r.Tools) != 0 || r.ToolChoice != nil {
		t.Errorf("request without tools sent tools %+v / tool_choice %s", r.Tools, r.ToolChoice)
	}
}

func jsonEqual(a json.RawMessage, b string) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal([]byte(b), &y) == nil && reflect.DeepEqual(x, y)
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 7, 23, 22, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Duration{
		"":                              0,
		"3":                             3 * time.Second,
		" 10 ":                          10 * time.Second,
		"0":                             0,
		"-5":                            0,
		"soon":                          0,
		"99999999":                      24 * time.Hour,
		"Thu, 23 Jul 2026 22:00:30 GMT": 30 * time.Second,
		"Thu, 23 Jul 2026 21:59:00 GMT": 0,
	} {
		if got := parseRetryAfter(in, now); got != want {
			t.Errorf("parseRetryAfter(%q) = %v, want %v", in, got, want)
		}
	}
}

// TestClientSideRefusalIsPermanent: go-openai refuses max_tokens for
// reasoning models before sending anything; that is a configuration
// problem, not an outage, and must not be retried.
func TestClientSideRefusalIsPermanent(t *testing.T) {
	srv := llmfake.Start(t, llmfake.WithModels("o1-mini"))
	c := New(Config{BaseURL: srv.URL(), Model: "o1-mini", MaxOutputTokens: 100, Timeout: 5 * time.Second,
		Sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() }})
	_, err := c.Chat(context.Background(), messages.ChatRequest{Messages: []messages.ChatMessage{{Role: messages.RoleUser, Content: "hi"}}})
	var le *messages.Error
	if !errors.As(err, &le) || !le.Permanent || le.Code != messages.CodeLLMRejected {
		t.Fatalf("err = %#v, want a permanent rejection", err)
	}
	if n := len(srv.Requests()); n != 0 {
		t.Fatalf("%d requests reached the server", n)
	}
}

func ptr(f float64) *float64 { return &f }
