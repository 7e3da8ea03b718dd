package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lisabot/lisa/actors/invocation"
	"github.com/lisabot/lisa/adapters/llm"
	"github.com/lisabot/lisa/adapters/render"
	"github.com/lisabot/lisa/adapters/research"
	"github.com/lisabot/lisa/adapters/web"
	"github.com/lisabot/lisa/messages"
	"github.com/lisabot/lisa/messages/roompb"
	"github.com/lisabot/lisa/testkit/llmcorpus"
	"github.com/lisabot/lisa/testkit/llmfake"
)

// What Lisa does with every shape of the compatibility corpus
// (testkit/llmcorpus), through the real LLM adapter, the real tool loop,
// the real research tools (with a fake search engine and web) and the real
// renderer: she answers (perhaps after tool calls), repairs once, or ends
// with a named error code — the persona's error in the room — and never
// crashes, hangs or loops past the limits.

// Kinds of outcome.
const (
	answers   = "answers"
	repairs   = "repairs once, then answers"
	noTools   = "answers without tools"
	failsWith = "fails with"
)

// corpusOutcome is what Lisa does with one shape.
type corpusOutcome struct {
	kind string
	// requests is the number of chat-completions requests on the wire.
	requests int
	// text must be in the reply; sources are its Sources, in order.
	text    string
	sources []string
	// code and cause name the failure of failsWith; param the refused
	// parameter; fix a word of the ERROR line's fix.
	code  messages.Code
	cause messages.LLMCause
	param string
	fix   string
	// cfg adjusts the client's configuration for the shape.
	cfg func(*llm.Config)
	// check looks at the requests the server saw.
	check func(t *testing.T, reqs []llmfake.Request)
}

