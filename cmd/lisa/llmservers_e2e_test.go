package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"maunium.net/go/mautrix/id"

	"github.com/lisabot/lisa/devkit/demo"
	"github.com/lisabot/lisa/testkit/llmfake"
	"github.com/lisabot/lisa/testkit/searxfake"
)

// Issue #30 against each homeserver: models that do not keep the answer
// contract still get exactly one reply into the room.

// firstUser returns the first user message of a request: the room
// context, which names the invoking message.
func firstUser(r llmfake.Request) string {
	for _, m := range r.Messages {
		if m.Role == "user" {
			return m.Content
		}
	}
	return ""
}

// toolMsgCount counts the tool messages of a request.
func toolMsgCount(r llmfake.Request) int {
	n := 0
	for _, m := range r.Messages {
		if m.Role == "tool" {
			n++
		}
	}
	return n
}

// isRepair reports whether r is a repair request.
func isRepair(r llmfake.Request) bool {
	return strings.Contains(r.Messages[len(r.Messages)-1].Content, "could not be used") && r.Messages[len(r.Messages)-1].Role == "user"
}

// sentinelOr answers the settle helper's sentinel, and plays model for
// every other invocation.
func sentinelOr(model func(llmfake.Request) llmfake.Step) func(llmfake.Request) llmfake.Step {
	return func(r llmfake.Request) llmfake.Step {
		if strings.Contains(demo.InvocationText(firstUser(r)), "sentinel") {
			return llmfake.Answer("done")
		}
		return model(r)
	}
}

// startPage serves one page and counts its downloads.
func startPage(t *testing.T, contentType, body string) (string, *atomic.Int64) {
	t.Helper()
	var hits atomic.Int64
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", contentType)
		fmt.Fprint(w, body)
	}))
	t.Cleanup(page.Close)
	return page.URL + "/servers", &hits
}

// TestProseAnswersReachTheRoom: a model that answers in prose, and again
// in prose after the repair request, gets its prose into the room as one
// reply — with no Sources when it read nothing, with the page it fetched
// as Sources when it did — and the log says final_not_json.
func TestProseAnswersReachTheRoom(t *testing.T) {
	onEachHomeserver(t, func(t *testing.T, hs string) {
		for _, withPage := range []bool{false, true} {
			t.Run(fmt.Sprintf("fetched page %v", withPage), func(t *testing.T) {
				e := newE2E(t, hs, 1)
				room := e.allowed[0]
				pageURL, hits := startPage(t, "text/plain; charset=utf-8", "Prose servers are common. Lisa posts their prose.")
				if withPage {
					searx := searxfake.Start(t, searxfake.WithDefault(searxfake.Results(searxfake.Result{URL: pageURL, Title: "Server prose", Content: "about prose"})))
					e.researchConfig(searx.URL(), true)
				}
				e.llm = llmfake.Start(t, llmfake.WithModels("m"), llmfake.WithDefault(llmfake.Func(sentinelOr(func(r llmfake.Request) llmfake.Step {
					switch {
					case withPage && toolMsgCount(r) == 0 && !isRepair(r):
						return llmfake.ToolCalls(llmfake.Call("web_search", map[string]string{"query": "prose servers"}))
					case withPage && toolMsgCount(r) == 1 && !isRepair(r):
						return llmfake.ToolCalls(llmfake.Call("fetch_web_page", map[string]string{"url": pageURL}))
					case isRepair(r):
						return llmfake.Text("Lisa posts the prose of servers like these, as it is.")
					}
					return llmfake.Text("Servers answer in prose, you know.")
				}))))
				p := e.start()
				e.awaitLog(p, "sync baseline recorded")
				ev := e.mention(room, "Lisa, what do servers send?")
				e.awaitReply(room, ev)
				sentinel := e.settle(room)
				e.expectReplies(room, map[id.EventID]int{ev: 1, sentinel: 1})

				reply := e.lisaReply(room, ev)
				body, _ := reply.Content.Raw["body"].(string)
				formatted, _ := reply.Content.Raw["formatted_body"].(string)
				if !strings.Contains(body, "Lisa posts the prose of servers like these, as it is.") || strings.Contains(body, "Sorry, I got tangled") {
					t.Fatalf("reply = %s", reply.Content.VeryRaw)
				}
				hasSources := strings.Contains(formatted, "Sources")
				if hasSources != withPage || (withPage && (!strings.Contains(formatted, `href="`+pageURL+`"`) || hits.Load() != 1)) {
					t.Fatalf("Sources shown %v (want %v), page hits %d:\n%s", hasSources, withPage, hits.Load(), formatted)
				}
				if !strings.Contains(p.text(), "final_not_json") {
					t.Fatalf("final_not_json not logged:\n%s", p.text())
				}
				repairs := 0
				for _, r := range e.llm.Requests() {
					if isRepair(r) {
						repairs++
						if string(r.ToolChoice) == `"auto"` {
							t.Errorf("the repair request lets the model call tools")
						}
					}
				}
				if repairs != 1 {
					t.Fatalf("%d repair requests, want 1", repairs)
				}
			})
		}
	})
}

