package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lisabot/lisa/adapters/metrics"
)

// logTap keeps Lisa's JSON log lines for the transcript's summaries and
// forwards warnings and errors to the operator.
type logTap struct {
	forward io.Writer

	mu      sync.Mutex
	partial []byte
	lines   []string
}

func (t *logTap) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.partial = append(t.partial, p...)
	for {
		i := bytes.IndexByte(t.partial, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := string(t.partial[:i])
		t.partial = t.partial[i+1:]
		t.lines = append(t.lines, line)
		if strings.Contains(line, `"level":"WARN"`) || strings.Contains(line, `"level":"ERROR"`) {
			fmt.Fprintln(t.forward, line)
		}
	}
}

// all returns every log line so far, oldest first.
func (t *logTap) all() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.lines)
}

// records returns the parsed log records with message msg, oldest first.
func (t *logTap) records(msg string) []map[string]any {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []map[string]any
	for _, l := range t.lines {
		var rec map[string]any
		if json.Unmarshal([]byte(l), &rec) == nil && rec["msg"] == msg {
			out = append(out, rec)
		}
	}
	return out
}

// invocationProbe summarizes each invocation in one line from what Lisa
// itself reports: the duration_ms of her "invocation attempt finished" log
// record, and the change in her LLM-request and tool-call counters
// (lisa_llm_requests_total, lisa_tool_calls_total) while it ran. The
// demo's invocations run one at a time, so the change is that
// invocation's.
type invocationProbe struct {
	logs *logTap

	mu   sync.Mutex
	met  *metrics.Metrics
	sums map[string]string // reply event ID → summary
}

// probeMark is the state before an invocation.
type probeMark struct {
	counters map[string]float64
	finished int
}

func (p *invocationProbe) setMetrics(m *metrics.Metrics) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.met = m
}

func (p *invocationProbe) snapshot() probeMark {
	return probeMark{counters: p.counters(), finished: len(p.logs.records("invocation attempt finished"))}
}

// counters scrapes Lisa's metrics: series name and labels → value, for
// the LLM-request and tool-call counters.
func (p *invocationProbe) counters() map[string]float64 {
	p.mu.Lock()
	m := p.met
	p.mu.Unlock()
	out := map[string]float64{}
	if m == nil {
		return out
	}
	var rec scrapeRecorder
	m.Handler().ServeHTTP(&rec, &http.Request{Method: http.MethodGet, URL: &url.URL{Path: "/metrics"}, Header: http.Header{}})
	for _, line := range strings.Split(rec.body.String(), "\n") {
		if !strings.HasPrefix(line, "lisa_tool_calls_total{") && !strings.HasPrefix(line, "lisa_llm_requests_total{") {
			continue
		}
		series, value, ok := strings.Cut(line, " ")
		if v, err := strconv.ParseFloat(value, 64); ok && err == nil {
			out[series] = v
		}
	}
	return out
}

// record stores the summary of the invocation that produced reply.
func (p *invocationProbe) record(ctx context.Context, reply string, before probeMark) {
	var finished []map[string]any
	for deadline := time.Now().Add(5 * time.Second); ; {
		finished = p.logs.records("invocation attempt finished")
		if len(finished) > before.finished || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	took := "time not logged"
	if len(finished) > before.finished {
		if ms, ok := finished[len(finished)-1]["duration_ms"].(float64); ok {
			took = fmt.Sprintf("answered in %s", (time.Duration(ms) * time.Millisecond).Round(10*time.Millisecond))
		}
	}
	after := p.counters()
	llm, tools := 0.0, []string{}
	// Tools in the order the research loop uses them, then any others.
	rank := func(series string) string {
		for i, t := range []string{"web_search", "fetch_web_page", "html_to_markdown"} {
			if promLabel(series, "tool") == t {
				return strconv.Itoa(i) + series
			}
		}
		return "9" + series
	}
	for _, series := range slices.SortedFunc(maps.Keys(after), func(a, b string) int { return strings.Compare(rank(a), rank(b)) }) {
		d := after[series] - before.counters[series]
		switch {
		case d <= 0:
		case strings.HasPrefix(series, "lisa_llm_requests_total"):
			llm += d
		default:
			tools = append(tools, fmt.Sprintf("%s %s ×%g", promLabel(series, "tool"), promLabel(series, "result"), d))
		}
	}
	if len(tools) == 0 {
		tools = []string{"none"}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sums == nil {
		p.sums = map[string]string{}
	}
	p.sums[reply] = fmt.Sprintf("%s · LLM requests: %g · tool calls: %s", took, llm, strings.Join(tools, ", "))
}

func (p *invocationProbe) summaries() map[string]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.sums)
}

// promLabel returns a label's value from a Prometheus series name.
func promLabel(series, label string) string {
	_, rest, ok := strings.Cut(series, label+`="`)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, `"`)
	return v
}

// scrapeRecorder is the http.ResponseWriter an in-process scrape of
// Lisa's metrics handler writes to.
type scrapeRecorder struct {
	header http.Header
	body   bytes.Buffer
}

func (r *scrapeRecorder) Header() http.Header {
	if r.header == nil {
		r.header = http.Header{}
	}
	return r.header
}
func (r *scrapeRecorder) Write(p []byte) (int, error) { return r.body.Write(p) }
func (r *scrapeRecorder) WriteHeader(int)             {}
