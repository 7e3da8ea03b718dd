package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lisabot/lisa/config"
)

// TestConnectWaitsForTheHomeserver: 503 and 429 at startup are waited out
// (honouring retry_after_ms); a token for another device is refused at once.
func TestConnectWaitsForTheHomeserver(t *testing.T) {
	var calls atomic.Int32
	device := "LISA"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/account/whoami") {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		switch calls.Add(1) {
		case 1:
			w.WriteHeader(503)
			fmt.Fprint(w, `{"errcode":"M_UNKNOWN"}`)
		case 2:
			w.WriteHeader(429)
			fmt.Fprint(w, `{"errcode":"M_LIMIT_EXCEEDED","retry_after_ms":4000}`)
		default:
			fmt.Fprintf(w, `{"user_id":"@lisa:hs","device_id":%q}`, device)
		}
	}))
	defer srv.Close()
	var waits []time.Duration
	after := func(d time.Duration) <-chan time.Time {
		waits = append(waits, d)
		ch := make(chan time.Time, 1)
		ch <- time.Time{}
		return ch
	}
	m := config.MatrixConfig{HomeserverURL: srv.URL, UserID: "@lisa:hs", DeviceID: "LISA"}
	log := slog.New(slog.DiscardHandler)
	if _, waited, err := connect(context.Background(), m, "secret-token", nil, log, after); err != nil || !waited {
		t.Fatalf("connect: %v, waited %v", err, waited)
	}
	if calls.Load() != 3 || len(waits) != 2 || waits[0] != time.Second || waits[1] != 4*time.Second {
		t.Fatalf("calls %d, waits %v", calls.Load(), waits)
	}

	// A mismatch is final: no retry.
	calls.Store(2)
	device = "OTHER"
	waits = nil
	if _, waited, err := connect(context.Background(), m, "secret-token", nil, log, after); err == nil || len(waits) != 0 || waited {
		t.Fatalf("mismatch accepted or retried: %v, waits %v", err, waits)
	}
}
