package llmscript_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/lisabot/lisa/devkit/llmscript"
)

const testKey = "sk-test-secret-key"

// fixedClock is the injected server clock.
func fixedClock() time.Time { return time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC) }

// start returns a listening server that is closed when t's test ends,
// like testkit/llmfake.Start (devkit must not import the test kit).
func start(t testing.TB, opts ...llmscript.Option) *llmscript.Server {
	t.Helper()
	s := llmscript.New(opts...)
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// client returns a go-openai client pointed at srv.
func client(srv *llmscript.Server, key string) *openai.Client {
	cfg := openai.DefaultConfig(key)
	cfg.BaseURL = srv.URL()
	return openai.NewClientWithConfig(cfg)
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func userRequest(text string) openai.ChatCompletionRequest {
	return openai.ChatCompletionRequest{
		Model:    "operator-model",
		Messages: []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: text}},
	}
}

const searchSchema = `{"type":"object","properties":{"query":{"type":"string","minLength":1,"maxLength":500}},"required":["query"],"additionalProperties":false}`

func TestTextRoundTripRecordsRequest(t *testing.T) {
	srv := start(t, llmscript.WithAPIKey(testKey), llmscript.WithClock(fixedClock))
	srv.Enqueue(llmscript.Text("Hello from Lisa").WithUsage(llmscript.Usage{PromptTokens: 12, CompletionTokens: 3}))

	resp, err := client(srv, testKey).CreateChatCompletion(testCtx(t), openai.ChatCompletionRequest{
		Model: "operator-model",
		Messages: []openai.ChatCompletionMessage{
			{Role: openai.ChatMessageRoleSystem, Content: "host policy"},
			{Role: openai.ChatMessageRoleUser, Content: "hi lisa"},
		},
		Tools: []openai.Tool{{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{
			Name: "web_search", Description: "Search the web", Parameters: json.RawMessage(searchSchema), Strict: true,
		}}},
		ToolChoice:  "auto",
		MaxTokens:   700,
		Temperature: 0.7,
		ResponseFormat: &openai.ChatCompletionResponseFormat{
			Type:       openai.ChatCompletionResponseFormatTypeJSONSchema,
			JSONSchema: &openai.ChatCompletionResponseFormatJSONSchema{Name: "answer", Schema: json.RawMessage(`{"type":"object"}`), Strict: true},
		},
	})
	if err != nil {
		t.Fatalf("CreateChatCompletion: %v", err)
	}
	if len(resp.Choices) != 1 || resp.Choices[0].Message.Content != "Hello from Lisa" ||
		resp.Choices[0].FinishReason != openai.FinishReasonStop || resp.Choices[0].Message.Role != "assistant" {
		t.Fatalf("unexpected response: %+v", resp)
	}
	if resp.Model != "operator-model" || resp.Created != fixedClock().Unix() || resp.Object != "chat.completion" {
		t.Errorf("model/created/object = %q/%d/%q", resp.Model, resp.Created, resp.Object)
	}
	if u := resp.Usage; u.PromptTokens != 12 || u.CompletionTokens != 3 || u.TotalTokens != 15 {
		t.Errorf("usage = %+v", u)
	}

	reqs := srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("recorded %d requests, want 1", len(reqs))
	}
	r := reqs[0]
	if r.Model != "operator-model" || r.MaxTokens != 700 || r.MaxCompletionTokens != 0 || r.Stream {
		t.Errorf("model/max_tokens/max_completion_tokens/stream = %q/%d/%d/%v", r.Model, r.MaxTokens, r.MaxCompletionTokens, r.Stream)
	}
	if r.Temperature == nil || *r.Temperature < 0.6999 || *r.Temperature > 0.7001 {
		t.Errorf("temperature = %v, want 0.7", r.Temperature)
	}
	if !r.Authorized || !r.Time.Equal(fixedClock()) || r.Seq != 0 || r.ParseError != "" {
		t.Errorf("authorized/time/seq/parse = %v/%v/%d/%q", r.Authorized, r.Time, r.Seq, r.ParseError)
	}
	if len(r.Messages) != 2 || r.Messages[0].Role != "system" || r.LastUser() != "hi lisa" {
		t.Errorf("messages = %+v", r.Messages)
	}
	if got := r.ToolNames(); len(got) != 1 || got[0] != "web_search" || !r.Tools[0].Strict || r.Tools[0].Type != "function" {
		t.Errorf("tools = %+v", r.Tools)
	}
	assertJSONEqual(t, "tool schema", r.Tools[0].Parameters, json.RawMessage(searchSchema))
	assertJSONEqual(t, "tool_choice", r.ToolChoice, json.RawMessage(`"auto"`))
	var rf struct {
		Type       string `json:"type"`
		JSONSchema struct {
			Name string `json:"name"`
		} `json:"json_schema"`
	}
	if err := json.Unmarshal(r.ResponseFormat, &rf); err != nil || rf.Type != "json_schema" || rf.JSONSchema.Name != "answer" {
		t.Errorf("response_format = %s (%v)", r.ResponseFormat, err)
	}
	if !json.Valid(r.Body) {
		t.Errorf("raw body not recorded: %q", r.Body)
	}
	if dump := fmt.Sprintf("%+v", reqs); strings.Contains(dump, testKey) {
		t.Errorf("recorded requests expose the API key")
	}

	// Requests returns a copy.
	reqs[0].Messages[0].Content = "mutated"
	if srv.Requests()[0].Messages[0].Content != "host policy" {
		t.Error("Requests did not return a copy")
	}
}

