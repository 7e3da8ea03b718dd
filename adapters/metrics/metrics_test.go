package metrics

import (
	"io"
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
	})
	m.SyncDone(true)
	m.SyncDone(false)
	m.Outcome("answered")
	m.Phase("llm", 1500*time.Millisecond)
	m.LLMRequest("ok")
	m.LLMRetry("llm_unavailable")
	m.ToolCall("web_search", "ok", 100)
	m.Lookup("reply", "lookup_dropped")
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
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("scrape lacks %q", want)
		}
	}
}
