package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"maunium.net/go/mautrix/id"

	"github.com/lisabot/lisa/adapters/llm"
	"github.com/lisabot/lisa/devkit/demo"
	"github.com/lisabot/lisa/testkit/llmfake"
	"github.com/lisabot/lisa/testkit/searxfake"
)

// The acceptance tests of issue #32 (answers members can trust and
// operators can diagnose), against each real homeserver.

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
	onEachHomeserver(t, func(t *testing.T, hs string) {
		e := newE2E(t, hs, 1)
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
	})
}

// TestBudgetEndsInAnAnswer (issue #32 item 2): a model that calls
// web_search whenever tools are offered spends llm.max_tool_calls; Lisa's
// next request offers none (tool_choice "none") and asks for the answer
// from what was gathered, which the room gets as the one reply — never
// the overload error — and the attempt's log line shows the reserved
// request with the counters.
func TestBudgetEndsInAnAnswer(t *testing.T) {
	onEachHomeserver(t, func(t *testing.T, hs string) {
		e := newE2E(t, hs, 1)
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
	})
}

// TestLLMRefusalIsDiagnosed (issue #32 item 3): while the LLM server
// refuses the API key, the room gets the persona's error, the log holds
// one ERROR line with the code, the cause, the status, the server's
// message (the key it echoes redacted) and the setting to check, the
// metric counts the cause, and lisa health is degraded; once the server
// answers again, lisa health is healthy.
func TestLLMRefusalIsDiagnosed(t *testing.T) {
	onEachHomeserver(t, func(t *testing.T, hs string) {
		e := newE2E(t, hs, 1)
		room := e.allowed[0]
		e.llmKey = "sk-e2e-wrong-key-0123456789"
		var accept atomic.Bool
		e.llm = llmfake.Start(t, llmfake.WithModels("m"), llmfake.WithDefault(llmfake.Func(func(r llmfake.Request) llmfake.Step {
			if !accept.Load() {
				return llmfake.Error(401, "Incorrect API key provided: "+e.llmKey+". You can find your API key in your account settings.")
			}
			return llmfake.Answer("done")
		})))
		addr := metricsAddr(t)
		p := e.start("LISA_RUNTIME__METRICS_LISTEN=" + addr)
		e.awaitLog(p, "sync baseline recorded")
		health := func() (int, healthOut) {
			t.Helper()
			var out bytes.Buffer
			code := run(context.Background(), []string{"health", "--config", filepath.Join(e.dir, "lisa.toml")},
				strings.NewReader(""), &out, &bytes.Buffer{}, lookupFrom(nil))
			var h healthOut
			if err := json.Unmarshal(out.Bytes(), &h); err != nil {
				t.Fatalf("health output %q: %v", out.String(), err)
			}
			return code, h
		}
		if code, h := health(); code != 0 {
			t.Fatalf("before any request: lisa health exit %d: %+v", code, h)
		}

		for i, q := range []string{"Lisa, are you there?", "Lisa, and now?"} {
			ev := e.mention(room, q)
			e.awaitReply(room, ev)
			if body := e.replyBody(room, ev); !strings.Contains(body, "Sorry, I got tangled.") {
				t.Fatalf("reply %d = %q, want the persona's generic error", i, body)
			}
		}
		recs := p.logRecords(llm.RefusedMessage)
		if len(recs) != 1 {
			t.Fatalf("%d ERROR lines for the refused key, want 1:\n%s", len(recs), p.text())
		}
		r := recs[0]
		if r["level"] != "ERROR" || r["code"] != "llm_rejected" || r["cause"] != "unauthorized" || r["status"] != 401.0 ||
			r["server_message"] != "Incorrect API key provided: [REDACTED]. You can find your API key in your account settings." ||
			!strings.Contains(r["fix"].(string), "llm.api_key") {
			t.Fatalf("ERROR line = %v", r)
		}
		attempts := 0
		for _, a := range p.logRecords("invocation attempt finished") {
			if a["code"] == "llm_rejected" {
				attempts++
				if a["cause"] != "unauthorized" {
					t.Errorf("attempt line without the cause: %v", a)
				}
			}
		}
		if attempts != 2 {
			t.Errorf("%d attempt lines with llm_rejected, want 2", attempts)
		}
		if again := p.logRecords("the LLM server refused the request again; the configuration must change"); len(again) != 1 || again[0]["level"] != "WARN" {
			t.Fatalf("the second refusal's line = %v", again)
		}
		if strings.Contains(p.text(), e.llmKey) || strings.Contains(p.text(), "sk-e2e") {
			t.Fatal("the API key is in the log")
		}
		awaitMetric(t, addr, `lisa_llm_failures_total{cause="unauthorized"} 2`)
		code, h := health()
		if code != 1 || h.Status != "degraded" || h.LLMRefusing != "unauthorized" || len(h.Reasons) != 1 ||
			!strings.Contains(h.Reasons[0], "unauthorized, HTTP 401") {
			t.Fatalf("while the key is refused: lisa health exit %d: %+v", code, h)
		}

		accept.Store(true)
		sentinel := e.settle(room)
		if body := e.replyBody(room, sentinel); !strings.Contains(body, "done") {
			t.Fatalf("reply once the server answers = %q", body)
		}
		if code, h := health(); code != 0 || h.Status != "healthy" || h.LLMRefusing != "" {
			t.Fatalf("once the server answers: lisa health exit %d: %+v", code, h)
		}
		awaitMetric(t, addr, "lisa_llm_refusing 0")
	})
}

// healthOut is what lisa health prints.
type healthOut struct {
	Status      string   `json:"status"`
	Reasons     []string `json:"reasons"`
	LLMRefusing string   `json:"llm_refusing"`
}