func TestMaxCompletionTokensRecorded(t *testing.T) {
	srv := start(t)
	req := userRequest("hi")
	req.MaxCompletionTokens = 321
	if _, err := client(srv, "").CreateChatCompletion(testCtx(t), req); err != nil {
		t.Fatal(err)
	}
	if r := srv.Requests()[0]; r.MaxCompletionTokens != 321 || r.MaxTokens != 0 || r.Temperature != nil {
		t.Errorf("max_completion_tokens/max_tokens/temperature = %d/%d/%v", r.MaxCompletionTokens, r.MaxTokens, r.Temperature)
	}
}

func TestToolCallLoop(t *testing.T) {
	srv := start(t, llmscript.WithDefault(llmscript.Answer("Done.", "https://example.test/a")))
	srv.Enqueue(llmscript.ToolCalls(
		llmscript.Call("web_search", map[string]any{"query": "matrix", "result_count": 3}),
		llmscript.ToolCall{ID: "call_fixed", Name: "fetch_web_page", Arguments: `{"url":"https://example.test/a"}`},
	))
	c := client(srv, "")
	ctx := testCtx(t)

	first, err := c.CreateChatCompletion(ctx, userRequest("search please"))
	if err != nil {
		t.Fatal(err)
	}
	choice := first.Choices[0]
	if choice.FinishReason != openai.FinishReasonToolCalls || len(choice.Message.ToolCalls) != 2 || choice.Message.Content != "" {
		t.Fatalf("unexpected tool-call reply: %+v", choice)
	}
	calls := choice.Message.ToolCalls
	if calls[0].ID == "" || calls[0].ID == calls[1].ID || calls[1].ID != "call_fixed" || calls[0].Type != openai.ToolTypeFunction {
		t.Errorf("tool call ids/types = %+v", calls)
	}
	var args struct {
		Query       string `json:"query"`
		ResultCount int    `json:"result_count"`
	}
	if calls[0].Function.Name != "web_search" || json.Unmarshal([]byte(calls[0].Function.Arguments), &args) != nil ||
		args.Query != "matrix" || args.ResultCount != 3 {
		t.Errorf("web_search call = %+v", calls[0].Function)
	}
	if calls[1].Function.Name != "fetch_web_page" || calls[1].Function.Arguments != `{"url":"https://example.test/a"}` {
		t.Errorf("fetch call = %+v", calls[1].Function)
	}

	next := userRequest("search please")
	next.Messages = append(next.Messages, choice.Message,
		openai.ChatCompletionMessage{Role: openai.ChatMessageRoleTool, ToolCallID: calls[0].ID, Content: "1. result"},
		openai.ChatCompletionMessage{Role: openai.ChatMessageRoleTool, ToolCallID: calls[1].ID, Content: `{"artifact_id":"html_1"}`})
	final, err := c.CreateChatCompletion(ctx, next)
	if err != nil {
		t.Fatal(err)
	}
	var answer struct {
		Markdown   string   `json:"markdown"`
		SourceURLs []string `json:"source_urls"`
	}
	if err := json.Unmarshal([]byte(final.Choices[0].Message.Content), &answer); err != nil ||
		answer.Markdown != "Done." || len(answer.SourceURLs) != 1 {
		t.Errorf("final answer = %q (%v)", final.Choices[0].Message.Content, err)
	}

	msgs := srv.Requests()[1].Messages
	if len(msgs) != 4 || len(msgs[1].ToolCalls) != 2 || msgs[1].ToolCalls[1].Name != "fetch_web_page" ||
		msgs[2].ToolCallID != calls[0].ID || msgs[3].ToolCallID != "call_fixed" || msgs[3].Role != "tool" {
		t.Errorf("recorded tool loop messages = %+v", msgs)
	}
}

