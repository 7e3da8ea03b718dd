package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/lisabot/lisa/config"
	"github.com/lisabot/lisa/testkit/llmfake"
)

// researchPageDelays are how long the local web takes to serve each of
// the three pages the research phase's model asks for (issue #27).
var researchPageDelays = []time.Duration{300 * time.Millisecond, 500 * time.Millisecond, 800 * time.Millisecond}

// researchModelRequests is the scripted model's requests per research
// invocation: three fetches in one turn, their three conversions in the
// next, then the answer.
const researchModelRequests = 3

// researchReport is the research phase: a member's wait for an answer
// that reads three web pages, with the turn's calls side by side (the
// default) and one after another (llm.max_parallel_tool_calls = 1), in
// the same run.
type researchReport struct {
	PageDelaysMs []float64 `json:"page_delays_ms"`
	// ModelMsPerRequest is the scripted model's fixed time per request;
	// ModelMs is its time per invocation (ModelRequests requests).
	ModelMsPerRequest float64 `json:"model_ms_per_request"`
	ModelRequests     int     `json:"model_requests_per_invocation"`
	ModelMs           float64 `json:"model_ms_per_invocation"`
	// FloorMs is the slowest page plus the model's time: the least a
	// member can wait. SumFloorMs is every page one after another plus
	// the model's time.
	FloorMs    float64 `json:"floor_ms"`
	SumFloorMs float64 `json:"sequential_floor_ms"`
	// Converter is web.converter in both runs.
	Converter string `json:"converter"`
	// CPUNote says what the CPU figures hold.
	CPUNote    string      `json:"cpu_note"`
	Parallel   researchRun `json:"parallel"`
	Sequential researchRun `json:"sequential"`
}

// researchRun is one configuration's figures.
type researchRun struct {
	MaxParallelToolCalls int     `json:"max_parallel_tool_calls"`
	Invocations          int     `json:"invocations"`
	AnswerP50Ms          float64 `json:"answer_p50_ms"`
	AnswerMaxMs          float64 `json:"answer_max_ms"`
	// FloorRatio is AnswerP50Ms ÷ (slowest page + model time);
	// SumRatio is AnswerP50Ms ÷ (every page in turn + model time).
	FloorRatio float64 `json:"floor_ratio"`
	SumRatio   float64 `json:"sequential_floor_ratio"`
	// LisaCPUMs and ConverterCPUMs are CPU time per research invocation:
	// the bench process's (Lisa's, see researchReport.CPUNote) and its
	// converter subprocesses' (pandoc; 0 with the built-in converter,
	// whose time is Lisa's).
	LisaCPUMs      float64 `json:"lisa_cpu_ms_per_invocation"`
	ConverterCPUMs float64 `json:"converter_cpu_ms_per_invocation"`
	// PageRequests and ModelRequests are what the fakes served per
	// invocation: 3 and 3 when every call did its work once.
	PageRequests  float64 `json:"page_requests_per_invocation"`
	ModelRequests float64 `json:"model_requests_per_invocation"`
	// Segments split the answer time at the model's requests (p50 of
	// each, ms): where the member's wait goes.
	Segments []segmentStats `json:"segments"`

	samples []time.Duration
}

// researchSegmentNames name the parts of a research answer's time
// between the instants the fake homeserver and the scripted model see.
var researchSegmentNames = []string{
	"question deliverable → first model request (sync, context)",
	"model turn 1 (fixed)",
	"→ second model request (three fetches: the slowest page and Lisa's work)",
	"model turn 2 (fixed)",
	"→ third model request (three conversions)",
	"model turn 3 (fixed)",
	"→ reply arrives (render, send)",
}