var corpusOutcomes = map[string]corpusOutcome{
	"ollama/answer":              {kind: answers, requests: 1, text: llmcorpus.AnswerText},
	"ollama/tool-calls":          {kind: answers, requests: 3, text: llmcorpus.AnswerText, sources: []string{llmcorpus.PageURL}},
	"ollama/thinking":            {kind: answers, requests: 1, text: llmcorpus.AnswerText},
	"ollama/model-not-found":     {kind: failsWith, requests: 1, code: messages.CodeLLMRejected, cause: messages.CauseModelNotFound, fix: "llm.model"},
	"ollama/no-tools":            {kind: noTools, requests: 2, text: llmcorpus.AnswerText},
	"ollama/length":              {kind: repairs, requests: 2, text: llmcorpus.AnswerText, check: repairSays("cut off")},
	"ollama/prompt-cut-silently": {kind: answers, requests: 1, text: llmcorpus.AnswerText},

	"llama.cpp/answer":                  {kind: answers, requests: 1, text: llmcorpus.AnswerText},
	"llama.cpp/jinja-tool-calls":        {kind: answers, requests: 3, text: llmcorpus.AnswerText, sources: []string{llmcorpus.PageURL}},
	"llama.cpp/tool-call-without-id":    {kind: answers, requests: 3, text: llmcorpus.AnswerText, sources: []string{llmcorpus.PageURL}, check: idsAreMistralSafe},
	"llama.cpp/tool-call-as-text":       {kind: answers, requests: 3, text: llmcorpus.AnswerText, sources: []string{llmcorpus.PageURL}, check: textCallBecameACall("I will look that up.")},
	"llama.cpp/no-jinja":                {kind: noTools, requests: 2, text: llmcorpus.AnswerText},
	"llama.cpp/unsupported-param-tools": {kind: noTools, requests: 2, text: llmcorpus.AnswerText},
	"llama.cpp/exceeds-context":         {kind: failsWith, requests: 1, code: messages.CodeLLMRejected, cause: messages.CauseContextTooLong, fix: "llm.context_window_tokens"},
	"llama.cpp/arguments-object":        {kind: answers, requests: 3, text: llmcorpus.AnswerText, sources: []string{llmcorpus.PageURL}},
	"llama.cpp/reasoning-content":       {kind: answers, requests: 1, text: llmcorpus.AnswerText},

	"vllm/hermes-tool-calls":   {kind: answers, requests: 3, text: llmcorpus.AnswerText, sources: []string{llmcorpus.PageURL}},
	"vllm/hermes-unparsed":     {kind: answers, requests: 3, text: llmcorpus.AnswerText, sources: []string{llmcorpus.PageURL}, check: textCallBecameACall("")},
	"vllm/reasoning-content":   {kind: answers, requests: 1, text: llmcorpus.AnswerText},
	"vllm/no-auto-tool-choice": {kind: noTools, requests: 2, text: llmcorpus.AnswerText},
	"vllm/context-length":      {kind: failsWith, requests: 1, code: messages.CodeLLMRejected, cause: messages.CauseContextTooLong, fix: "llm.context_window_tokens"},
	"vllm/model-not-found":     {kind: failsWith, requests: 1, code: messages.CodeLLMRejected, cause: messages.CauseModelNotFound, fix: "llm.model"},
	"vllm/reasoning-only":      {kind: repairs, requests: 2, text: llmcorpus.AnswerText},

	"lmstudio/answer":               {kind: answers, requests: 1, text: llmcorpus.AnswerText},
	"lmstudio/tool-calls":           {kind: answers, requests: 3, text: llmcorpus.AnswerText, sources: []string{llmcorpus.PageURL}},
	"lmstudio/tool-request-as-text": {kind: answers, requests: 3, text: llmcorpus.AnswerText, sources: []string{llmcorpus.PageURL}, check: textCallBecameACall("")},
	"lmstudio/json-object-refused": {kind: failsWith, requests: 2, code: messages.CodeLLMRejected, cause: messages.CauseParameterRefused, param: "response_format",
		fix: "llm.response_format", cfg: func(c *llm.Config) { c.ResponseFormat = llm.ResponseFormatJSONObject }},

	"openai/refusal": {kind: answers, requests: 1, text: "I'm sorry, I cannot assist with that request."},
	"openai/max-tokens-refused": {kind: failsWith, requests: 1, code: messages.CodeLLMRejected, cause: messages.CauseParameterRefused, param: "max_tokens",
		fix: "max_completion_tokens"},
	"openai/temperature-refused": {kind: failsWith, requests: 1, code: messages.CodeLLMRejected, cause: messages.CauseParameterRefused, param: "temperature",
		fix: "llm.temperature", cfg: func(c *llm.Config) { t := 0.7; c.Temperature = &t }},
	"openai/model-not-found":     {kind: failsWith, requests: 1, code: messages.CodeLLMRejected, cause: messages.CauseModelNotFound, fix: "llm.model"},
	"openai/parallel-tool-calls": {kind: answers, requests: 2, text: llmcorpus.AnswerText, sources: []string{llmcorpus.PageURL}},

	"mistral/tool-calls":      {kind: answers, requests: 3, text: llmcorpus.AnswerText, sources: []string{llmcorpus.PageURL}, check: idEchoed("D681PevKs")},
	"mistral/thinking-chunks": {kind: answers, requests: 1, text: llmcorpus.AnswerText},

	"failure/error-in-200":             {kind: answers, requests: 2, text: llmcorpus.AnswerText},
	"failure/empty-choices":            {kind: failsWith, requests: 1, code: messages.CodeLLMBadResponse, cause: messages.CauseMalformed},
	"failure/length-mid-json":          {kind: repairs, requests: 2, text: llmcorpus.AnswerText, check: repairSays("cut off")},
	"failure/content-null":             {kind: repairs, requests: 2, text: llmcorpus.AnswerText, check: repairSays("empty")},
	"failure/arguments-invalid-json":   {kind: answers, requests: 2, text: llmcorpus.AnswerText, check: toolResultCode("invalid_arguments")},
	"failure/unknown-tool":             {kind: answers, requests: 2, text: llmcorpus.AnswerText, check: toolResultCode("unknown_tool")},
	"failure/several-tool-calls":       {kind: answers, requests: 2, text: llmcorpus.AnswerText, sources: []string{llmcorpus.PageURL}, check: toolMessages(3)},
	"failure/unasked-stream":           {kind: answers, requests: 1, text: llmcorpus.AnswerText},
	"failure/unasked-stream-tool-call": {kind: answers, requests: 3, text: llmcorpus.AnswerText, sources: []string{llmcorpus.PageURL}},
	"failure/huge-body":                {kind: failsWith, requests: 1, code: messages.CodeLLMBadResponse, cause: messages.CauseTooLarge},
	// The attempt's timeout ends the body; the retry gets an answer.
	"failure/endless-body": {kind: answers, requests: 2, text: llmcorpus.AnswerText},
}