func TestScriptThenDefaultFunc(t *testing.T) {
	echo := llmscript.Func(func(r llmscript.Request) llmscript.Step { return llmscript.Text("echo: " + r.LastUser()) })
	srv := start(t, llmscript.WithDefault(echo))
	srv.Enqueue(llmscript.Text("one"), llmscript.Text("two"))
	c := client(srv, "")
	for i, want := range []string{"one", "two", "echo: three", "echo: four"} {
		if i == 2 && srv.Pending() != 0 {
			t.Errorf("Pending = %d, want 0", srv.Pending())
		}
		resp, err := c.CreateChatCompletion(testCtx(t), userRequest(strings.TrimPrefix(want, "echo: ")))
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.Choices[0].Message.Content; got != want {
			t.Errorf("reply %d = %q, want %q", i, got, want)
		}
	}
}

func TestHTTPErrors(t *testing.T) {
	tests := []struct {
		name     string
		step     llmscript.Step
		status   int
		errType  string
		code     string
		retryHdr string
	}{
		{"rate limited", llmscript.Error(429, "slow down").WithHeader("Retry-After", "7"), 429, "rate_limit_error", "rate_limit_exceeded", "7"},
		{"server error", llmscript.Error(500, "boom"), 500, "server_error", "server_error", ""},
		{"typed", llmscript.ErrorTyped(400, "invalid_request_error", "context_length_exceeded", "too long"), 400, "invalid_request_error", "context_length_exceeded", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := start(t)
			srv.Enqueue(tt.step)
			resp, err := client(srv, "").CreateChatCompletion(testCtx(t), userRequest("hi"))
			var apiErr *openai.APIError
			if !errors.As(err, &apiErr) {
				t.Fatalf("err = %v (%T), want *openai.APIError", err, err)
			}
			if apiErr.HTTPStatusCode != tt.status || apiErr.Type != tt.errType || apiErr.Code != tt.code || apiErr.Message == "" {
				t.Errorf("APIError = %+v", apiErr)
			}
			if got := resp.Header().Get("Retry-After"); got != tt.retryHdr {
				t.Errorf("Retry-After = %q, want %q", got, tt.retryHdr)
			}
		})
	}
}

