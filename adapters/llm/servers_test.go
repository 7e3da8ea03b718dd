package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/lisabot/lisa/messages"
	"github.com/lisabot/lisa/testkit/llmcorpus"
	"github.com/lisabot/lisa/testkit/llmfake"
)

// What the adapter makes of the corpus's wire shapes: a reply (content,
// tool calls, finish reason) or a classified failure. The answer each
// leads to is daemon's TestCorpusShapes.
func TestWireShapes(t *testing.T) {
	search := messages.ModelToolCall{Name: "web_search", Arguments: llmcorpus.SearchArgs}
	// Calls written into text keep their arguments as the model wrote them.
	written := messages.ModelToolCall{Name: "web_search", Arguments: `{"query": "` + llmcorpus.Query + `"}`}
	answer := llmcorpus.AnswerJSON(llmcorpus.AnswerText)
	cases := map[string]struct {
		want  messages.ChatResponse
		cause messages.LLMCause
		code  messages.Code
	}{
		"ollama/answer":   {want: messages.ChatResponse{Content: answer, FinishReason: "stop"}},
		"ollama/thinking": {want: messages.ChatResponse{Content: answer, FinishReason: "stop"}},
		"ollama/no-tools": {cause: messages.CauseToolsUnsupported, code: messages.CodeLLMRejected},
		"ollama/length":   {want: messages.ChatResponse{Content: `{"markdown": "Lisa keeps answering when servers`, FinishReason: "length"}},
		"ollama/tool-calls": {want: messages.ChatResponse{ToolCalls: []messages.ModelToolCall{{ID: "call_k3v9x2qa", Name: search.Name, Arguments: search.Arguments}},
			FinishReason: "tool_calls"}},
		"llama.cpp/tool-call-without-id": {want: messages.ChatResponse{ToolCalls: []messages.ModelToolCall{search}, FinishReason: "tool_calls"}},
		"llama.cpp/tool-call-as-text": {want: messages.ChatResponse{Content: "I will look that up.", ToolCalls: []messages.ModelToolCall{written},
			FinishReason: "stop", TextToolCalls: true}},
		"llama.cpp/no-jinja":                {cause: messages.CauseToolsUnsupported, code: messages.CodeLLMRejected},
		"llama.cpp/unsupported-param-tools": {cause: messages.CauseToolsUnsupported, code: messages.CodeLLMRejected},
		"llama.cpp/exceeds-context":         {cause: messages.CauseContextTooLong, code: messages.CodeLLMRejected},
		"llama.cpp/arguments-object": {want: messages.ChatResponse{ToolCalls: []messages.ModelToolCall{{ID: "c1", Name: search.Name, Arguments: search.Arguments}},
			FinishReason: "tool_calls"}},
		"llama.cpp/reasoning-content": {want: messages.ChatResponse{Content: answer, FinishReason: "stop"}},
		"vllm/hermes-unparsed":        {want: messages.ChatResponse{ToolCalls: []messages.ModelToolCall{written}, FinishReason: "stop", TextToolCalls: true}},
		"vllm/no-auto-tool-choice":    {cause: messages.CauseToolsUnsupported, code: messages.CodeLLMRejected},
		"vllm/context-length":         {cause: messages.CauseContextTooLong, code: messages.CodeLLMRejected},
		"vllm/model-not-found":        {cause: messages.CauseModelNotFound, code: messages.CodeLLMRejected},
		"vllm/reasoning-only":         {want: messages.ChatResponse{FinishReason: "length"}},
		"lmstudio/tool-calls": {want: messages.ChatResponse{ToolCalls: []messages.ModelToolCall{{ID: "365174485", Name: search.Name, Arguments: search.Arguments}},
			FinishReason: "tool_calls"}},
		"lmstudio/tool-request-as-text": {want: messages.ChatResponse{ToolCalls: []messages.ModelToolCall{written}, FinishReason: "stop", TextToolCalls: true}},
		"openai/refusal":                {want: messages.ChatResponse{FinishReason: "stop", Refusal: "I'm sorry, I cannot assist with that request."}},
		"openai/max-tokens-refused":     {cause: messages.CauseParameterRefused, code: messages.CodeLLMRejected},
		"openai/temperature-refused":    {cause: messages.CauseParameterRefused, code: messages.CodeLLMRejected},
		"openai/model-not-found":        {cause: messages.CauseModelNotFound, code: messages.CodeLLMRejected},
		"mistral/thinking-chunks":       {want: messages.ChatResponse{Content: answer, FinishReason: "stop"}},
		"failure/empty-choices":         {cause: messages.CauseMalformed, code: messages.CodeLLMBadResponse},
		"failure/content-null":          {want: messages.ChatResponse{FinishReason: "stop"}},
		"failure/unasked-stream":        {want: messages.ChatResponse{Content: answer, FinishReason: "stop"}},
		"failure/unasked-stream-tool-call": {want: messages.ChatResponse{ToolCalls: []messages.ModelToolCall{{ID: "call_s2", Name: search.Name, Arguments: search.Arguments}},
			FinishReason: "tool_calls"}},
		"failure/huge-body":    {cause: messages.CauseTooLarge, code: messages.CodeLLMBadResponse},
		"failure/endless-body": {cause: messages.CauseTimeout, code: messages.CodeLLMTimeout},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			srv := llmfake.Start(t, llmfake.WithModels("m"))
			srv.Enqueue(llmcorpus.ByName(name).Replies[0])
			cl, _ := chatClient(srv, func(cfg *Config) {
				cfg.TextToolCalls, cfg.MaxAttempts, cfg.Timeout = TextToolCallsAuto, 1, 300*time.Millisecond
			})
			got, err := cl.Chat(context.Background(), simpleRequest())
			if c.code == "" {
				got.Usage = messages.TokenUsage{}
				if err != nil || !reflect.DeepEqual(got, c.want) {
					t.Fatalf("Chat = %+v, %v\nwant %+v", got, err, c.want)
				}
				return
			}
			if f := messages.LLMFailureOf(err); messages.ErrorCode(err) != c.code || f == nil || f.Cause != c.cause {
				t.Fatalf("err = %v (%+v), want %s/%s", err, f, c.code, c.cause)
			}
		})
	}
}