// benchResearch runs the research phase: o.researchInvocations research
// invocations (after one unmeasured) with the default
// llm.max_parallel_tool_calls, then as many with 1.
func benchResearch(ctx context.Context, work string, o benchOptions) (*researchReport, error) {
	pages, err := startDelayedPages(researchPageDelays)
	if err != nil {
		return nil, err
	}
	defer pages.Close()
	model := time.Duration(o.researchModelMs) * time.Millisecond
	rep := &researchReport{ModelMsPerRequest: ms(model), ModelRequests: researchModelRequests,
		ModelMs: ms(researchModelRequests * model), Converter: config.ConverterPandoc,
		CPUNote: "Lisa's is the bench process's user+sys CPU, the in-process fake homeserver, scripted LLM and pages included; the converter's is its subprocesses' (getrusage RUSAGE_CHILDREN)"}
	var slowest, sum time.Duration
	for _, d := range researchPageDelays {
		rep.PageDelaysMs = append(rep.PageDelaysMs, ms(d))
		slowest, sum = max(slowest, d), sum+d
	}
	rep.FloorMs = ms(slowest) + rep.ModelMs
	rep.SumFloorMs = ms(sum) + rep.ModelMs
	web := "\n[web]\nallow_private_addresses = true\n"
	if _, err := exec.LookPath("pandoc"); err != nil {
		rep.Converter = config.ConverterBuiltin
		web += fmt.Sprintf("converter = %q\n", config.ConverterBuiltin)
	}
	for _, run := range []struct {
		out      *researchRun
		name     string
		parallel int
	}{
		{&rep.Parallel, "parallel", config.Default().LLM.MaxParallelToolCalls},
		{&rep.Sequential, "sequential", 1},
	} {
		llmExtra := ""
		if run.parallel != config.Default().LLM.MaxParallelToolCalls {
			llmExtra = fmt.Sprintf("max_parallel_tool_calls = %d\n", run.parallel)
		}
		r, err := researchPhase(ctx, filepath.Join(work, run.name), o, pages, model, llmExtra, web)
		if err != nil {
			return rep, fmt.Errorf("%s: %w", run.name, err)
		}
		r.MaxParallelToolCalls = run.parallel
		r.FloorRatio = r.AnswerP50Ms / rep.FloorMs
		r.SumRatio = r.AnswerP50Ms / rep.SumFloorMs
		*run.out = *r
	}
	return rep, nil
}

// researchPhase starts a Lisa with llmExtra and extra configuration and
// times o.researchInvocations research invocations after one unmeasured.
func researchPhase(ctx context.Context, work string, o benchOptions, pages *delayedPages, model time.Duration, llmExtra, extra string) (*researchRun, error) {
	n := o.researchInvocations
	waiter := newArrivals(nil)
	hs, rooms, err := startFake(n+1, "rs", waiter, nil)
	if err != nil {
		return nil, err
	}
	defer hs.Close()
	var (
		roundsMu sync.Mutex
		rounds   []llmRound
	)
	llm := llmfake.New(llmfake.WithModels("bench-model"), llmfake.WithDefault(llmfake.Func(researchModel(pages.urls)).After(model)),
		llmfake.WithTrace(func(arrived, answered time.Time) {
			roundsMu.Lock()
			rounds = append(rounds, llmRound{arrived, answered})
			roundsMu.Unlock()
		}))
	if err := llm.Listen(); err != nil {
		return nil, err
	}
	defer llm.Close()
	lisa, err := startBenchLisaLLM(ctx, work, benchTarget{hs.URL(), benchBot, benchDevice, benchToken}, llm.URL(), rooms, 3, o.logOut, llmExtra, extra)
	if err != nil {
		return nil, err
	}
	defer lisa.stop()
	if err := lisa.d.AwaitBaseline(ctx, time.Minute); err != nil {
		return nil, err
	}
	out := &researchRun{Invocations: n}
	segs := make([][]time.Duration, len(researchSegmentNames))
	var self0, kids0 time.Duration
	var pages0, llm0 int
	for i := range n + 1 {
		if i == 1 { // the first invocation warms up (pandoc's first start, connections)
			self0, kids0, pages0, llm0 = processCPU(), childrenCPU(), pages.served(), len(llm.Requests())
		}
		roundsMu.Lock()
		rounds = nil
		roundsMu.Unlock()
		wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		posted, arrived, err := researchStep(wctx, hs, waiter, rooms[i], pages.urls, i)
		cancel()
		if err != nil {
			return nil, err
		}
		if i == 0 {
			continue
		}
		out.samples = append(out.samples, arrived.Sub(posted))
		roundsMu.Lock()
		marks := []time.Time{posted}
		for _, r := range rounds {
			marks = append(marks, r.arrived, r.answered)
		}
		roundsMu.Unlock()
		if marks = append(marks, arrived); len(marks) == len(researchSegmentNames)+1 {
			for k := range researchSegmentNames {
				segs[k] = append(segs[k], marks[k+1].Sub(marks[k]))
			}
		}
	}
	per := func(d time.Duration) float64 { return ms(d) / float64(max(n, 1)) }
	out.LisaCPUMs, out.ConverterCPUMs = per(processCPU()-self0), per(childrenCPU()-kids0)
	out.PageRequests = float64(pages.served()-pages0) / float64(max(n, 1))
	out.ModelRequests = float64(len(llm.Requests())-llm0) / float64(max(n, 1))
	out.AnswerP50Ms, out.AnswerMaxMs = pct(out.samples, 50), pct(out.samples, 100)
	for k, name := range researchSegmentNames {
		out.Segments = append(out.Segments, segmentStats{Name: name, P50Ms: pct(segs[k], 50), P99Ms: pct(segs[k], 99)})
	}
	return out, nil
}