// TestCorpusShapes replays every shape of the corpus and checks what Lisa
// does with it.
func TestCorpusShapes(t *testing.T) {
	if n, fams := len(llmcorpus.All()), len(llmcorpus.Families()); n < 25 || fams < 6 {
		t.Fatalf("the corpus has %d shapes from %d families; it must have at least 25 from the server families and failures", n, fams)
	}
	for _, shape := range llmcorpus.All() {
		want, ok := corpusOutcomes[shape.Name]
		if !ok {
			t.Errorf("%s: no test states what Lisa does with it", shape.Name)
			continue
		}
		if shape.Source == "" || shape.Family == "" || !strings.HasPrefix(shape.Name, shape.Family+"/") {
			t.Errorf("%s: family %q, source %q", shape.Name, shape.Family, shape.Source)
		}
		t.Run(shape.Name, func(t *testing.T) { runCorpusShape(t, shape, want) })
	}
	for name := range corpusOutcomes {
		func() {
			defer func() {
				if recover() != nil {
					t.Errorf("%s: an outcome for a shape the corpus does not have", name)
				}
			}()
			llmcorpus.ByName(name)
		}()
	}
}

func runCorpusShape(t *testing.T, shape llmcorpus.Shape, want corpusOutcome) {
	srv := llmfake.Start(t, llmfake.WithModels(llmcorpus.ModelName, "other-model"), llmfake.WithDefault(llmfake.Func(wellBehavedModel)))
	srv.Enqueue(shape.Replies...)
	var logs syncBuffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	cfg := llm.Config{BaseURL: srv.URL(), Model: llmcorpus.ModelName, MaxOutputTokens: 1024, Timeout: 400 * time.Millisecond,
		ResponseFormat: llm.ResponseFormatJSONSchema, TextToolCalls: llm.TextToolCallsAuto, Logger: log,
		RetryBaseDelay: time.Millisecond, Sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() }}
	if want.cfg != nil {
		want.cfg(&cfg)
	}
	a := corpusAnswerer(llm.New(cfg), log)
	start := time.Now()
	content, err := a.Invoke(context.Background(), &roompb.Candidate{RoomId: "!r:hs", EventId: "$e", Sender: "@u:hs", Body: "Lisa, what do servers send?"}, 1)
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("took %v", took)
	}
	reqs := srv.Requests()
	if len(reqs) != want.requests {
		t.Errorf("%d requests, want %d", len(reqs), want.requests)
	}
	switch want.kind {
	case failsWith:
		f := messages.LLMFailureOf(err)
		if messages.ErrorCode(err) != want.code || f == nil || f.Cause != want.cause || f.Param != want.param {
			t.Fatalf("err = %v (failure %+v), want %s/%s/%s", err, f, want.code, want.cause, want.param)
		}
		if want.fix != "" {
			checkReportedOnce(t, a, srv, &logs, want)
		}
	default:
		if err != nil {
			t.Fatalf("Invoke: %v\nlogs:\n%s", err, logs.String())
		}
		var msg struct {
			Body string `json:"body"`
		}
		if json.Unmarshal(content, &msg) != nil || !strings.Contains(msg.Body, want.text) {
			t.Fatalf("reply = %s, want %q in it", content, want.text)
		}
		if got := sourcesOf(msg.Body); strings.Join(got, " ") != strings.Join(want.sources, " ") {
			t.Errorf("sources = %v, want %v", got, want.sources)
		}
		for _, leak := range []string{"<tool_call>", "TOOL_REQUEST", "reasoning", "think"} {
			if strings.Contains(msg.Body, leak) {
				t.Errorf("the reply shows %q: %s", leak, msg.Body)
			}
		}
	}
	if want.kind == repairs {
		if last := reqs[len(reqs)-1]; !strings.Contains(last.LastUser(), "could not be used") || string(last.ToolChoice) != `"none"` {
			t.Errorf("the last request is no repair request (tool_choice %s)", last.ToolChoice)
		}
	}
	if want.kind == noTools {
		if len(reqs[0].Tools) == 0 || len(reqs[1].Tools) != 0 || reqs[1].ToolChoice != nil || !strings.Contains(string(reqs[1].ResponseFormat), "json_schema") {
			t.Errorf("tools %d then %d, tool_choice %s, response_format %s", len(reqs[0].Tools), len(reqs[1].Tools), reqs[1].ToolChoice, reqs[1].ResponseFormat)
		}
		if n := strings.Count(logs.String(), "research is off"); n != 1 {
			t.Errorf("%d WARN lines about research, want 1:\n%s", n, logs.String())
		}
	}
	for _, r := range reqs[:min(len(reqs), 1)] {
		if r.ResponseFormat != nil {
			t.Errorf("response_format sent with tools on offer: %s", r.ResponseFormat)
		}
	}
	if want.check != nil {
		want.check(t, reqs)
	}
}