// TestErrorShapes: the error object is read in every shape servers send
// it, the server's text is kept bounded beside the error (never in its
// text), and causes and refused parameters are told apart.
func TestErrorShapes(t *testing.T) {
	long := strings.Repeat("x", 2000)
	cases := []struct {
		name   string
		status int
		body   string
		cause  messages.LLMCause
		param  string
		perm   bool
		msg    string
	}{
		{"openai object", 400, `{"error":{"message":"Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.","type":"invalid_request_error","param":"max_tokens","code":"unsupported_parameter"}}`,
			messages.CauseParameterRefused, "max_tokens", true, "Unsupported parameter"},
		{"param named only in the message", 400, `{"error":{"message":"Unsupported value: 'temperature' does not support 0.2 with this model."}}`,
			messages.CauseParameterRefused, "temperature", true, "does not support 0.2"},
		{"error as a string (LM Studio)", 400, `{"error":"'response_format.type' must be 'json_schema' or 'text'"}`,
			messages.CauseParameterRefused, "response_format", true, "must be 'json_schema'"},
		{"top-level object (older vLLM, Mistral)", 400, `{"object":"error","message":"\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set","type":"BadRequestError","param":null,"code":400}`,
			messages.CauseToolsUnsupported, "", true, "auto"},
		{"FastAPI detail", 422, `{"detail":"Extra inputs are not permitted: strict"}`, messages.CauseParameterRefused, "strict", true, "Extra inputs"},
		// pydantic's validation errors: their input echoes the request
		// (the room's messages); only where and what are kept.
		{"FastAPI validation errors", 422, `{"detail":[{"type":"missing","loc":["body","messages",1,"content"],"msg":"Field required","input":{"role":"user","content2":"ROOM-CANARY"}}]}`,
			messages.CauseRejected, "", true, "body.messages.1.content: Field required"},
		{"plain text page", 502, "<html><body>Bad Gateway</body></html>", messages.CauseServerError, "", false, "<body>"},
		{"unauthorized", 401, `{"error":{"message":"Incorrect API key provided: sk-...","type":"invalid_request_error","code":"invalid_api_key"}}`,
			messages.CauseUnauthorized, "", true, "Incorrect API key"},
		{"404 without a model is the wrong URL", 404, `404 page not found`, messages.CauseRejected, "", true, "page not found"},
		{"other 400", 400, `{"error":{"message":"messages: must not be empty"}}`, messages.CauseRejected, "", true, "empty"},
		{"long message is bounded", 400, `{"error":{"message":"` + long + `"}}`, messages.CauseRejected, "", true, strings.Repeat("x", 100)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := llmfake.Start(t)
			srv.Enqueue(llmfake.Raw(c.status, "application/json", c.body))
			cl, _ := chatClient(srv, func(cfg *Config) { cfg.MaxAttempts = 1 })
			_, err := cl.Chat(context.Background(), simpleRequest())
			f := messages.LLMFailureOf(err)
			var le *messages.Error
			if !errors.As(err, &le) || f == nil || f.Cause != c.cause || f.Param != c.param || le.Permanent != c.perm || f.Status != c.status {
				t.Fatalf("err = %v, failure %+v; want cause %s param %q permanent %v", err, f, c.cause, c.param, c.perm)
			}
			if !strings.Contains(f.Message, c.msg) || len(f.Message) > maxServerMessage+len("…") {
				t.Errorf("server message = %q", f.Message)
			}
			if strings.Contains(f.Message, "CANARY") {
				t.Errorf("the server's message keeps the request it echoes: %q", f.Message)
			}
			if strings.Contains(err.Error(), c.msg) {
				t.Errorf("the error's text carries the server's: %v", err)
			}
		})
	}
}