// parker is what researchStep needs of the fake homeserver.
type parker interface {
	WaitParked(ctx context.Context) error
	Post(roomID, sender string, content any) (string, time.Time, error)
}

// researchStep posts research question i in room once Lisa's /sync is
// parked, and returns when the question became deliverable and when the
// reply arrived.
func researchStep(ctx context.Context, hs parker, w *arrivals, room string, urls []string, i int) (posted, arrived time.Time, err error) {
	if err := hs.WaitParked(ctx); err != nil {
		return posted, arrived, err
	}
	content := map[string]any{
		"msgtype": "m.text", "body": fmt.Sprintf("Lisa, what do these three pages say (question %d)? %s", i, strings.Join(urls, " ")),
		"m.mentions": map[string]any{"user_ids": []string{benchBot}},
	}
	ev, posted, err := hs.Post(room, benchHuman, content)
	if err != nil {
		return posted, arrived, err
	}
	select {
	case arrived = <-w.expect(ev):
		return posted, arrived, nil
	case <-ctx.Done():
		return posted, arrived, fmt.Errorf("no answer to research question %d: %w", i, ctx.Err())
	}
}

// artifactID matches the research tools' artifact IDs in tool results.
var artifactID = regexp.MustCompile(`art_[0-9a-f]{24}`)

// researchModel is the scripted model of the research phase: three
// fetches in one turn, the conversion of every page they downloaded in
// the next, then an answer citing the three pages.
func researchModel(urls []string) func(llmfake.Request) llmfake.Step {
	return func(r llmfake.Request) llmfake.Step {
		turns := 0
		var artifacts []string
		for _, m := range r.Messages {
			switch {
			case m.Role == "assistant" && len(m.ToolCalls) > 0:
				turns++
			case m.Role == "tool":
				for _, id := range artifactID.FindAllString(m.Content, -1) {
					if !slices.Contains(artifacts, id) {
						artifacts = append(artifacts, id)
					}
				}
			}
		}
		var calls []llmfake.ToolCall
		switch {
		case turns == 0:
			for _, u := range urls {
				calls = append(calls, llmfake.Call("fetch_web_page", map[string]string{"url": u}))
			}
		case turns == 1:
			for _, id := range artifacts {
				calls = append(calls, llmfake.Call("html_to_markdown", map[string]string{"artifact_id": id}))
			}
		}
		if len(calls) == 0 {
			return llmfake.Answer("The three pages agree on the benchmark's answer.", urls...)
		}
		return llmfake.ToolCalls(calls...)
	}
}

// delayedPages serves three HTML articles on 127.0.0.1, each after its
// own fixed delay.
type delayedPages struct {
	srv  *http.Server
	urls []string
	mu   sync.Mutex
	hits int
}

// startDelayedPages serves one article per delay.
func startDelayedPages(delays []time.Duration) (*delayedPages, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &delayedPages{}
	mux := http.NewServeMux()
	for i, d := range delays {
		path := fmt.Sprintf("/article-%d.html", i+1)
		body := researchArticle(i+1, d)
		p.urls = append(p.urls, "http://"+ln.Addr().String()+path)
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			p.mu.Lock()
			p.hits++
			p.mu.Unlock()
			t := time.NewTimer(d)
			defer t.Stop()
			select {
			case <-t.C:
			case <-r.Context().Done():
				return
			}
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			_, _ = io.WriteString(w, body)
		})
	}
	p.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

// served is the number of page requests so far.
func (p *delayedPages) served() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hits
}

// Close stops the server.
func (p *delayedPages) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = p.srv.Shutdown(ctx)
}

