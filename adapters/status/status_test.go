package status

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const evil = `<script>document.title="pwned"</script><img src=x onerror=alert(1)>`

func samplePage(context.Context) (Page, error) {
	return Page{
		GeneratedAt: time.Date(2026, 12, 6, 1, 0, 0, 0, time.UTC),
		Health:      Health{Status: "healthy", RoomsRunning: 1},
		Version:     "lisa v0.3.1 revision 0123456789ab, committed 2026-12-06T00:00:00Z, built with go1.26.0",
		Rooms:       []Room{{ID: "!r:hs", Name: evil, Running: true, State: "idle", Answered: 2}},
		Actors:      []Actor{{ID: "app/sync", Posted: 3, Received: 3}},
		Trail:       []Event{{Room: "!r:hs", EventID: "$e", Sender: "@u:hs", Kind: "text", Outcome: "answered", ReplyEventID: "$r", AnswerMs: 1500}},
		Latency:     Histogram([]int64{400, 1500, 1600, 90_000}),
	}, nil
}

func get(t *testing.T, h http.Handler, method, path string, hdr ...string) *http.Response {
	t.Helper()
	req := httptest.NewRequest(method, path, nil)
	req.Host = "127.0.0.1:8088"
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			req.Host = hdr[i+1]
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Result()
}

// TestPageEscapesAndLocksDown: homeserver text is escaped, every answer
// has the strict policy, and the page loads nothing from elsewhere.
func TestPageEscapesAndLocksDown(t *testing.T) {
	h := Handler(samplePage, Options{})
	resp := get(t, h, "GET", "/")
	body, _ := io.ReadAll(resp.Body)
	page := string(body)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Security-Policy") != CSP || !strings.Contains(CSP, "script-src 'none'") {
		t.Fatalf("status %d, CSP %q", resp.StatusCode, resp.Header.Get("Content-Security-Policy"))
	}
	if strings.Contains(page, "<script") || strings.Contains(page, "<img") || !strings.Contains(page, "&lt;script&gt;") {
		t.Errorf("the room name is not escaped:\n%s", page)
	}
	for _, s := range []string{"http://", "https://", "//cdn", "<script"} {
		if strings.Contains(page, s) {
			t.Errorf("page contains %q (external asset or script)", s)
		}
	}
	for _, s := range []string{`http-equiv="refresh" content="5"`, `data-outcome="answered"`, `data-health="healthy"`, "!r:hs", "app/sync", "1.5s", `<meter min="0" max="2" value="2">`,
		`<p id="version" class="version">lisa v0.3.1 revision 0123456789ab, committed 2026-12-06T00:00:00Z, built with go1.26.0</p>`} {
		if !strings.Contains(page, s) {
			t.Errorf("page lacks %q", s)
		}
	}
	css := get(t, h, "GET", "/status.css")
	if css.Header.Get("Content-Type") != "text/css; charset=utf-8" || css.Header.Get("Content-Security-Policy") != CSP {
		t.Errorf("css headers %v", css.Header)
	}
}

// TestJSONHasTheSameData: /status.json is the page's data.
func TestJSONHasTheSameData(t *testing.T) {
	resp := get(t, Handler(samplePage, Options{}), "GET", "/status.json")
	var pg Page
	if err := json.NewDecoder(resp.Body).Decode(&pg); err != nil {
		t.Fatal(err)
	}
	want, _ := samplePage(context.Background())
	if pg.Rooms[0].Name != evil || pg.Trail[0].ReplyEventID != "$r" || pg.Health.Status != "healthy" || pg.Version != want.Version || len(pg.Latency) != len(want.Latency) || pg.RefreshSeconds != 5 {
		t.Errorf("status.json = %+v", pg)
	}
}

func TestHistogram(t *testing.T) {
	b := Histogram([]int64{0, 1000, 1001, 2000, 59_999, 60_000, 60_001})
	got := []int{}
	for _, x := range b {
		got = append(got, x.Count)
	}
	want := []int{2, 2, 0, 0, 0, 2, 1}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("counts %v, want %v", got, want)
		}
	}
	if b[6].Label != "> 1m0s" || b[0].Label != "≤ 1s" {
		t.Errorf("labels %q %q", b[0].Label, b[6].Label)
	}
}

