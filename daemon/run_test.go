package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/lisabot/lisa/config"
	"github.com/lisabot/lisa/testkit/need"
)

// startConfig writes a configuration for homeserver into a temporary
// directory and resolves it.
func startConfig(t *testing.T, homeserver string) config.Resolved {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "persona.md"), []byte("You are Lisa.\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	toml := fmt.Sprintf(`[matrix]
homeserver_url = %q
user_id = "@lisa:hs"
device_id = "LISA"
access_token = "env:LISA_TEST_TOKEN"
allowed_room_ids = ["!room:hs"]
mention_aliases = ["Lisa"]

[llm]
base_url = "http://127.0.0.1:9/v1"
model = "m"

[persona]
path = "persona.md"

[runtime]
data_dir = "data"
`, homeserver)
	path := filepath.Join(dir, "lisa.toml")
	if err := os.WriteFile(path, []byte(toml), 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := config.LoadAndResolve(path, func(k string) (string, bool) {
		if k == "LISA_TEST_TOKEN" {
			return "syt_test_token_0123456789", true
		}
		return "", false
	})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// signalOn is a slog handler that closes seen when a record with msg is
// logged, and passes every record on.
type signalOn struct {
	slog.Handler
	msg  string
	seen chan struct{}
}

func (s *signalOn) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == s.msg {
		select {
		case <-s.seen:
		default:
			close(s.seen)
		}
	}
	return s.Handler.Handle(ctx, r)
}

// TestStopWhileStartingIsClean: a stop (SIGTERM ends Run's context) before
// Lisa started is a clean stop: no ERROR, no "cannot start", Run returns
// nil (exit 0). A chaos campaign found her exiting 1 with "cannot start:
// pandoc is needed" when its SIGTERM cut her pandoc check short.
func TestStopWhileStartingIsClean(t *testing.T) {
	errorsIn := func(t *testing.T, logs *logBuffer) []map[string]any {
		var out []map[string]any
		for _, r := range logs.records(t) {
			if r["level"] == "ERROR" {
				out = append(out, r)
			}
		}
		return out
	}
	stoppedAt := func(t *testing.T, logs *logBuffer) string {
		for _, r := range logs.records(t) {
			if r["msg"] == logStoppedStarting {
				s, _ := r["step"].(string)
				return s
			}
		}
		return ""
	}

	t.Run("during the converter check", func(t *testing.T) {
		res := startConfig(t, "http://127.0.0.1:9")
		logs := &logBuffer{}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := Run(ctx, res, slog.New(slog.NewJSONHandler(logs, nil)), RunOptions{}); err != nil {
			t.Errorf("Run = %v, want nil for a stop", err)
		}
		if errs := errorsIn(t, logs); len(errs) > 0 {
			t.Errorf("a stop logged errors: %v", errs)
		}
		if step := stoppedAt(t, logs); step != "converter check" {
			t.Errorf("stopped at %q, want the converter check", step)
		}
	})

	t.Run("while waiting for the homeserver", func(t *testing.T) {
		need.Pandoc(t)
		hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, `{"errcode":"M_UNKNOWN","error":"starting"}`)
		}))
		defer hs.Close()
		res := startConfig(t, hs.URL)
		logs := &logBuffer{}
		waiting := &signalOn{Handler: slog.NewJSONHandler(logs, nil), msg: "homeserver not available yet; retrying the session check", seen: make(chan struct{})}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- Run(ctx, res, slog.New(waiting), RunOptions{}) }()
		select {
		case <-waiting.seen:
		case err := <-done:
			t.Fatalf("Run returned %v before waiting for the homeserver", err)
		case <-time.After(30 * time.Second):
			t.Fatal("Lisa did not wait for the homeserver")
		}
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run = %v, want nil for a stop", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("Run did not return after its stop")
		}
		if errs := errorsIn(t, logs); len(errs) > 0 {
			t.Errorf("a stop logged errors: %v", errs)
		}
		if step := stoppedAt(t, logs); step != "Matrix session check" {
			t.Errorf("stopped at %q, want the Matrix session check", step)
		}
	})
}