// researchArticle is a real-looking article of about 20 KB: a title,
// headings, paragraphs with links and emphasis, a list and a table.
func researchArticle(n int, delay time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Benchmark article %d</title></head><body>", n)
	fmt.Fprintf(&b, "<nav><a href=\"/\">Home</a> | <a href=\"/about\">About</a></nav><article><h1>Benchmark article %d</h1>", n)
	fmt.Fprintf(&b, "<p class=\"lead\">This page takes %d ms to arrive, as a distant server would.</p>", delay.Milliseconds())
	for s := 1; s <= 12; s++ {
		fmt.Fprintf(&b, "<h2>Section %d.%d</h2>", n, s)
		for p := 1; p <= 3; p++ {
			fmt.Fprintf(&b, "<p>Paragraph %d of section %d explains a <em>detail</em> of the topic with <strong>care</strong>: "+
				"homeservers keep rooms as graphs of events, clients read them through <code>/sync</code>, and bots answer "+
				"when mentioned. See <a href=\"https://example.org/ref/%d/%d\">reference %d.%d</a> for the long version. "+
				"The quick brown fox jumps over the lazy dog, again and again, to fill the page with ordinary prose.</p>", p, s, s, p, s, p)
		}
		b.WriteString("<ul><li>first point</li><li>second point, with <a href=\"https://example.org/more\">more</a></li><li>third point</li></ul>")
	}
	b.WriteString("<table><thead><tr><th>key</th><th>value</th></tr></thead><tbody>")
	for r := 1; r <= 10; r++ {
		fmt.Fprintf(&b, "<tr><td>row %d</td><td>%d</td></tr>", r, r*n)
	}
	b.WriteString("</tbody></table></article><footer>© the benchmark</footer></body></html>")
	return b.String()
}

// childrenCPU is the user + sys CPU time of this process's children that
// have ended and been waited for (the converter's pandoc runs).
func childrenCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// ms is d in milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// researchTargets judges the research phase: the default answers within
// 1.2 × (slowest page + model time); one call at a time shows the
// sequential sum.
func researchTargets(r *researchReport) []targetResult {
	return []targetResult{
		{"research answer (#27)", "≤ 1.2 × (slowest page + model time)",
			fmt.Sprintf("%.2f× (%.0f ms; floor %.0f ms, max_parallel_tool_calls %d)", r.Parallel.FloorRatio, r.Parallel.AnswerP50Ms, r.FloorMs, r.Parallel.MaxParallelToolCalls),
			r.Parallel.FloorRatio <= 1.2, kindGoal},
		{"research, one call at a time", "≥ every page in turn + model time",
			fmt.Sprintf("%.2f× of %.0f ms (%.0f ms; %.2f× the parallel floor)", r.Sequential.SumRatio, r.SumFloorMs, r.Sequential.AnswerP50Ms, r.Sequential.FloorRatio),
			r.Sequential.SumRatio >= 1, kindGoal},
	}
}

// printResearch prints the research block; nil prints nothing.
func printResearch(w io.Writer, r *researchReport) {
	if r == nil {
		return
	}
	fmt.Fprintf(w, "research (pages %v ms, model %.0f ms × %d requests = %.0f ms, converter %s)\n", r.PageDelaysMs, r.ModelMsPerRequest, r.ModelRequests, r.ModelMs, r.Converter)
	fmt.Fprintf(w, "  %-42s %.0f ms (slowest page + model); %.0f ms (every page in turn + model)\n", "floor", r.FloorMs, r.SumFloorMs)
	for _, run := range []researchRun{r.Parallel, r.Sequential} {
		fmt.Fprintf(w, "  %-42s p50 %.0f ms (max %.0f) = %.2f× floor, %.2f× sequential floor; CPU per invocation %.1f ms Lisa + %.1f ms converter; %.1f page and %.1f model requests (n=%d)\n",
			fmt.Sprintf("max_parallel_tool_calls = %d", run.MaxParallelToolCalls), run.AnswerP50Ms, run.AnswerMaxMs, run.FloorRatio, run.SumRatio,
			run.LisaCPUMs, run.ConverterCPUMs, run.PageRequests, run.ModelRequests, run.Invocations)
		for _, sg := range run.Segments {
			fmt.Fprintf(w, "    %-72s p50 %6.0f ms\n", sg.Name, sg.P50Ms)
		}
	}
}