// TestTextToolCallResearch: a model whose server leaves its tool calls as
// <tool_call> text in the content gets its research done and its answer
// posted with the page it read as Sources.
func TestTextToolCallResearch(t *testing.T) {
	onEachHomeserver(t, func(t *testing.T, hs string) {
		e := newE2E(t, hs, 1)
		room := e.allowed[0]
		pageURL, hits := startPage(t, "text/plain; charset=utf-8", "Text tool calls are run as tool calls.")
		searx := searxfake.Start(t, searxfake.WithDefault(searxfake.Results(searxfake.Result{URL: pageURL, Title: "Text calls", Content: "about text calls"})))
		e.researchConfig(searx.URL(), true)
		e.llm = llmfake.Start(t, llmfake.WithModels("m"), llmfake.WithDefault(llmfake.Func(sentinelOr(func(r llmfake.Request) llmfake.Step {
			switch toolMsgCount(r) {
			case 0:
				return llmfake.Text("Let me search.\n<tool_call>\n{\"name\": \"web_search\", \"arguments\": {\"query\": \"text tool calls\"}}\n</tool_call>")
			case 1:
				return llmfake.Text(`<tool_call>{"name": "fetch_web_page", "arguments": {"url": "` + pageURL + `"}}</tool_call>`)
			}
			return llmfake.Answer("Calls written as text are run like any other.", pageURL)
		}))))
		p := e.start()
		e.awaitLog(p, "sync baseline recorded")
		ev := e.mention(room, "Lisa, research text tool calls")
		e.awaitReply(room, ev)
		sentinel := e.settle(room)
		e.expectReplies(room, map[id.EventID]int{ev: 1, sentinel: 1})

		reply := e.lisaReply(room, ev)
		body, _ := reply.Content.Raw["body"].(string)
		formatted, _ := reply.Content.Raw["formatted_body"].(string)
		if !strings.Contains(body, "Calls written as text are run like any other.") || !strings.Contains(formatted, `href="`+pageURL+`"`) ||
			strings.Contains(body, "tool_call") || hits.Load() != 1 || len(searx.Requests()) != 1 {
			t.Fatalf("reply = %s (page hits %d, searches %d)", reply.Content.VeryRaw, hits.Load(), len(searx.Requests()))
		}
		if !strings.Contains(p.text(), `"text_tool_calls":2`) {
			t.Fatalf("the attempt's line does not count the text tool calls:\n%s", p.text())
		}
	})
}

// TestLengthCutGetsOneRepair: a model that stops at finish_reason
// "length" in the middle of its answer gets one repair request, and then
// the room gets its answer, or the persona's error — never two replies.
func TestLengthCutGetsOneRepair(t *testing.T) {
	onEachHomeserver(t, func(t *testing.T, hs string) {
		for _, c := range []struct {
			name   string
			repair llmfake.Step
			want   string
		}{
			{"answer after the repair", llmfake.Answer("Short and complete."), "Short and complete."},
			{"cut again", llmfake.Text(`{"markdown": "Still far too long and cut`).WithFinishReason("length"), "Sorry, I got tangled."},
		} {
			t.Run(c.name, func(t *testing.T) {
				e := newE2E(t, hs, 1)
				room := e.allowed[0]
				e.llm = llmfake.Start(t, llmfake.WithModels("m"), llmfake.WithDefault(llmfake.Func(sentinelOr(func(r llmfake.Request) llmfake.Step {
					if isRepair(r) {
						return c.repair
					}
					return llmfake.Text(`{"markdown": "A very long answer that goes on and on until the token limit cuts it`).WithFinishReason("length")
				}))))
				p := e.start()
				e.awaitLog(p, "sync baseline recorded")
				ev := e.mention(room, "Lisa, explain everything")
				e.awaitReply(room, ev)
				sentinel := e.settle(room)
				e.expectReplies(room, map[id.EventID]int{ev: 1, sentinel: 1})
				body, _ := e.lisaReply(room, ev).Content.Raw["body"].(string)
				if !strings.Contains(body, c.want) || strings.Contains(body, "goes on and on") {
					t.Fatalf("reply body = %q, want %q", body, c.want)
				}
				requests, repairs := 0, 0
				for _, r := range e.llm.Requests() {
					if strings.Contains(demo.InvocationText(firstUser(r)), "explain everything") {
						requests++
						if isRepair(r) {
							repairs++
							if !strings.Contains(r.Messages[len(r.Messages)-1].Content, "cut off") {
								t.Errorf("the repair request does not say the reply was cut off")
							}
						}
					}
				}
				if requests != 2 || repairs != 1 {
					t.Fatalf("%d requests, %d repairs; want 2 and 1", requests, repairs)
				}
			})
		}
	})
}

