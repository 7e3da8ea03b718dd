package research

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lisabot/lisa/messages"
)

// gateConvert is a converter whose conversions report their start and
// wait for the test's release or their context's end.
type gateConvert struct {
	started  chan string
	release  chan struct{}
	canceled chan struct{}
	running  atomic.Int32
	most     atomic.Int32
	calls    atomic.Int32
	panics   bool
}

func newGateConvert() *gateConvert {
	return &gateConvert{started: make(chan string, 8), release: make(chan struct{}), canceled: make(chan struct{}, 8)}
}

func (g *gateConvert) Convert(ctx context.Context, html []byte) (string, error) {
	g.calls.Add(1)
	n := g.running.Add(1)
	defer g.running.Add(-1)
	for m := g.most.Load(); n > m && !g.most.CompareAndSwap(m, n); m = g.most.Load() {
	}
	if g.panics {
		panic("converter bug")
	}
	g.started <- string(html)
	select {
	case <-g.release:
		return "# early " + string(html), nil
	case <-ctx.Done():
		g.canceled <- struct{}{}
		return "", ctx.Err()
	}
}

// within reads one value from c, failing the test after 10 s.
func within[T any](t *testing.T, c chan T, what string) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: not within 10 s", what)
	}
	var zero T
	return zero
}

func artifactOf(t *testing.T, r *messages.ToolResult) string {
	t.Helper()
	var meta struct {
		ArtifactID string `json:"artifact_id"`
	}
	if !r.OK || json.Unmarshal([]byte(r.Content), &meta) != nil || meta.ArtifactID == "" {
		t.Fatalf("fetch = %+v", r)
	}
	return meta.ArtifactID
}

// TestEarlyConversion: an HTML page starts converting as soon as it is
// fetched, before html_to_markdown is called; the call takes that
// conversion's result, and the page is converted once. Early
// conversions run at most EarlyConversions at once.
func TestEarlyConversion(t *testing.T) {
	conv := newGateConvert()
	s := newTestSession(t, Deps{Fetch: &fakeFetch{}, Convert: conv, EarlyConversions: 1, MaxToolOutputCharacters: 1000},
		"see https://example.org/one and https://example.org/two")
	one := artifactOf(t, call(t, s, "fetch_web_page", map[string]string{"url": "https://example.org/one"}))
	two := artifactOf(t, call(t, s, "fetch_web_page", map[string]string{"url": "https://example.org/two"}))
	// The first conversion started with no html_to_markdown call at all.
	within(t, conv.started, "an early conversion")
	done := make(chan *messages.ToolResult, 2)
	for _, id := range []string{one, two} {
		go func() {
			raw, _ := json.Marshal(map[string]string{"artifact_id": id})
			done <- s.svc.Call(context.Background(), &messages.ToolCall{Name: ConvertTool, Args: raw, Session: s.id})
		}()
	}
	conv.release <- struct{}{}
	within(t, conv.started, "the second early conversion, once the first ended")
	conv.release <- struct{}{}
	for range 2 {
		if r := within(t, done, "html_to_markdown"); !r.OK || r.Content != "# early <h1>Hi</h1>" {
			t.Fatalf("html_to_markdown = %+v", r)
		}
	}
	if n, most := conv.calls.Load(), conv.most.Load(); n != 2 || most != 1 {
		t.Errorf("%d conversions, at most %d at once; want 2 and 1", n, most)
	}
}

// TestEarlyConversionEndsWithItsSession: closing the session cancels
// the conversion nobody asked for, and frees its token for others.
func TestEarlyConversionEndsWithItsSession(t *testing.T) {
	conv := newGateConvert()
	s := newTestSession(t, Deps{Fetch: &fakeFetch{}, Convert: conv, EarlyConversions: 1, MaxToolOutputCharacters: 1000},
		"see https://example.org/one")
	artifactOf(t, call(t, s, "fetch_web_page", map[string]string{"url": "https://example.org/one"}))
	within(t, conv.started, "an early conversion")
	s.svc.Close(s.id)
	within(t, conv.canceled, "the conversion's cancellation")
	other := openSession(t, s.svc, "see https://example.org/two")
	artifactOf(t, call(t, other, "fetch_web_page", map[string]string{"url": "https://example.org/two"}))
	within(t, conv.started, "the next session's conversion (the token is free again)")
	conv.release <- struct{}{}
}

// TestEarlyConversionPanics: a converter that panics in an early
// conversion gives conversion_failed, and the process lives on.
func TestEarlyConversionPanics(t *testing.T) {
	conv := newGateConvert()
	conv.panics = true
	s := newTestSession(t, Deps{Fetch: &fakeFetch{}, Convert: conv, EarlyConversions: 2, MaxToolOutputCharacters: 1000},
		"see https://example.org/one")
	id := artifactOf(t, call(t, s, "fetch_web_page", map[string]string{"url": "https://example.org/one"}))
	if r := call(t, s, "html_to_markdown", map[string]string{"artifact_id": id}); r.OK || r.Code != string(messages.ToolConversionFailed) {
		t.Fatalf("html_to_markdown = %+v", r)
	}
}

// TestUnknownURLMayPassAfterEarlierCalls: the refusal of a URL not known
// yet says that a call before it in the model's turn may make it known,
// so that the loop tries it once more after them.
func TestUnknownURLMayPassAfterEarlierCalls(t *testing.T) {
	s := newTestSession(t, Deps{Search: fakeSearch{}, Fetch: &fakeFetch{}, Convert: fakeConvert{}, MaxToolOutputCharacters: 1000})
	if r := call(t, s, "fetch_web_page", map[string]string{"url": "https://go.dev/"}); r.OK || r.Code != string(ToolUnknownURL) || !r.AfterEarlier {
		t.Fatalf("unknown URL = %+v", r)
	}
	call(t, s, "web_search", map[string]string{"query": "go"})
	if r := call(t, s, "fetch_web_page", map[string]string{"url": "https://go.dev/"}); !r.OK || r.AfterEarlier {
		t.Fatalf("after the search made it known = %+v", r)
	}
}