func TestMalformedReplies(t *testing.T) {
	tests := []struct {
		name  string
		step  llmscript.Step
		check func(t *testing.T, resp openai.ChatCompletionResponse, err error)
	}{
		{"truncated JSON", llmscript.Truncated(), wantPlainError},
		{"HTML with 200", llmscript.Raw(200, "text/html", "<html>proxy login</html>"), wantPlainError},
		{"dropped connection", llmscript.Drop(), wantPlainError},
		{"HTML gateway error", llmscript.Raw(502, "text/html", "<html>bad gateway</html>"),
			func(t *testing.T, _ openai.ChatCompletionResponse, err error) {
				var reqErr *openai.RequestError
				if !errors.As(err, &reqErr) || reqErr.HTTPStatusCode != 502 {
					t.Errorf("err = %v (%T), want *openai.RequestError with 502", err, err)
				}
			}},
		{"empty choices", llmscript.EmptyChoices(),
			func(t *testing.T, resp openai.ChatCompletionResponse, err error) {
				if err != nil || len(resp.Choices) != 0 {
					t.Errorf("resp/err = %+v/%v, want decoded response with no choices", resp, err)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := start(t)
			srv.Enqueue(tt.step)
			resp, err := client(srv, "").CreateChatCompletion(testCtx(t), userRequest("hi"))
			tt.check(t, resp, err)
		})
	}
}

func wantPlainError(t *testing.T, _ openai.ChatCompletionResponse, err error) {
	t.Helper()
	var apiErr *openai.APIError
	if err == nil || errors.As(err, &apiErr) {
		t.Errorf("err = %v, want a non-API client error", err)
	}
}

func TestWaitingStepsHonourCancellation(t *testing.T) {
	tests := []struct {
		name string
		step llmscript.Step
	}{
		{"delay", llmscript.Text("late").After(time.Hour)},
		{"gate", llmscript.Text("held").Until(llmscript.NewGate())},
		{"hang", llmscript.Hang()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := start(t)
			srv.Enqueue(tt.step)
			ctx := testCtx(t)
			callCtx, cancel := context.WithCancel(ctx)
			errc := make(chan error, 1)
			go func() {
				_, err := client(srv, "").CreateChatCompletion(callCtx, userRequest("hi"))
				errc <- err
			}()
			if err := srv.WaitForInFlight(ctx, 1); err != nil {
				t.Fatal(err)
			}
			cancel()
			if err := <-errc; !errors.Is(err, context.Canceled) {
				t.Errorf("client err = %v, want context.Canceled", err)
			}
			if err := srv.WaitForInFlight(ctx, 0); err != nil {
				t.Fatalf("handler did not return after cancellation: %v", err)
			}
		})
	}
}

func TestDelayedReplyArrives(t *testing.T) {
	srv := start(t)
	srv.Enqueue(llmscript.Text("later").After(time.Millisecond))
	resp, err := client(srv, "").CreateChatCompletion(testCtx(t), userRequest("hi"))
	if err != nil || resp.Choices[0].Message.Content != "later" {
		t.Fatalf("resp/err = %+v/%v", resp, err)
	}
}

func TestCloseEndsHeldCalls(t *testing.T) {
	srv := llmscript.New(llmscript.WithDefault(llmscript.Hang()))
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	ctx := testCtx(t)
	errc := make(chan error, 1)
	go func() {
		_, err := client(srv, "").CreateChatCompletion(ctx, userRequest("hi"))
		errc <- err
	}()
	if err := srv.WaitForInFlight(ctx, 1); err != nil {
		t.Fatal(err)
	}
	srv.Close()
	if srv.InFlight() != 0 {
		t.Errorf("InFlight after Close = %d", srv.InFlight())
	}
	if err := <-errc; err == nil {
		t.Error("held call succeeded after Close")
	}
	srv.Close() // idempotent
}