// TestToken: with a token, a request without it (or with another) gets
// 401 and a Basic challenge; Bearer and Basic both work.
func TestToken(t *testing.T) {
	h := Handler(samplePage, Options{Token: "s3cret-token"})
	for _, c := range []struct {
		name string
		hdr  []string
		code int
	}{
		{"none", nil, 401},
		{"wrong bearer", []string{"Authorization", "Bearer nope"}, 401},
		{"bearer", []string{"Authorization", "Bearer s3cret-token"}, 200},
		{"basic", []string{"Authorization", "Basic " + "dTpzM2NyZXQtdG9rZW4="}, 200}, // u:s3cret-token
	} {
		resp := get(t, h, "GET", "/status.json", c.hdr...)
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != c.code {
			t.Errorf("%s: %d, want %d", c.name, resp.StatusCode, c.code)
		}
		if c.code == 401 && (!strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Basic") || strings.Contains(string(body), "s3cret")) {
			t.Errorf("%s: challenge %q, body %q", c.name, resp.Header.Get("WWW-Authenticate"), body)
		}
	}
}

func TestMethodsAndPaths(t *testing.T) {
	h := Handler(samplePage, Options{})
	if r := get(t, h, "POST", "/"); r.StatusCode != 405 {
		t.Errorf("POST: %d", r.StatusCode)
	}
	if r := get(t, h, "GET", "/etc/passwd"); r.StatusCode != 404 {
		t.Errorf("unknown path: %d", r.StatusCode)
	}
	failing := Handler(func(context.Context) (Page, error) { return Page{}, errors.New("rooms did not answer") }, Options{})
	if r := get(t, failing, "GET", "/"); r.StatusCode != 503 {
		t.Errorf("failing provider: %d", r.StatusCode)
	}
}

func TestServeRefusesRemoteWithoutToken(t *testing.T) {
	if _, err := Serve("0.0.0.0:0", samplePage, Options{}); err == nil || !strings.Contains(err.Error(), "runtime.status_allow_remote") {
		t.Fatalf("Serve on 0.0.0.0 without a token: %v", err)
	}
	s, err := Serve("127.0.0.1:0", samplePage, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	resp, err := http.Get("http://" + s.Addr() + "/status.json")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("loopback: %d", resp.StatusCode)
	}
}

// TestHostWithoutToken (#39 item 2): without a token only a loopback
// literal, localhost or the listening host is accepted as Host; a name a
// web site could rebind to 127.0.0.1 gets 421 and no data. With a token
// the token decides.
func TestHostWithoutToken(t *testing.T) {
	h := Handler(samplePage, Options{ListenHost: "127.0.0.1"})
	for _, c := range []struct {
		host string
		code int
	}{
		{"127.0.0.1:8088", 200}, {"127.0.0.1", 200}, {"[::1]:8088", 200}, {"localhost:8088", 200}, {"localhost", 200},
		{"rebind.attacker.example", 421}, {"rebind.attacker.example:8088", 421}, {"localhost.attacker.example", 421}, {"", 421},
	} {
		resp := get(t, h, "GET", "/status.json", "Host", c.host)
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != c.code {
			t.Errorf("Host %q: %d, want %d", c.host, resp.StatusCode, c.code)
		}
		if c.code == 421 && strings.Contains(string(body), "!r:hs") {
			t.Errorf("Host %q: the data was served: %s", c.host, body)
		}
	}
	withToken := Handler(samplePage, Options{Token: "s3cret-token", ListenHost: "0.0.0.0"})
	if r := get(t, withToken, "GET", "/status.json", "Host", "lisa.example:8088", "Authorization", "Bearer s3cret-token"); r.StatusCode != 200 {
		t.Errorf("token, named host: %d", r.StatusCode)
	}
	if r := get(t, withToken, "GET", "/status.json", "Host", "rebind.attacker.example"); r.StatusCode != 401 {
		t.Errorf("token, no credentials: %d", r.StatusCode)
	}
}