// TestRequestSettings: the token limit goes under the configured name,
// the temperature only when configured (zero included), tool_choice and
// response_format follow the request, and response_format never travels
// with tools on offer.
func TestRequestSettings(t *testing.T) {
	zero, warm := 0.0, 0.7
	schema := json.RawMessage(`{"type":"object"}`)
	cases := []struct {
		name  string
		cfg   func(*Config)
		req   func(*messages.ChatRequest)
		check func(t *testing.T, r llmfake.Request, body map[string]json.RawMessage)
	}{
		{"defaults", func(c *Config) { c.Temperature = nil }, nil, func(t *testing.T, r llmfake.Request, body map[string]json.RawMessage) {
			if r.MaxTokens != 70 || r.MaxCompletionTokens != 0 || body["temperature"] != nil || string(r.ToolChoice) != `"auto"` || r.ResponseFormat != nil {
				t.Errorf("max_tokens %d, max_completion_tokens %d, temperature %s, tool_choice %s, response_format %s",
					r.MaxTokens, r.MaxCompletionTokens, body["temperature"], r.ToolChoice, r.ResponseFormat)
			}
		}},
		{"max_completion_tokens", func(c *Config) { c.TokenLimitParameter = TokenLimitMaxCompletionTokens }, nil, func(t *testing.T, r llmfake.Request, body map[string]json.RawMessage) {
			if r.MaxCompletionTokens != 70 || body["max_tokens"] != nil {
				t.Errorf("max_completion_tokens %d, max_tokens %s", r.MaxCompletionTokens, body["max_tokens"])
			}
		}},
		{"temperature zero is sent", func(c *Config) { c.Temperature = &zero }, nil, func(t *testing.T, r llmfake.Request, _ map[string]json.RawMessage) {
			if r.Temperature == nil || *r.Temperature != 0 {
				t.Errorf("temperature = %v", r.Temperature)
			}
		}},
		{"temperature set", func(c *Config) { c.Temperature = &warm }, nil, func(t *testing.T, r llmfake.Request, _ map[string]json.RawMessage) {
			if r.Temperature == nil || *r.Temperature < 0.69 || *r.Temperature > 0.71 {
				t.Errorf("temperature = %v", r.Temperature)
			}
		}},
		{"schema with tools on offer is not sent", func(c *Config) { c.ResponseFormat = ResponseFormatJSONSchema },
			func(r *messages.ChatRequest) { r.AnswerSchema = schema }, func(t *testing.T, r llmfake.Request, _ map[string]json.RawMessage) {
				if r.ResponseFormat != nil {
					t.Errorf("response_format = %s", r.ResponseFormat)
				}
			}},
		{"answer only: tool_choice none and the schema", func(c *Config) { c.ResponseFormat = ResponseFormatJSONSchema },
			func(r *messages.ChatRequest) { r.AnswerSchema, r.AnswerOnly = schema, true }, func(t *testing.T, r llmfake.Request, _ map[string]json.RawMessage) {
				var rf struct {
					Type       string `json:"type"`
					JSONSchema struct {
						Name   string          `json:"name"`
						Schema json.RawMessage `json:"schema"`
						Strict bool            `json:"strict"`
					} `json:"json_schema"`
				}
				if string(r.ToolChoice) != `"none"` || len(r.Tools) != 1 || json.Unmarshal(r.ResponseFormat, &rf) != nil || rf.Type != "json_schema" ||
					string(rf.JSONSchema.Schema) != string(schema) || !rf.JSONSchema.Strict {
					t.Errorf("tool_choice %s, %d tools, response_format %s", r.ToolChoice, len(r.Tools), r.ResponseFormat)
				}
			}},
		{"no tools: json_object, no tool_choice", func(c *Config) { c.ResponseFormat = ResponseFormatJSONObject },
			func(r *messages.ChatRequest) { r.AnswerSchema, r.Tools = schema, nil }, func(t *testing.T, r llmfake.Request, _ map[string]json.RawMessage) {
				if r.ToolChoice != nil || string(r.ResponseFormat) != `{"type":"json_object"}` {
					t.Errorf("tool_choice %s, response_format %s", r.ToolChoice, r.ResponseFormat)
				}
			}},
		{"none: no response_format", func(c *Config) { c.ResponseFormat = ResponseFormatNone },
			func(r *messages.ChatRequest) { r.AnswerSchema, r.Tools = schema, nil }, func(t *testing.T, r llmfake.Request, _ map[string]json.RawMessage) {
				if r.ResponseFormat != nil {
					t.Errorf("response_format %s", r.ResponseFormat)
				}
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := llmfake.Start(t)
			srv.Enqueue(llmfake.Text("ok"))
			cl, _ := chatClient(srv, c.cfg)
			req := simpleRequest()
			if c.req != nil {
				c.req(&req)
			}
			if _, err := cl.Chat(context.Background(), req); err != nil {
				t.Fatal(err)
			}
			r := srv.Requests()[0]
			var body map[string]json.RawMessage
			if err := json.Unmarshal(r.Body, &body); err != nil {
				t.Fatal(err)
			}
			c.check(t, r, body)
		})
	}
}

