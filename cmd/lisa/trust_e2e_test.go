package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"maunium.net/go/mautrix/id"

	"github.com/lisabot/lisa/devkit/demo"
	"github.com/lisabot/lisa/testkit/llmfake"
	"github.com/lisabot/lisa/testkit/searxfake"
)

// The acceptance tests of issue #32 (answers members can trust and
// operators can diagnose), against a real Dendrite.

// metricsAddr returns a free loopback address for runtime.metrics_listen.
func metricsAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// awaitMetric scrapes addr until its metrics contain want, and returns
// them; it fails the test after 20 s.
func awaitMetric(t *testing.T, addr, want string) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(b), want) {
			return string(b)
		}
		if time.Now().After(deadline) {
			t.Fatalf("metrics lack %q:\n%s", want, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestInventedLinksAreText (issue #32 item 1): a model that researches a
// page and answers with an inline link to a URL nobody gave it, a bare
// invented URL and a link to the page it fetched gets its answer posted
// with the invented ones as text (no href to them in formatted_body), the
// fetched page still a link, and the two counted in the attempt's log
// line (links_unverified) and the metric.
func TestInventedLinksAreText(t *testing.T) {
	e := newE2E(t, 1)
	room := e.allowed[0]
	pageURL, _ := startPage(t, "text/html; charset=utf-8", "<html><head><title>Topic</title></head><body><p>The answer is 42.</p></body></html>")
	searx := searxfake.Start(t, searxfake.WithDefault(searxfake.Results(searxfake.Result{URL: pageURL, Title: "Topic", Content: "about it"})))
	e.researchConfig(searx.URL(), true)
	research := researchScript(pageURL, false)
	e.llm = llmfake.Start(t, llmfake.WithModels("m"), llmfake.WithDefault(llmfake.Func(sentinelOr(func(r llmfake.Request) llmfake.Step {
		if toolMsgCount(r) < 3 { // search, fetch, convert
			return research(r)
		}
		return llmfake.Answer("It is 42, says [the page]("+pageURL+"). See also [the report](https://invented.example/report) "+
			"and https://invented.example/bare for more.", pageURL)
	}))))
	addr := metricsAddr(t)
	p := e.start("LISA_RUNTIME__METRICS_LISTEN=" + addr)
	e.awaitLog(p, "sync baseline recorded")
	ev := e.mention(room, "Lisa, what is the answer?")
	e.awaitReply(room, ev)
	sentinel := e.settle(room)
	e.expectReplies(room, map[id.EventID]int{ev: 1, sentinel: 1})

	reply := e.lisaReply(room, ev)
	formatted, _ := reply.Content.Raw["formatted_body"].(string)
	body, _ := reply.Content.Raw["body"].(string)
	if strings.Contains(formatted, `href="https://invented.example`) {
		t.Fatalf("an invented URL is a link:\n%s", formatted)
	}
	for _, want := range []string{`<a href="` + pageURL + `">the page</a>`, "See also the report and <code>https://invented.example/bare</code> for more.",
		"Sources"} {
		if !strings.Contains(formatted, want) {
			t.Fatalf("formatted_body lacks %q:\n%s", want, formatted)
		}
	}
	if strings.Contains(body, "invented.example/report") {
		t.Fatalf("the invented link's target is in the body:\n%s", body)
	}
	var answered map[string]any
	for _, r := range p.logRecords("invocation attempt finished") {
		if r["code"] == "ok" && r["tool_calls"] == 3.0 {
			answered = r
		}
	}
	if answered == nil || answered["links_unverified"] != 2.0 {
		t.Fatalf("attempt line %v: want links_unverified 2\n%s", answered, p.text())
	}
	awaitMetric(t, addr, "lisa_answer_links_unverified_total 2")
	if strings.Contains(p.text(), "invented.example") {
		t.Fatal("the log names an invented URL")
	}
}

// TestBudgetEndsInAnAnswer (issue #32 item 2): a model that calls
// web_search whenever tools are offered spends llm.max_tool_calls; Lisa's
// next request offers none (tool_choice "none") and asks for the answer
// from what was gathered, which the room gets as the one reply — never
// the overload error — and the attempt's log line shows the reserved
// request with the counters.
func TestBudgetEndsInAnAnswer(t *testing.T) {
	e := newE2E(t, 1)
	room := e.allowed[0]
	const found = "https://found.example/tea"
	searx := searxfake.Start(t, searxfake.WithDefault(searxfake.Results(searxfake.Result{URL: found, Title: "Tea", Content: "Tea is brewed at 80 degrees."})))
	e.researchConfig(searx.URL(), true)
	e.llm = llmfake.Start(t, llmfake.WithModels("m"), llmfake.WithDefault(llmfake.Func(sentinelOr(func(r llmfake.Request) llmfake.Step {
		if len(r.Tools) > 0 && string(r.ToolChoice) != `"none"` {
			return llmfake.ToolCalls(llmfake.Call("web_search", map[string]string{"query": fmt.Sprintf("tea %d", toolMsgCount(r))}))
		}
		return llmfake.Answer("From my searches: brew it at 80 degrees.", found)
	}))))
	p := e.start("LISA_LLM__MAX_TOOL_CALLS=3", "LISA_LLM__MAX_ITERATIONS=8")
	e.awaitLog(p, "sync baseline recorded")
	ev := e.mention(room, "Lisa, how hot should tea be?")
	e.awaitReply(room, ev)
	sentinel := e.settle(room)
	e.expectReplies(room, map[id.EventID]int{ev: 1, sentinel: 1})

	if body := e.replyBody(room, ev); !strings.Contains(body, "brew it at 80 degrees") || strings.Contains(body, "Too much at once.") {
		t.Fatalf("reply = %q, want the answer from the searches", body)
	}
	var reqs []llmfake.Request
	for _, r := range e.llm.Requests() {
		if !strings.Contains(demo.InvocationText(firstUser(r)), "sentinel") {
			reqs = append(reqs, r)
		}
	}
	if len(reqs) != 4 {
		t.Fatalf("%d LLM requests for the question, want 4 (3 with tools, the reserved one)", len(reqs))
	}
	for i, r := range reqs {
		want := `"auto"`
		if i == 3 {
			want = `"none"`
		}
		if string(r.ToolChoice) != want {
			t.Errorf("request %d: tool_choice %s, want %s", i, r.ToolChoice, want)
		}
	}
	if n := toolMsgCount(reqs[3]); n != 3 {
		t.Errorf("the reserved request carries %d tool results, want 3", n)
	}
	var line map[string]any
	for _, r := range p.logRecords("invocation attempt finished") {
		if r["code"] == "ok" && r["tool_calls"] == 3.0 {
			line = r
		}
	}
	if line == nil || line["reserved_request"] != "max_tool_calls" || line["iterations"] != 4.0 || line["fallback"] != nil {
		t.Fatalf("attempt line %v: want reserved_request max_tool_calls, iterations 4, no fallback\n%s", line, p.text())
	}
	if recs := p.logRecords("tool budget spent; the reserved request asks the model to answer from what it gathered"); len(recs) != 1 ||
		recs[0]["reason"] != "max_tool_calls" || recs[0]["tool_calls"] != 3.0 || recs[0]["iterations"] != 3.0 {
		t.Fatalf("reserved request records = %v", recs)
	}
}
