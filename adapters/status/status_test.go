package status

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
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
	for i := 0; i+1 < len(hdr); i += 2 {
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