// TestTextToolCalls: what counts as a call written into the text.
func TestTextToolCalls(t *testing.T) {
	cases := []struct {
		in    string
		calls []messages.ModelToolCall
		rest  string
	}{
		{`<tool_call>{"name":"web_search","arguments":{"query":"a"}}</tool_call>`, []messages.ModelToolCall{{Name: "web_search", Arguments: `{"query":"a"}`}}, ""},
		{"Let me check.\n<tool_call>\n{\"name\": \"a\", \"arguments\": \"{\\\"x\\\":1}\"}\n</tool_call>\n<tool_call>{\"name\":\"b\",\"arguments\":{}}</tool_call>",
			[]messages.ModelToolCall{{Name: "a", Arguments: `{"x":1}`}, {Name: "b", Arguments: "{}"}}, "Let me check."},
		{`<tool_call>{"name":"unclosed","arguments":{"q":1}}`, []messages.ModelToolCall{{Name: "unclosed", Arguments: `{"q":1}`}}, ""},
		{"<tool_call>\n```json\n{\"name\":\"fenced\",\"parameters\":{\"q\":2}}\n```\n</tool_call>", []messages.ModelToolCall{{Name: "fenced", Arguments: `{"q":2}`}}, ""},
		{`[TOOL_REQUEST]{"name":"lms","arguments":{}}[END_TOOL_REQUEST]` + "\n", []messages.ModelToolCall{{Name: "lms", Arguments: "{}"}}, ""},
		// Prose after it: the call does not end the text (#39 item 8).
		{`[TOOL_REQUEST]{"name":"lms","arguments":{}}[END_TOOL_REQUEST] done`, nil, `[TOOL_REQUEST]{"name":"lms","arguments":{}}[END_TOOL_REQUEST] done`},
		{`We write <tool_call>{"broken</tool_call> in templates.`, nil, `We write <tool_call>{"broken</tool_call> in templates.`},
		{`<tool_call>{"arguments":{}}</tool_call>`, nil, `<tool_call>{"arguments":{}}</tool_call>`},
		{`plain prose`, nil, `plain prose`},
	}
	for _, c := range cases {
		calls, rest, _ := parseTextToolCalls(context.Background(), c.in)
		if !reflect.DeepEqual(calls, c.calls) || rest != c.rest {
			t.Errorf("parseTextToolCalls(%q) = %+v, %q; want %+v, %q", c.in, calls, rest, c.calls, c.rest)
		}
	}
	// Off, or without tools on offer, or in a repair: the text stays text.
	for name, mod := range map[string]func(*Config, *messages.ChatRequest){
		"off":         func(c *Config, _ *messages.ChatRequest) { c.TextToolCalls = TextToolCallsNever },
		"no tools":    func(_ *Config, r *messages.ChatRequest) { r.Tools = nil },
		"answer only": func(_ *Config, r *messages.ChatRequest) { r.AnswerOnly = true },
	} {
		srv := llmfake.Start(t)
		srv.Enqueue(llmfake.Text(cases[0].in))
		req := simpleRequest()
		cl, _ := chatClient(srv, func(c *Config) { c.TextToolCalls = TextToolCallsAuto; mod(c, &req) })
		got, err := cl.Chat(context.Background(), req)
		if err != nil || len(got.ToolCalls) != 0 || got.Content != cases[0].in {
			t.Errorf("%s: %+v, %v", name, got, err)
		}
	}
}