func TestBearerAuth(t *testing.T) {
	srv := start(t, llmscript.WithAPIKey(testKey))
	srv.Enqueue(llmscript.Text("only for the right key"))
	ctx := testCtx(t)

	_, err := client(srv, "sk-wrong").CreateChatCompletion(ctx, userRequest("hi"))
	var apiErr *openai.APIError
	if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != 401 || apiErr.Code != "invalid_api_key" {
		t.Fatalf("wrong key: err = %v", err)
	}
	if _, err := client(srv, "sk-wrong").ListModels(ctx); !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != 401 {
		t.Errorf("models with wrong key: err = %v", err)
	}

	resp, body := rawPost(t, srv.URL()+"/chat/completions", "", `{"model":"m","messages":[]}`)
	if resp.StatusCode != 401 || !strings.Contains(body, `"invalid_api_key"`) {
		t.Errorf("missing key: %d %s", resp.StatusCode, body)
	}

	if srv.Pending() != 1 {
		t.Errorf("rejected requests consumed the script: Pending = %d", srv.Pending())
	}
	reqs := srv.Requests()
	if len(reqs) != 2 || reqs[0].Authorized || reqs[1].Authorized {
		t.Errorf("recorded = %+v", reqs)
	}

	got, err := client(srv, testKey).CreateChatCompletion(ctx, userRequest("hi"))
	if err != nil || got.Choices[0].Message.Content != "only for the right key" {
		t.Fatalf("right key: %+v %v", got, err)
	}
	if r := srv.Requests()[2]; !r.Authorized {
		t.Error("right key recorded as unauthorized")
	}
}

func TestStreamingRejected(t *testing.T) {
	srv := start(t)
	srv.Enqueue(llmscript.Text("unused"))
	resp, body := rawPost(t, srv.URL()+"/chat/completions", "", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != 400 || !strings.Contains(body, "stream_unsupported") || !strings.Contains(body, `"message"`) {
		t.Errorf("stream: %d %s", resp.StatusCode, body)
	}
	if srv.Pending() != 1 || !srv.Requests()[0].Stream {
		t.Errorf("pending = %d, recorded = %+v", srv.Pending(), srv.Requests())
	}
}

func TestInvalidRequestBody(t *testing.T) {
	srv := start(t)
	resp, body := rawPost(t, srv.URL()+"/chat/completions", "", `{"model":`)
	if resp.StatusCode != 400 || !strings.Contains(body, "invalid_request_error") {
		t.Errorf("bad body: %d %s", resp.StatusCode, body)
	}
	if r := srv.Requests()[0]; r.ParseError == "" || string(r.Body) != `{"model":` {
		t.Errorf("recorded = %+v", r)
	}
}

func TestMultiPartContent(t *testing.T) {
	srv := start(t)
	req := openai.ChatCompletionRequest{Model: "m", Messages: []openai.ChatCompletionMessage{{
		Role: "user",
		MultiContent: []openai.ChatMessagePart{
			{Type: openai.ChatMessagePartTypeText, Text: "first"},
			{Type: openai.ChatMessagePartTypeText, Text: "second"},
		},
	}}}
	if _, err := client(srv, "").CreateChatCompletion(testCtx(t), req); err != nil {
		t.Fatal(err)
	}
	if got := srv.Requests()[0].LastUser(); got != "first\nsecond" {
		t.Errorf("LastUser = %q", got)
	}
}

func TestModels(t *testing.T) {
	srv := start(t, llmscript.WithModels("model-a", "model-b"))
	list, err := client(srv, "").ListModels(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Models) != 2 || list.Models[0].ID != "model-a" || list.Models[1].ID != "model-b" {
		t.Errorf("models = %+v", list.Models)
	}
	resp, err := client(srv, "").CreateChatCompletion(testCtx(t), openai.ChatCompletionRequest{
		Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "hi"}},
	})
	if err != nil || resp.Model != "model-a" {
		t.Errorf("model for unnamed request = %q (%v)", resp.Model, err)
	}
	if len(srv.Requests()) != 1 {
		t.Errorf("model listing was recorded as a chat request")
	}
}

