package invocation

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/lisabot/lisa/messages"
	"github.com/lisabot/lisa/messages/roompb"
)

// The behaviour of issue #30: answers that survive real models.

// fetchTool is a fetch_web_page double whose results mark the page as
// fetched.
func fetchTool(url, title string) *fakeTool {
	return newTool("fetch_web_page", func(json.RawMessage) messages.ToolResult {
		return messages.ToolResult{OK: true, Content: "page text", SourceURLs: []string{url}, Fetched: []string{url},
			SourceTitles: map[string]string{url: title}}
	})
}

// cut replies with text cut off at the token limit.
func cut(s string) step {
	return func(messages.ChatRequest) (messages.ChatResponse, error) {
		return messages.ChatResponse{Content: s, FinishReason: messages.FinishLength}, nil
	}
}

// refusal replies like OpenAI's refusal: no content, a refusal text.
func refusal(s string) step {
	return func(messages.ChatRequest) (messages.ChatResponse, error) {
		return messages.ChatResponse{Refusal: s}, nil
	}
}

func TestFinalAnswersFromRealModels(t *testing.T) {
	page := "https://c.example/page"
	withPage := func() []*fakeTool {
		return []*fakeTool{okTool("web_search", "hits", page), fetchTool(page, "The Page")}
	}
	fetchCall := calls(call("f", "fetch_web_page", `{"query":"`+page+`"}`))
	cases := []runCase{
		{
			name:  "object wrapped in prose",
			steps: []step{text(`Sure! Here is my answer: {"markdown": "wrapped", "source_urls": []} Hope it helps {:}`)},
			want:  messages.Answer{Markdown: "wrapped"}, wantReqs: 1,
		},
		{
			name:  "fence inside prose",
			steps: []step{text("Here you go:\n```json\n{\"markdown\": \"fenced in prose\", \"source_urls\": []}\n```\nBye.")},
			want:  messages.Answer{Markdown: "fenced in prose"}, wantReqs: 1,
		},
		{
			name:  "first object without markdown is skipped, nested ones are not candidates",
			steps: []step{text(`{"note": {"markdown": "nested"}} then {"markdown": "second", "source_urls": []}`)},
			want:  messages.Answer{Markdown: "second"}, wantReqs: 1,
		},
		{
			name:  "braces inside strings do not confuse the scan",
			steps: []step{text(`{"markdown": "a } and a { inside", "source_urls": []}`)},
			want:  messages.Answer{Markdown: "a } and a { inside"}, wantReqs: 1,
		},
		{
			name:  "prose twice: the prose is the answer",
			steps: []step{text("The answer is 42."), text("Really, the answer is 42.")},
			want:  messages.Answer{Markdown: "Really, the answer is 42."}, wantReqs: 2,
			check: func(t *testing.T, reqs []messages.ChatRequest, _ []*fakeTool) {
				if reqs[0].AnswerOnly || !reqs[1].AnswerOnly == (len(reqs[1].Tools) > 0) {
					t.Errorf("AnswerOnly = %v, %v", reqs[0].AnswerOnly, reqs[1].AnswerOnly)
				}
				if !json.Valid(reqs[1].AnswerSchema) || !strings.Contains(string(reqs[1].AnswerSchema), `"markdown"`) {
					t.Errorf("answer schema = %s", reqs[1].AnswerSchema)
				}
			},
		},
		{
			name:  "prose twice after fetching a page: the host lists the page",
			steps: []step{fetchCall, text("From the page: it is 42."), text("It is 42, says the page.")},
			tools: withPage,
			want: messages.Answer{Markdown: "It is 42, says the page.", SourceURLs: []string{page},
				Titles: map[string]string{page: "The Page"}},
			wantReqs: 3,
			check: func(t *testing.T, reqs []messages.ChatRequest, _ []*fakeTool) {
				if !reqs[2].AnswerOnly || len(reqs[2].Tools) != 2 {
					t.Errorf("repair request: AnswerOnly %v with %d tools listed", reqs[2].AnswerOnly, len(reqs[2].Tools))
				}
			},
		},
		{
			name:  "search results only: prose gets no sources (nothing was fetched)",
			steps: []step{calls(call("s", "web_search", `{"query":"q"}`)), text("prose"), text("still prose")},
			tools: withPage,
			want:  messages.Answer{Markdown: "still prose"}, wantReqs: 3,
		},
		{
			name: "well-formed but citing only invented URLs after the repair: host sources",
			steps: []step{fetchCall, final("It is 42.", "https://invented.example/"),
				final("It is 42.", "https://invented.example/")},
			tools: withPage,
			want: messages.Answer{Markdown: "It is 42.", SourceURLs: []string{page},
				Titles: map[string]string{page: "The Page"}},
			wantReqs: 3,
		},
		{
			name:  "refusal is the answer, without repair or sources",
			steps: []step{fetchCall, refusal("I'm sorry, I cannot assist with that request.")},
			tools: withPage,
			want:  messages.Answer{Markdown: "I'm sorry, I cannot assist with that request."}, wantReqs: 2,
		},
		{
			name:  "cut off mid-JSON: one repair asking for a shorter answer, then the answer",
			steps: []step{cut(`{"markdown": "The long answer starts here and`), final("Short answer.")},
			want:  messages.Answer{Markdown: "Short answer."}, wantReqs: 2,
			check: func(t *testing.T, reqs []messages.ChatRequest, _ []*fakeTool) {
				if last := reqs[1].Messages[len(reqs[1].Messages)-1].Content; !strings.Contains(last, "cut off") {
					t.Errorf("repair request = %q", last)
				}
			},
		},
		{
			name:  "cut off twice: the persona's error, never the fragment",
			steps: []step{cut(`{"markdown": "The long`), cut("The long answer in prose that stops in the mid")},
			want:  messages.Answer{Fallback: messages.FallbackGeneric}, wantReqs: 2,
		},
		{
			name:  "content null without tool calls twice: the persona's error",
			steps: []step{text(""), text("")},
			want:  messages.Answer{Fallback: messages.FallbackGeneric}, wantReqs: 2,
		},
		{
			// Ollama refuses an assistant message without content or tool
			// calls (400 "invalid message content type: <nil>", probed on
			// v0.17.4 by cmd/lisa TestRealOllama).
			name:  "an empty reply is not sent back with the repair request",
			steps: []step{text(""), text("Prose after all.")},
			want:  messages.Answer{Markdown: "Prose after all."}, wantReqs: 2,
			check: func(t *testing.T, reqs []messages.ChatRequest, _ []*fakeTool) {
				for _, m := range reqs[1].Messages {
					if m.Role == messages.RoleAssistant && strings.TrimSpace(m.Content) == "" && len(m.ToolCalls) == 0 {
						t.Errorf("the repair request carries an empty assistant message: %+v", reqs[1].Messages)
					}
				}
				if last := reqs[1].Messages[len(reqs[1].Messages)-1]; last.Role != messages.RoleUser || !strings.Contains(last.Content, "empty") {
					t.Errorf("the repair request ends with %+v", last)
				}
			},
		},
		{
			name:  "a broken object after the repair is no prose",
			steps: []step{text("prose"), text(`{"markdown": 42}`)},
			want:  messages.Answer{Fallback: messages.FallbackGeneric}, wantReqs: 2,
		},
		{
			name:  "tool calls in the repair reply are not run",
			steps: []step{text("prose"), calls(call("x", "web_search", `{"query":"q"}`))},
			tools: withPage,
			want:  messages.Answer{Fallback: messages.FallbackGeneric}, wantReqs: 2,
			check: func(t *testing.T, _ []messages.ChatRequest, tools []*fakeTool) {
				if n := len(tools[0].calls()); n != 0 {
					t.Errorf("a tool ran in reply to the repair request (%d calls)", n)
				}
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, c.run)
	}
}

// TestProseAnswerIsLoggedAndCounted: the prose answer is logged once as
// final_not_json and counted in the attempt's line with its form.
func TestProseAnswerIsLoggedAndCounted(t *testing.T) {
	llm := newFakeLLM(text("SECRET prose"), text("SECRET prose again"))
	a := NewAnswerer(AnswererConfig{Context: fixedContext{block: "<room_context/>"}, LLM: llm, Render: textRenderer{}, GenericError: "GENERIC"})
	res, out := runAttempt(t, a, &roompb.Candidate{RoomId: "!r:hs", EventId: "$e", Sender: "@u:hs"})
	if res.Err != nil || !strings.HasSuffix(string(res.Content), "SECRET prose again") {
		t.Fatalf("result = %q, %v", res.Content, res.Err)
	}
	if strings.Contains(out, "SECRET") {
		t.Fatalf("log shows the answer:\n%s", out)
	}
	var warned, final map[string]any
	for _, r := range logLines(t, out) {
		switch {
		case r["code"] == codeFinalNotJSON:
			warned = r
		case r["msg"] == "invocation attempt finished":
			final = r
		}
	}
	if warned == nil || warned["level"] != "WARN" || final == nil || final[codeFinalNotJSON] != 1.0 || final["answer_form"] != formProse || final["fallback"] != nil {
		t.Fatalf("warning %v, final line %v", warned, final)
	}
}

// TestTextToolCallsAreCounted: calls the adapter read from the model's
// text run like any and are counted in the attempt's line.
func TestTextToolCallsAreCounted(t *testing.T) {
	search := okTool("web_search", "hits", "https://a.example/")
	llm := newFakeLLM(func(messages.ChatRequest) (messages.ChatResponse, error) {
		return messages.ChatResponse{ToolCalls: []messages.ModelToolCall{{Name: "web_search", Arguments: `{"query":"q"}`}}, TextToolCalls: true}, nil
	}, final("found", "https://a.example/"))
	sessions, runner := poolOf(search)
	a := NewAnswerer(AnswererConfig{Context: fixedContext{block: "<room_context/>"}, LLM: llm, Render: textRenderer{}, Sessions: sessions, Tools: runner})
	res, out := runAttempt(t, a, &roompb.Candidate{RoomId: "!r:hs", EventId: "$e", Sender: "@u:hs"})
	if res.Err != nil || !strings.Contains(string(res.Content), "found [ https://a.example/]") || len(search.calls()) != 1 {
		t.Fatalf("result = %q, %v; calls %v", res.Content, res.Err, search.calls())
	}
	if !strings.Contains(out, `"text_tool_calls":1`) {
		t.Fatalf("final line lacks the count:\n%s", out)
	}
	if id := llm.requests()[1].Messages[2].ToolCalls[0].ID; !regexp.MustCompile(`^[a-zA-Z0-9]{9}$`).MatchString(id) {
		t.Fatalf("generated call ID %q is not nine letters and digits (Mistral needs them)", id)
	}
}

// noToolsLLM refuses every request that offers tools, like Ollama for a
// model without tool support, and answers the others.
type noToolsLLM struct {
	mu   sync.Mutex
	reqs []messages.ChatRequest
}

func (l *noToolsLLM) Chat(_ context.Context, req messages.ChatRequest) (messages.ChatResponse, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reqs = append(l.reqs, req)
	if len(req.Tools) > 0 {
		return messages.ChatResponse{}, &messages.Error{Code: messages.CodeLLMRejected, Permanent: true, Message: "does not support tools",
			Err: &messages.LLMFailure{Status: 400, Cause: messages.CauseToolsUnsupported}}
	}
	b, _ := json.Marshal(map[string]any{"markdown": "From the room alone.", "source_urls": []string{}})
	return messages.ChatResponse{Content: string(b)}, nil
}

// TestModelWithoutTools: a model that cannot take tools gets its
// question answered without them, from a system prompt that says there
// are none; one WARN says research is off and why, and later invocations
// offer no tools at all.
func TestModelWithoutTools(t *testing.T) {
	llm := &noToolsLLM{}
	var logs strings.Builder
	sessions := &fakeSessions{specs: []messages.ToolSpec{searchSpec}}
	a := NewAnswerer(AnswererConfig{Context: fixedContext{block: "<room_context/>"}, LLM: llm, Render: textRenderer{},
		Sessions: sessions, Tools: &fakeRunner{}, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	for i := range 3 {
		content, err := a.Invoke(context.Background(), candidate, 1)
		if err != nil || !strings.HasSuffix(string(content), "From the room alone.") {
			t.Fatalf("invocation %d: %q, %v", i, content, err)
		}
	}
	if len(llm.reqs) != 4 || len(llm.reqs[0].Tools) == 0 {
		t.Fatalf("%d requests; want one with tools, then three without", len(llm.reqs))
	}
	for _, r := range llm.reqs[1:] {
		sys := r.Messages[0].Content
		if len(r.Tools) != 0 || !strings.Contains(sys, "no tools") || !strings.Contains(sys, "never say or suggest that you did") || strings.Contains(sys, "web_search") {
			t.Fatalf("request without tools offers or mentions them: tools %d\n%s", len(r.Tools), sys)
		}
	}
	if n := strings.Count(logs.String(), "research is off"); n != 1 || !strings.Contains(logs.String(), `"level":"WARN"`) ||
		!strings.Contains(logs.String(), "--jinja") {
		t.Fatalf("want exactly one WARN naming the fix, got:\n%s", logs.String())
	}
}

// TestOtherLLMFailuresKeepTheTools: only tools_unsupported turns the
// tools off.
func TestOtherLLMFailuresKeepTheTools(t *testing.T) {
	boom := &messages.Error{Code: messages.CodeLLMRejected, Permanent: true, Err: &messages.LLMFailure{Status: 404, Cause: messages.CauseModelNotFound}}
	llm := newFakeLLM(fail(boom))
	a := NewAnswerer(AnswererConfig{Context: fixedContext{}, LLM: llm, Render: textRenderer{},
		Sessions: &fakeSessions{specs: []messages.ToolSpec{searchSpec}}, Tools: &fakeRunner{}})
	if _, err := a.Invoke(context.Background(), candidate, 1); !errors.Is(err, boom) || len(llm.requests()) != 1 || a.toolsOff.Load() {
		t.Fatalf("err = %v, %d requests, tools off %v", err, len(llm.requests()), a.toolsOff.Load())
	}
}

// excerptOf builds an excerpt of n history events of size bytes each,
// then the invoking message.
func excerptOf(n, size int) *messages.Excerpt {
	ex := &messages.Excerpt{Open: "<room_context>\n", Close: "</room_context>"}
	for i := range n {
		ex.Events = append(ex.Events, "<message n=\""+string(rune('a'+i%26))+"\">"+strings.Repeat("x", size)+"</message>\n")
	}
	ex.Events = append(ex.Events, `<message invocation="true">INVOKING</message>`+"\n")
	return ex
}

// TestRequestsFitTheWindow: with a small window, the oldest excerpt
// events go first, tool output is shortened next, and the system prompt
// and the invoking message are in every request; estimated tokens stay
// within the window less the output room.
func TestRequestsFitTheWindow(t *testing.T) {
	const window, output = 3000, 500
	big := newTool("fetch_web_page", func(json.RawMessage) messages.ToolResult {
		return messages.ToolResult{OK: true, Content: strings.Repeat("page ", 8000), SourceURLs: []string{"https://p.example/"}, Fetched: []string{"https://p.example/"}}
	})
	llm := newFakeLLM(calls(call("f", "fetch_web_page", `{"query":"p"}`)), final("done", "https://p.example/"))
	est := &TokenEstimator{}
	lim := Limits{ContextWindowTokens: window, MaxOutputTokens: output, Estimator: est}
	sys := SystemPrompt("p", []messages.ToolSpec{big.Spec()})
	ans, err := Run(context.Background(), llm, []Tool{big}, Prompt{Persona: "p", Excerpt: excerptOf(40, 200)}, lim)
	if err != nil || ans.Markdown != "done" {
		t.Fatalf("Run = %+v, %v", ans, err)
	}
	reqs := llm.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	for i, r := range reqs {
		tokens := est.Tokens(requestBytes(r.Messages, r.Tools), len(r.Messages), len(r.Tools))
		if tokens > window-output {
			t.Errorf("request %d: %d tokens estimated, budget %d", i, tokens, window-output)
		}
		if r.Messages[0].Content != sys || !strings.Contains(r.Messages[1].Content, "INVOKING") {
			t.Errorf("request %d lost the system prompt or the invoking message", i)
		}
	}
	first, second := reqs[0].Messages[1].Content, reqs[1].Messages[1].Content
	if strings.Count(first, "<message n=") >= 40 || strings.Count(second, "<message n=") >= strings.Count(first, "<message n=") {
		t.Errorf("events kept: first %d, second %d (of 40): the oldest must go, more when tool output came",
			strings.Count(first, "<message n="), strings.Count(second, "<message n="))
	}
	if !strings.HasSuffix(strings.TrimSpace(first[:strings.Index(first, "</room_context>")]), "INVOKING</message>") {
		t.Error("the invoking message is not the last of the excerpt")
	}
	p := decodeTool(t, toolMessages(reqs[1])[0])
	if !p.Truncated || len(*p.Content) >= 40000 {
		t.Errorf("tool output not shortened: truncated %v, %d bytes", p.Truncated, len(*p.Content))
	}
}

// TestWindowTooSmallIsOverload: when not even the system prompt and the
// invoking message fit, nothing is sent and the run ends in an overload.
func TestWindowTooSmallIsOverload(t *testing.T) {
	llm := newFakeLLM(final("never"))
	ans, err := Run(context.Background(), llm, nil, Prompt{Persona: strings.Repeat("persona ", 1000), Excerpt: excerptOf(3, 10)},
		Limits{ContextWindowTokens: 1200, MaxOutputTokens: 200})
	if err != nil || ans.Fallback != messages.FallbackOverload || len(llm.requests()) != 0 {
		t.Fatalf("Run = %+v, %v, %d requests", ans, err, len(llm.requests()))
	}
}

// TestEstimatorLearns: the estimate starts conservative, follows what the
// server counts, and a count at the budget (a server that may have cut
// the prompt) only tightens it.
func TestEstimatorLearns(t *testing.T) {
	var e TokenEstimator
	if got := e.Tokens(2500, 0, 0) - fixedOverheadTokens; got != 1000 {
		t.Fatalf("initial estimate of 2500 bytes = %d tokens, want 1000", got)
	}
	e.Observe(4000, 1000, 6000) // 4 bytes per token, well within the budget
	if got := e.Tokens(3600, 0, 0) - fixedOverheadTokens; got != 1000 {
		t.Fatalf("after learning 4 bytes/token, 3600 bytes = %d tokens, want 1000 (with the 10%% margin)", got)
	}
	e.Observe(40000, 6000, 6000) // reported at the budget: maybe cut
	if got := e.ratio(); got > 4*0.9*0.8+1e-9 {
		t.Fatalf("a capped count relaxed the estimate to %.2f bytes/token", got)
	}
	var nilEst *TokenEstimator
	nilEst.Observe(1, 1, 1)
	if nilEst.Tokens(250, 0, 0) != 100+fixedOverheadTokens {
		t.Fatal("a nil estimator does not estimate with the initial ratio")
	}
}

func TestCallIDs(t *testing.T) {
	for _, n := range []int{0, 7, 99999, 123456} {
		if id := callID(n); !regexp.MustCompile(`^lisa[0-9]{5}$`).MatchString(id) {
			t.Errorf("callID(%d) = %q", n, id)
		}
	}
}