// TestReportedOncePerCause: a refusal only the operator can fix is logged
// at ERROR once per cause — not per request — and again after an hour if
// it persists; in between, its repeats and transient failures are logged
// at WARN (issue #32: every failure is logged, with its status).
func TestReportedOncePerCause(t *testing.T) {
	var buf bytes.Buffer
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	srv := llmfake.Start(t, llmfake.WithModels("served-a", "served-b"))
	cl, _ := chatClient(srv, func(c *Config) {
		c.Logger, c.Model, c.MaxAttempts = slog.New(slog.NewJSONHandler(&buf, nil)), "typo", 1
	})
	cl.report.now = func() time.Time { return now }
	notFound := llmfake.Error(404, "model 'typo' not found")
	for range 3 {
		srv.Enqueue(notFound, llmfake.Error(500, "busy"))
		_, _ = cl.Chat(context.Background(), simpleRequest())
		_, _ = cl.Chat(context.Background(), simpleRequest())
	}
	if n := strings.Count(buf.String(), `"level":"ERROR"`); n != 1 || !strings.Contains(buf.String(), "served-a, served-b") ||
		!strings.Contains(buf.String(), `"cause":"model_not_found"`) || !strings.Contains(buf.String(), `"model":"typo"`) {
		t.Fatalf("%d ERROR lines:\n%s", n, buf.String())
	}
	if n := strings.Count(buf.String(), `"level":"WARN"`); n != 5 || strings.Count(buf.String(), `"cause":"server_error","status":500`) != 3 {
		t.Fatalf("%d WARN lines (2 repeated refusals, 3 server errors):\n%s", n, buf.String())
	}
	now = now.Add(61 * time.Minute)
	srv.Enqueue(notFound)
	_, _ = cl.Chat(context.Background(), simpleRequest())
	if n := strings.Count(buf.String(), `"level":"ERROR"`); n != 2 {
		t.Fatalf("after an hour: %d ERROR lines", n)
	}
}