// checkReportedOnce: the failure is logged at ERROR once, with the key to
// change (and the server's models for an unknown model), even when the
// room asks again; it is never only an INFO line.
func checkReportedOnce(t *testing.T, a *invocation.Answerer, srv *llmfake.Server, logs *syncBuffer, want corpusOutcome) {
	t.Helper()
	shape := llmcorpus.ByName(t.Name()[strings.Index(t.Name(), "/")+1:])
	srv.Enqueue(shape.Replies...)
	if _, err := a.Invoke(context.Background(), &roompb.Candidate{RoomId: "!r:hs", EventId: "$e2", Sender: "@u:hs", Body: "again?"}, 1); messages.ErrorCode(err) != want.code {
		t.Fatalf("second invocation: %v", err)
	}
	var errorsLogged []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["level"] == "ERROR" {
			errorsLogged = append(errorsLogged, m)
		}
	}
	if len(errorsLogged) != 1 {
		t.Fatalf("%d ERROR lines, want exactly 1:\n%s", len(errorsLogged), logs.String())
	}
	e := errorsLogged[0]
	if e["cause"] != string(want.cause) || !strings.Contains(e["fix"].(string), want.fix) {
		t.Errorf("ERROR line = %v, want cause %s and a fix naming %s", e, want.cause, want.fix)
	}
	if want.cause == messages.CauseModelNotFound && !strings.Contains(e["server_models"].(string), "other-model") {
		t.Errorf("the ERROR line does not list the server's models: %v", e)
	}
	// Issue #32: the server's own message is logged, bounded, in
	// server_message (it was kept out of the log before).
	if msg, _ := e["server_message"].(string); strings.TrimSpace(msg) == "" || len(msg) > 300+len("…") {
		t.Errorf("the ERROR line lacks the server's message: %v", e)
	}
}

// wellBehavedModel answers what the shapes leave open: after a failed
// tool call it answers without sources, after a search it fetches the
// page, after the page it answers citing it; otherwise it answers.
func wellBehavedModel(r llmfake.Request) llmfake.Step {
	last := r.Messages[len(r.Messages)-1]
	if last.Role == "tool" {
		fetched := false
		for _, m := range r.Messages {
			fetched = fetched || (m.Role == "tool" && strings.Contains(m.Content, "The corpus page"))
		}
		switch {
		case fetched:
			return llmfake.Answer(llmcorpus.AnswerText, llmcorpus.PageURL)
		case strings.Contains(last.Content, `"ok":true`):
			return llmfake.ToolCalls(llmfake.Call("fetch_web_page", map[string]string{"url": llmcorpus.PageURL}))
		}
	}
	return llmfake.Answer(llmcorpus.AnswerText)
}

// corpusAnswerer is the answer pipeline with the real research tools
// over a fake search engine and web that know the corpus page.
func corpusAnswerer(client *llm.Client, log *slog.Logger) *invocation.Answerer {
	sessions := research.New(research.Deps{
		Search: corpusSearch{}, Fetch: corpusWeb{}, ValidateURL: web.ValidateURL,
		MaxToolOutputCharacters: 4000, MaxTotalArtifactBytes: 1 << 20,
	})
	return invocation.NewAnswerer(invocation.AnswererConfig{
		Context: fixedBlock(`<room_context room_id="!r:hs">` + "\n" + `<message sequence="1" event_id="$e" author_id="@u:hs" invocation="true">` +
			"\nLisa, what do servers send?\n</message>\n</room_context>"),
		LLM: client, Render: renderer{r: render.New()}, Sessions: sessions, Tools: directTools{sessions},
		Persona: "You are Lisa.", GenericError: "GENERIC", OverloadError: "OVERLOAD", Logger: log,
		Limits: invocation.Limits{MaxToolOutputCharacters: 4000},
	})
}