// TestRoutes: WithRoute serves an endpoint beside chat completions (or
// replaces GET /v1/models) behind the same key check, records nothing and
// consumes no scripted step.
func TestRoutes(t *testing.T) {
	srv := start(t, llmscript.WithAPIKey(testKey),
		llmscript.WithRoute(http.MethodGet, "/props", llmscript.Raw(200, "application/json", `{"default_generation_settings":{"n_ctx":4096}}`)),
		llmscript.WithRoute(http.MethodGet, "/v1/models", llmscript.Raw(200, "application/json", `{"object":"list","data":[{"id":"q","object":"model","max_model_len":8192}]}`)))
	srv.Enqueue(llmscript.Text("scripted"))
	root := strings.TrimSuffix(srv.URL(), "/v1")
	for _, c := range []struct {
		method, url, key string
		status           int
		body             string
	}{
		{http.MethodGet, root + "/props", testKey, 200, `"n_ctx":4096`},
		{http.MethodGet, root + "/props", "wrong", 401, "Incorrect API key"},
		{http.MethodPost, root + "/props", testKey, 404, "unknown endpoint"},
		{http.MethodGet, srv.URL() + "/models", testKey, 200, `"max_model_len":8192`},
	} {
		req, _ := http.NewRequestWithContext(testCtx(t), c.method, c.url, nil)
		req.Header.Set("Authorization", "Bearer "+c.key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status || !strings.Contains(string(body), c.body) {
			t.Errorf("%s %s: %d %s", c.method, c.url, resp.StatusCode, body)
		}
	}
	if len(srv.Requests()) != 0 || srv.Pending() != 1 {
		t.Errorf("routes were recorded (%d) or consumed steps (%d pending)", len(srv.Requests()), srv.Pending())
	}
}

func TestMaxConcurrent(t *testing.T) {
	const n = 5
	gate := llmscript.NewGate()
	srv := start(t, llmscript.WithDefault(llmscript.Text("released").Until(gate)))
	ctx := testCtx(t)
	c := client(srv, "")

	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			resp, err := c.CreateChatCompletion(ctx, userRequest(fmt.Sprint(i)))
			if err == nil && resp.Choices[0].Message.Content != "released" {
				err = fmt.Errorf("reply %q", resp.Choices[0].Message.Content)
			}
			errs <- err
		})
	}
	if err := srv.WaitForInFlight(ctx, n); err != nil {
		t.Fatal(err)
	}
	if err := srv.WaitForRequests(ctx, n); err != nil {
		t.Fatal(err)
	}
	gate.Release()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if srv.InFlight() != 0 || srv.MaxConcurrent() != n {
		t.Errorf("InFlight/MaxConcurrent = %d/%d, want 0/%d", srv.InFlight(), srv.MaxConcurrent(), n)
	}
}

func TestSequentialCallsNeverOverlap(t *testing.T) {
	srv := start(t)
	c := client(srv, "")
	for range 3 {
		if _, err := c.CreateChatCompletion(testCtx(t), userRequest("hi")); err != nil {
			t.Fatal(err)
		}
	}
	if srv.MaxConcurrent() != 1 {
		t.Errorf("MaxConcurrent = %d, want 1", srv.MaxConcurrent())
	}
}

func TestWaitForRequestsHonoursContext(t *testing.T) {
	srv := start(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := srv.WaitForRequests(ctx, 1); !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}

func TestListenLifecycle(t *testing.T) {
	srv := llmscript.New()
	if srv.URL() != "" {
		t.Errorf("URL before Listen = %q", srv.URL())
	}
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	if u := srv.URL(); !strings.HasPrefix(u, "http://127.0.0.1:") || !strings.HasSuffix(u, "/v1") {
		t.Errorf("URL = %q", u)
	}
	if err := srv.Listen(); err == nil {
		t.Error("second Listen succeeded")
	}
	resp, body := rawPost(t, srv.URL()+"/nope", "", `{}`)
	if resp.StatusCode != 404 || !strings.Contains(body, `"error"`) {
		t.Errorf("unknown path: %d %s", resp.StatusCode, body)
	}
	srv.Close()
	if err := srv.Listen(); err == nil {
		t.Error("Listen after Close succeeded")
	}
}

func rawPost(t *testing.T, url, key, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(testCtx(t), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

func assertJSONEqual(t *testing.T, what string, got, want json.RawMessage) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Errorf("%s: %v in %s", what, err, got)
		return
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("%s: bad want: %v", what, err)
	}
	if fmt.Sprint(g) != fmt.Sprint(w) {
		t.Errorf("%s = %s, want %s", what, got, want)
	}
}
