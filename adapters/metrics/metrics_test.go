package metrics

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestServeScrape(t *testing.T) {
	m := New(Sources{
		Actors:     func() []ActorStat { return []ActorStat{{ID: "app/rooms", Mailbox: 2, Restarts: 1}} },
		LastSync:   func() time.Time { return time.Now().Add(-3 * time.Second) },
		StoreBytes: func() int64 { return 4096 },
		Build:      Build{Version: "v0.3.1", Revision: "0123456789ab", GoVersion: "go1.26.0"},
	})
	m.SyncDone(true)
	m.SyncDone(false)
	m.Outcome("answered")
	m.Phase("llm", 1500*time.Millisecond)
	m.LLMRequest("ok")
	m.LLMRetry("llm_unavailable")
	m.ToolCall("web_search", "ok", 100)
	m.Lookup("reply", "lookup_dropped")
	m.RateLimited(1500 * time.Millisecond)
	m.RateLimited(500 * time.Millisecond)
	m.StatusAuthFailed("wrong_token")
	if _, err := Serve("0.0.0.0:0", m); err == nil {
		t.Fatal("served on a non-loopback address")
	}
	s, err := Serve("127.0.0.1:0", m)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	resp, err := http.Get("http://" + s.Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`lisa_sync_requests_total{result="ok"} 1`, `lisa_sync_requests_total{result="error"} 1`,
		`lisa_invocations_total{outcome="answered"} 1`, `lisa_phase_duration_seconds_count{phase="llm"} 1`,
		`lisa_phase_duration_seconds_bucket{phase="llm",le="2.5"} 1`, `lisa_llm_requests_total{result="ok"} 1`,
		`lisa_llm_retries_total{code="llm_unavailable"} 1`, `lisa_tool_calls_total{result="ok",tool="web_search"} 1`,
		`lisa_tool_output_bytes_total 100`, `lisa_actor_mailbox_length{actor="app/rooms"} 2`,
		`lisa_actor_restarts_total{actor="app/rooms"} 1`, `lisa_store_bytes 4096`, `lisa_sync_lag_seconds 3`,
		`lisa_redaction_lookups_total{kind="reply",result="lookup_dropped"} 1`,
		`lisa_status_auth_failures_total{reason="wrong_token"} 1`,
		`lisa_matrix_rate_limited_total 2`, `lisa_matrix_rate_limit_wait_seconds_total 2`,
		`lisa_build_info{go_version="go1.26.0",revision="0123456789ab",version="v0.3.1"} 1`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("scrape lacks %q", want)
		}
	}
}

// TestLLMRefusal: failures are counted by cause; a refusal of every
// request is kept, with its cause, status and since when (a repeat of the
// same cause keeps the start, another cause starts afresh), until an
// answer clears it; other failures leave it as it is.
func TestLLMRefusal(t *testing.T) {
	m := New(Sources{})
	if _, ok := m.LLMRefusing(); ok {
		t.Fatal("refusing before any request")
	}
	m.LLMFailed("server_error", 500, false)
	if _, ok := m.LLMRefusing(); ok {
		t.Fatal("a server error counts as a refusal of every request")
	}
	m.LLMFailed("unauthorized", 401, true)
	first, ok := m.LLMRefusing()
	if !ok || first.Cause != "unauthorized" || first.Status != 401 || first.Since.IsZero() {
		t.Fatalf("refusal = %+v, %v", first, ok)
	}
	m.LLMFailed("timeout", 0, false)
	m.LLMFailed("unauthorized", 401, true)
	if again, _ := m.LLMRefusing(); again != first {
		t.Errorf("a repeat changed the refusal: %+v, was %+v", again, first)
	}
	m.LLMFailed("model_not_found", 404, true)
	if other, _ := m.LLMRefusing(); other.Cause != "model_not_found" || other.Status != 404 || other.Since.Before(first.Since) {
		t.Errorf("another cause: %+v", other)
	}
	m.LLMAnswered()
	if rf, ok := m.LLMRefusing(); ok {
		t.Errorf("still refusing after an answer: %+v", rf)
	}
	rec := &strings.Builder{}
	srv, err := Serve("127.0.0.1:0", m)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	resp, err := http.Get("http://" + srv.Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(rec, resp.Body)
	resp.Body.Close()
	for _, want := range []string{`lisa_llm_failures_total{cause="unauthorized"} 2`, `lisa_llm_failures_total{cause="server_error"} 1`,
		`lisa_llm_failures_total{cause="timeout"} 1`, `lisa_llm_failures_total{cause="model_not_found"} 1`, "lisa_llm_refusing 0"} {
		if !strings.Contains(rec.String(), want) {
			t.Errorf("scrape lacks %q", want)
		}
	}
}

// TestServeRefusesOtherHosts (#39 item 2): /metrics answers only to a
// loopback literal, localhost or its listening host; a name a web site
// rebinds to 127.0.0.1 gets 421 and no figures.
func TestServeRefusesOtherHosts(t *testing.T) {
	m := New(Sources{})
	m.SyncDone(true)
	s, err := Serve("127.0.0.1:0", m)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, port, _ := net.SplitHostPort(s.Addr())
	for _, c := range []struct {
		host string
		code int
	}{
		{s.Addr(), 200}, {"localhost:" + port, 200}, {"[::1]:" + port, 200},
		{"rebind.attacker.example:" + port, 421}, {"rebind.attacker.example", 421},
	} {
		req, _ := http.NewRequest("GET", "http://"+s.Addr()+"/metrics", nil)
		req.Host = c.host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.code {
			t.Errorf("Host %q: %d, want %d", c.host, resp.StatusCode, c.code)
		}
		if c.code == 421 && strings.Contains(string(body), "lisa_sync_requests_total") {
			t.Errorf("Host %q: the figures were served", c.host)
		}
	}
}