type fixedBlock string

func (b fixedBlock) Build(context.Context, *roompb.Candidate) (string, error) { return string(b), nil }

// directTools runs the research tools in the caller's goroutine.
type directTools struct{ s *research.Service }

func (d directTools) Call(ctx context.Context, call *messages.ToolCall) (*messages.ToolResult, error) {
	return d.s.Call(ctx, call), nil
}

type corpusSearch struct{}

func (corpusSearch) Search(context.Context, string) ([]messages.SearchHit, error) {
	return []messages.SearchHit{{Title: "Servers", URL: llmcorpus.PageURL, Snippet: "what servers send"}}, nil
}

type corpusWeb struct{}

func (corpusWeb) Fetch(_ context.Context, raw string) (messages.WebPage, error) {
	return messages.WebPage{FinalURL: raw, ContentType: "text/plain; charset=utf-8", Title: "The corpus page",
		Body: []byte("The corpus page: servers send many shapes.")}, nil
}

// sourcesOf returns the URLs of a reply body's Sources section.
func sourcesOf(body string) []string {
	_, after, ok := strings.Cut(body, "Sources")
	if !ok {
		return nil
	}
	var out []string
	for _, f := range strings.Fields(after) {
		f = strings.Trim(f, "()<>[]")
		if strings.HasPrefix(f, "https://") {
			out = append(out, f)
		}
	}
	return out
}

func repairSays(s string) func(*testing.T, []llmfake.Request) {
	return func(t *testing.T, reqs []llmfake.Request) {
		if got := reqs[len(reqs)-1].LastUser(); !strings.Contains(got, s) {
			t.Errorf("repair request = %q, want %q in it", got, s)
		}
	}
}

// idsAreMistralSafe: the ID Lisa gave the call that came without one is
// nine letters and digits, and ties the result to the call.
func idsAreMistralSafe(t *testing.T, reqs []llmfake.Request) {
	m := reqs[1].Messages
	if len(m) < 4 || len(m[2].ToolCalls) != 1 {
		t.Fatalf("second request = %+v", m)
	}
	id := m[2].ToolCalls[0].ID
	if len(id) != 9 || strings.Trim(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") != "" || m[3].ToolCallID != id {
		t.Errorf("tool call ID %q (result for %q) is not nine letters and digits", id, m[3].ToolCallID)
	}
}

func idEchoed(id string) func(*testing.T, []llmfake.Request) {
	return func(t *testing.T, reqs []llmfake.Request) {
		m := reqs[1].Messages
		if len(m) < 4 || len(m[2].ToolCalls) != 1 || m[2].ToolCalls[0].ID != id || m[3].ToolCallID != id {
			t.Errorf("the server's tool call ID %q was not sent back unchanged: %+v", id, m[2:])
		}
	}
}

func textCallBecameACall(text string) func(*testing.T, []llmfake.Request) {
	return func(t *testing.T, reqs []llmfake.Request) {
		m := reqs[1].Messages
		if len(m) < 4 || len(m[2].ToolCalls) != 1 || m[2].ToolCalls[0].Name != "web_search" || m[2].Content != text ||
			m[3].Role != "tool" || !strings.Contains(m[3].Content, `"ok":true`) {
			t.Errorf("the text call did not run as a tool call: %+v", m[2:])
		}
	}
}

func toolResultCode(code string) func(*testing.T, []llmfake.Request) {
	return func(t *testing.T, reqs []llmfake.Request) {
		if last := reqs[1].Messages[len(reqs[1].Messages)-1]; last.Role != "tool" || !strings.Contains(last.Content, `"code":"`+code+`"`) {
			t.Errorf("tool result = %q, want code %s", last.Content, code)
		}
	}
}

func toolMessages(n int) func(*testing.T, []llmfake.Request) {
	return func(t *testing.T, reqs []llmfake.Request) {
		got := 0
		for _, m := range reqs[1].Messages {
			if m.Role == "tool" {
				got++
			}
		}
		if got != n {
			t.Errorf("%d tool results, want %d", got, n)
		}
	}
}

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
