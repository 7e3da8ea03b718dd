package llm

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"
)

// hostileMarkers are replies made of tool-call markers that never close,
// the shapes that made the old parser quadratic (#39 item 1).
var hostileMarkers = map[string]string{
	"unclosed tool_call":      "<tool_call>",
	"unclosed TOOL_REQUEST":   "[TOOL_REQUEST]",
	"both kinds":              "[TOOL_REQUEST]<tool_call>",
	"a call then prose":       `<tool_call>{"name":"web_search","arguments":{}} and more `,
	"fenced, never closed":    "<tool_call>```json\n{\"name\":",
	"closing markers between": "<tool_call>x</tool_call>[TOOL_REQUEST]",
}

// repeatTo repeats unit to at least n bytes.
func repeatTo(unit string, n int) string {
	return strings.Repeat(unit, n/len(unit)+1)
}

// parseCost parses s and returns the least time of five runs and the
// bytes allocated by one.
func parseCost(t *testing.T, s string) (time.Duration, uint64) {
	t.Helper()
	best := time.Duration(1<<63 - 1)
	var alloc uint64
	for i := range 5 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		start := time.Now()
		calls, _, err := parseTextToolCalls(context.Background(), s)
		took := time.Since(start)
		runtime.ReadMemStats(&after)
		if err != nil {
			t.Fatal(err)
		}
		if len(calls) > 0 && !strings.Contains(s, "</tool_call>") {
			t.Fatalf("%d calls read from unclosed markers", len(calls))
		}
		best = min(best, took)
		if i == 0 {
			alloc = after.TotalAlloc - before.TotalAlloc
		}
	}
	return best, alloc
}

// TestTextToolCallsLinear (#39 item 1): 4 MiB of markers that never close
// cost about four times what 1 MiB does, in time and in allocation (the
// old parser re-scanned and copied the rest of the reply at every marker:
// 1 MiB took 95 s of one core, 16 times 256 KiB's).
func TestTextToolCallsLinear(t *testing.T) {
	for name, unit := range hostileMarkers {
		t.Run(name, func(t *testing.T) {
			small, smallAlloc := parseCost(t, repeatTo(unit, 1<<20))
			large, largeAlloc := parseCost(t, repeatTo(unit, 4<<20))
			timeRatio := float64(large) / float64(max(small, time.Microsecond))
			allocRatio := float64(largeAlloc) / float64(max(smallAlloc, 1))
			t.Logf("1 MiB: %s, %d B allocated; 4 MiB: %s, %d B; ratios %.1f (time), %.1f (allocation)",
				small, smallAlloc, large, largeAlloc, timeRatio, allocRatio)
			// Linear is 4; quadratic is 16 (the time bound leaves room for a busy machine).
			if timeRatio > 10 {
				t.Errorf("time grows %.1f× for 4× the text: not linear", timeRatio)
			}
			if allocRatio > 8 && largeAlloc > 1<<20 {
				t.Errorf("allocation grows %.1f× for 4× the text: not linear", allocRatio)
			}
		})
	}
}

// TestTextToolCallsStopAtTheDeadline: a context that is done stops the
// parse with its error.
func TestTextToolCallsStopAtTheDeadline(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	calls, rest, err := parseTextToolCalls(ctx, repeatTo("<tool_call>", 1<<20))
	if !errors.Is(err, context.Canceled) || calls != nil || len(rest) < 1<<20 {
		t.Fatalf("parse under a done context: %d calls, %d bytes, %v; want context.Canceled", len(calls), len(rest), err)
	}
}

// TestTextToolCallsStillRead: the linear parser reads what the old one
// read.
func TestTextToolCallsStillRead(t *testing.T) {
	for _, c := range []struct {
		in    string
		names []string
		rest  string
	}{
		{`Let me look.` + "\n" + `<tool_call>{"name":"web_search","arguments":{"query":"x"}}</tool_call>`, []string{"web_search"}, "Let me look."},
		{"<tool_call>\n```json\n{\"name\":\"a\",\"arguments\":{}}\n```\n</tool_call><tool_call>{\"name\":\"b\",\"parameters\":{}}</tool_call>", []string{"a", "b"}, ""},
		{`<tool_call>not json</tool_call> [TOOL_REQUEST]{"name":"c","arguments":{}}[END_TOOL_REQUEST]`, []string{"c"}, "<tool_call>not json</tool_call>"},
		{`<tool_call>{"name":"d","arguments":{}}`, []string{"d"}, ""},
		{`<tool_call>{"name":"e"} trailing</tool_call>`, nil, ""},
		{`<tool_call>{"arguments":{}}</tool_call>`, nil, ""},
	} {
		calls, rest, err := parseTextToolCalls(context.Background(), c.in)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, call := range calls {
			names = append(names, call.Name)
		}
		if strings.Join(names, ",") != strings.Join(c.names, ",") {
			t.Errorf("%q: calls %v, want %v", c.in, names, c.names)
		}
		if len(c.names) > 0 && rest != c.rest {
			t.Errorf("%q: rest %q, want %q", c.in, rest, c.rest)
		}
		if len(c.names) == 0 && rest != c.in {
			t.Errorf("%q: no call, but the text changed to %q", c.in, rest)
		}
	}
}