// fakeClock is a clock the test moves.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// TestWrongTokensAreThrottledAndCounted (#39 item 7): AuthBurst wrong
// tokens get 401, the next one 429 with Retry-After before it is
// compared (even the right token waits), each counted by reason; one
// AuthEvery later one more try is allowed; requests without credentials
// only get the challenge and cost nothing.
func TestWrongTokensAreThrottledAndCounted(t *testing.T) {
	clk := &fakeClock{now: time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)}
	counts := map[string]int{}
	var mu sync.Mutex
	h := Handler(samplePage, Options{Token: "s3cret-token", AuthBurst: 3, AuthEvery: 2 * time.Second, Now: clk.Now,
		OnAuthFailure: func(r string) { mu.Lock(); counts[r]++; mu.Unlock() }})
	wrong := []string{"Authorization", "Bearer guess"}
	right := []string{"Authorization", "Bearer s3cret-token"}
	for i := range 5 {
		if r := get(t, h, "GET", "/status.json"); r.StatusCode != 401 {
			t.Fatalf("no credentials %d: %d", i, r.StatusCode)
		}
	}
	for i := range 3 {
		if r := get(t, h, "GET", "/status.json", wrong...); r.StatusCode != 401 {
			t.Fatalf("wrong token %d: %d, want 401", i, r.StatusCode)
		}
	}
	r := get(t, h, "GET", "/status.json", wrong...)
	if r.StatusCode != 429 || r.Header.Get("Retry-After") != "2" {
		t.Errorf("4th wrong token: %d, Retry-After %q; want 429, 2", r.StatusCode, r.Header.Get("Retry-After"))
	}
	if r := get(t, h, "GET", "/status.json", right...); r.StatusCode != 429 {
		t.Errorf("right token while throttled: %d, want 429", r.StatusCode)
	}
	clk.add(2 * time.Second)
	if r := get(t, h, "GET", "/status.json", right...); r.StatusCode != 200 {
		t.Errorf("right token after the refill: %d", r.StatusCode)
	}
	if r := get(t, h, "GET", "/status.json", wrong...); r.StatusCode != 401 {
		t.Errorf("one wrong token after the refill: %d, want 401", r.StatusCode)
	}
	if r := get(t, h, "GET", "/status.json", wrong...); r.StatusCode != 429 {
		t.Errorf("the next: %d, want 429", r.StatusCode)
	}
	mu.Lock()
	defer mu.Unlock()
	if counts["wrong_token"] != 4 || counts["throttled"] != 3 {
		t.Errorf("counted %v, want wrong_token 4, throttled 3", counts)
	}
}

// TestLoadsAreBounded (#39 item 6): a load within CacheFor of the last
// gathers nothing; loads beyond MaxConcurrent get 503 with Retry-After;
// a provider that does not finish within Timeout gives 503 at Timeout.
func TestLoadsAreBounded(t *testing.T) {
	clk := &fakeClock{now: time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)}
	var gathered atomic.Int32
	counting := func(ctx context.Context) (Page, error) { gathered.Add(1); return samplePage(ctx) }
	h := Handler(counting, Options{Now: clk.Now, CacheFor: time.Second})
	for range 3 {
		get(t, h, "GET", "/")
		get(t, h, "GET", "/status.json")
	}
	if n := gathered.Load(); n != 1 {
		t.Errorf("6 loads within the cache window gathered %d times, want 1", n)
	}
	clk.add(time.Second)
	get(t, h, "GET", "/status.json")
	if n := gathered.Load(); n != 2 {
		t.Errorf("a load after the window: gathered %d times, want 2", n)
	}

	release := make(chan struct{})
	entered := make(chan struct{}, 10)
	blocking := func(ctx context.Context) (Page, error) {
		entered <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
		}
		return samplePage(ctx)
	}
	hb := Handler(blocking, Options{MaxConcurrent: 2})
	var wg sync.WaitGroup
	codes := make(chan int, 2)
	for range 2 {
		wg.Add(1)
		go func() { defer wg.Done(); codes <- get(t, hb, "GET", "/status.json").StatusCode }()
	}
	<-entered // one gathers, the other waits for it: both hold a slot
	// Until the other has taken its slot a probe would take it instead
	// (and the other get 503): wait for both slots to be held.
	deadline := time.Now().Add(10 * time.Second)
	for len(hb.(*handler).slots) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("%d of 2 concurrent loads hold a slot", len(hb.(*handler).slots))
		}
		runtime.Gosched()
	}
	for {
		// A probe with an ended context never waits: it either finds no
		// slot (what is looked for) or gives up at once.
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		rec := httptest.NewRecorder()
		req := httptest.NewRequestWithContext(ctx, "GET", "/status.json", nil)
		req.Host = "127.0.0.1"
		hb.ServeHTTP(rec, req)
		r := rec.Result()
		if r.StatusCode == 503 && r.Header.Get("Retry-After") == "1" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a third concurrent load got %d, want 503 with Retry-After", r.StatusCode)
		}
		runtime.Gosched()
	}
	close(release)
	wg.Wait()
	close(codes)
	for c := range codes {
		if c != 200 {
			t.Errorf("a load within the limit: %d", c)
		}
	}

	slow := Handler(func(ctx context.Context) (Page, error) { <-ctx.Done(); return Page{}, ctx.Err() }, Options{Timeout: 50 * time.Millisecond})
	if r := get(t, slow, "GET", "/"); r.StatusCode != 503 {
		t.Errorf("a provider past the timeout: %d, want 503", r.StatusCode)
	}
}