// contentTokens is the scripted server's tokenizer: a token per three
// bytes of everything a chat template turns into prompt tokens.
func contentTokens(r llmfake.Request) int {
	n := 0
	for _, m := range r.Messages {
		n += len(m.Content) + len(m.ToolCallID)
		for _, c := range m.ToolCalls {
			n += len(c.ID) + len(c.Name) + len(c.Arguments)
		}
	}
	for _, t := range r.Tools {
		n += len(t.Name) + len(t.Description) + len(t.Parameters)
	}
	return (n + 2) / 3
}

// TestRequestsFitTheModelWindow: with llm.context_window_tokens = 4096, a
// room of 40 events and a 200 KB page fetched, no request the model
// receives exceeds the window less max_output_tokens (counted by the
// server's own tokenizer, which it reports as prompt_tokens), and every
// request holds the system prompt and the invoking message.
func TestRequestsFitTheModelWindow(t *testing.T) {
	onEachHomeserver(t, func(t *testing.T, hs string) {
		const window, output = 4096, 1024
		e := newE2E(t, hs, 1)
		room := e.allowed[0]
		var page strings.Builder
		for i := 0; page.Len() < 200_000; i++ {
			fmt.Fprintf(&page, "Line %d of the big page: servers differ in many small ways, and Lisa copes.\n", i)
		}
		pageURL, hits := startPage(t, "text/plain; charset=utf-8", page.String())
		searx := searxfake.Start(t, searxfake.WithDefault(searxfake.Results(searxfake.Result{URL: pageURL, Title: "Big page", Content: "big"})))
		e.researchConfig(searx.URL(), true) // context.max_events stays at its default, 40
		const question = "Lisa, read the big page about servers"
		e.llm = llmfake.Start(t, llmfake.WithModels("m"), llmfake.WithDefault(llmfake.Func(sentinelOr(func(r llmfake.Request) llmfake.Step {
			var step llmfake.Step
			switch toolMsgCount(r) {
			case 0:
				step = llmfake.ToolCalls(llmfake.Call("web_search", map[string]string{"query": "big page"}))
			case 1:
				step = llmfake.ToolCalls(llmfake.Call("fetch_web_page", map[string]string{"url": pageURL}))
			default:
				step = llmfake.Answer("The page says servers differ.", pageURL)
			}
			return step.WithUsage(llmfake.Usage{PromptTokens: contentTokens(r), CompletionTokens: 20})
		}))))
		p := e.start(fmt.Sprintf("LISA_LLM__CONTEXT_WINDOW_TOKENS=%d", window), fmt.Sprintf("LISA_LLM__MAX_OUTPUT_TOKENS=%d", output))
		e.awaitLog(p, "sync baseline recorded")
		for i := range 45 {
			e.say(room, plainText(fmt.Sprintf("Message %d of a lived-in room: we talked about servers, tokens and windows at some length today.", i)))
		}
		ev := e.mention(room, question)
		e.awaitReply(room, ev)
		sentinel := e.settle(room)
		e.expectReplies(room, map[id.EventID]int{ev: 1, sentinel: 1})
		formatted, _ := e.lisaReply(room, ev).Content.Raw["formatted_body"].(string)
		if !strings.Contains(formatted, "The page says servers differ.") || hits.Load() != 1 {
			t.Fatalf("reply = %s (page hits %d)", formatted, hits.Load())
		}
		var system string
		checked := 0
		for _, r := range e.llm.Requests() {
			if strings.Contains(demo.InvocationText(firstUser(r)), "sentinel") {
				continue
			}
			checked++
			t.Logf("request %d: %d tokens (budget %d), %d messages", r.Seq, contentTokens(r), window-output, len(r.Messages))
			if tokens := contentTokens(r); tokens > window-output {
				t.Errorf("request %d: %d tokens, budget %d", r.Seq, tokens, window-output)
			}
			if system == "" {
				system = r.Messages[0].Content
			}
			if r.Messages[0].Role != "system" || r.Messages[0].Content != system || !strings.HasPrefix(system, "# Host policy") {
				t.Errorf("request %d lost the system prompt", r.Seq)
			}
			if demo.InvocationText(firstUser(r)) != question {
				t.Errorf("request %d lost the invoking message", r.Seq)
			}
		}
		if checked != 3 {
			t.Fatalf("%d requests for the question, want 3 (search, fetch, answer)", checked)
		}
		if !strings.Contains(p.text(), "window_events_dropped") || !strings.Contains(p.text(), `"window_tool_output_cut":true`) {
			t.Fatalf("the attempt's line does not say what the window left out:\n%s", p.text())
		}
	})
}