// TestServerMessageRedactedThenBounded (issue #32): the server's message
// passes through Config.Redact and loses the API key before it is cut to
// maxServerMessage, so a secret near the cut is never kept in part; each
// attempt is told to OnAttempt; transient failures are logged at WARN
// with the attempt and whether another follows.
func TestServerMessageRedactedThenBounded(t *testing.T) {
	const other = "other-SECRET-token"
	srv := llmfake.Start(t)
	var buf bytes.Buffer
	var outcomes []string
	cl, _ := chatClient(srv, func(c *Config) {
		c.Logger = slog.New(slog.NewJSONHandler(&buf, nil))
		c.Redact = func(s string) string { return strings.ReplaceAll(s, other, "[REDACTED]") }
		c.OnAttempt = func(err *messages.Error) {
			if err == nil {
				outcomes = append(outcomes, "answered")
				return
			}
			outcomes = append(outcomes, string(messages.LLMCauseOf(err)))
		}
	})
	pad := strings.Repeat("y", maxServerMessage-10)
	srv.Enqueue(llmfake.Error(503, pad+" "+testKey+" "+other), llmfake.Error(503, other+" "+pad+" "+testKey), llmfake.Answer("ok"))
	if _, err := cl.Chat(context.Background(), simpleRequest()); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if strings.Contains(out, testKey[:6]) || strings.Contains(out, other[:6]) {
		t.Fatalf("a secret, or a part of one, is in the log:\n%s", out)
	}
	if !strings.Contains(out, `"server_message":"[REDACTED] yyy`) || strings.Count(out, `"level":"WARN"`) != 2 ||
		!strings.Contains(out, `"attempt":1,"retry":true`) || !strings.Contains(out, `"attempt":2,"retry":true`) {
		t.Errorf("log:\n%s", out)
	}
	if got := strings.Join(outcomes, ","); got != "server_error,server_error,answered" {
		t.Errorf("attempts told = %q, want two server errors and an answer", got)
	}
}

// TestCancelledAttemptIsNoFailure: an attempt the caller cancels (a
// redacted question, a shutdown) is no failure of the server's: nothing
// is logged and OnAttempt is not told.
func TestCancelledAttemptIsNoFailure(t *testing.T) {
	srv := llmfake.Start(t)
	var buf bytes.Buffer
	told := 0
	cl, _ := chatClient(srv, func(c *Config) {
		c.Logger = slog.New(slog.NewJSONHandler(&buf, nil))
		c.OnAttempt = func(*messages.Error) { told++ }
	})
	srv.Enqueue(llmfake.Hang())
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		_ = srv.WaitForInFlight(context.Background(), 1)
		cancel()
	}()
	if _, err := cl.Chat(ctx, simpleRequest()); err == nil {
		t.Fatal("a cancelled request succeeded")
	}
	if told != 0 || buf.Len() != 0 {
		t.Errorf("told %d times, log:\n%s", told, buf.String())
	}
}
