package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lisabot/lisa/chaos"
	"github.com/lisabot/lisa/testkit/faultproxy"
)

// shell runs `lisa shell --config` in-process with the given piped input.
func (e *e2e) shell(input string, extra ...string) string {
	e.t.Helper()
	var out, errb bytes.Buffer
	args := append([]string{"shell", "--config", filepath.Join(e.dir, "lisa.toml")}, extra...)
	if code := run(context.Background(), args, strings.NewReader(input), &out, &errb, lookupFrom(nil)); code != exitOK {
		e.t.Fatalf("lisa shell exit %d: %s", code, errb.String())
	}
	return out.String()
}

// TestShellShowsActorsAndRestarts drives lisa shell (piped) against a
// running two-room daemon: every actor appears with mailbox figures, and a
// forced crash of one room raises that room's restart count only.
func TestShellShowsActorsAndRestarts(t *testing.T) {
	onEachHomeserver(t, func(t *testing.T, hs string) {
		e := newE2E(t, hs, 2)
		p := e.start(chaos.FailpointEnv + "=" + chaos.FailAdminCrash)
		e.awaitLog(p, "sync baseline recorded")
		ev := e.mention(e.allowed[0], "hello shell")
		e.awaitReply(e.allowed[0], ev)

		type row struct {
			ID       string `json:"id"`
			Mailbox  int    `json:"mailbox"`
			Posted   int64  `json:"posted"`
			Received int64  `json:"received"`
			Restarts int64  `json:"restarts"`
		}
		actors := func() map[string]row {
			out := e.shell("actors\n", "--json")
			var rows []row
			if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &rows); err != nil {
				t.Fatalf("actors output %q: %v", out, err)
			}
			m := map[string]row{}
			for _, r := range rows {
				m[r.ID] = r
			}
			return m
		}
		a, b := "app/rooms/"+string(e.allowed[0]), "app/rooms/"+string(e.allowed[1])
		before := actors()
		for _, id := range []string{"app", "app/rooms", "app/sync", "app/tools", "app/tools/w1", a, b} {
			if _, ok := before[id]; !ok {
				t.Fatalf("actor %s missing from the shell: %v", id, before)
			}
		}
		if before[a].Received == 0 || before["app/sync"].Received == 0 {
			t.Fatalf("mailbox figures are empty: %+v %+v", before[a], before["app/sync"])
		}

		// The human-readable form is aligned columns.
		table := e.shell("actors\nrooms\ninvocations\nhealth\nbogus\nhelp\nquit\nactors\n")
		if !strings.Contains(table, "MAILBOX") || !strings.Contains(table, "ANSWERED") || !strings.Contains(table, "journal <room>") ||
			!strings.Contains(table, "ATTEMPTS") || !strings.Contains(table, `"status": "healthy"`) || !strings.Contains(table, "error: unknown command") ||
			strings.Count(table, "MAILBOX") != 1 {
			t.Fatalf("table output:\n%s", table)
		}
		if j := e.shell("journal " + string(e.allowed[0]) + " 5\n"); !strings.Contains(j, "ReplySent") || strings.Contains(j, "hello shell") {
			t.Fatalf("journal output:\n%s", j)
		}

		if out := e.shell("crash " + string(e.allowed[0]) + "\n"); !strings.Contains(out, "crash sent") {
			t.Fatalf("crash: %s", out)
		}
		deadline := time.Now().Add(20 * time.Second)
		for actors()[a].Restarts == before[a].Restarts {
			if time.Now().After(deadline) {
				t.Fatal("the crashed room's restart count never rose")
			}
			time.Sleep(20 * time.Millisecond)
		}
		after := actors()
		if after[a].Restarts != before[a].Restarts+1 || after[b].Restarts != before[b].Restarts {
			t.Fatalf("restarts: room A %d→%d, room B %d→%d", before[a].Restarts, after[a].Restarts, before[b].Restarts, after[b].Restarts)
		}
		// The crashed room still answers.
		ev2 := e.mention(e.allowed[0], "still there?")
		e.awaitReply(e.allowed[0], ev2)
	})
}

// TestHealthFollowsTheHomeserver: lisa health is 0 while syncing, 1 after
// the homeserver has been unreachable for longer than the threshold, and 0
// again once it is back; 2 when Lisa is not running.
func TestHealthFollowsTheHomeserver(t *testing.T) {
	onEachHomeserver(t, func(t *testing.T, hs string) {
		e := newE2E(t, hs, 1)
		proxy := faultproxy.Start(t, e.hs.URL())
		e.hsURL = proxy.URL()
		cfg := func() string { return filepath.Join(e.dir, "lisa.toml") }
		health := func() (int, string) {
			var out bytes.Buffer
			code := run(context.Background(), []string{"health", "--config", cfg()}, strings.NewReader(""), &out, &bytes.Buffer{}, lookupFrom(nil))
			return code, out.String()
		}
		e.writeConfig()
		if code, out := health(); code != 2 || !strings.Contains(out, "unreachable") {
			t.Fatalf("before start: %d %s", code, out)
		}
		p := e.start()
		e.awaitLog(p, "sync baseline recorded")
		await := func(want int, within time.Duration) {
			t.Helper()
			deadline := time.Now().Add(within)
			for {
				code, out := health()
				if code == want {
					t.Logf("health %d: %s", code, strings.TrimSpace(out))
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("health stayed %d (%s), want %d", code, out, want)
				}
				time.Sleep(250 * time.Millisecond)
			}
		}
		await(0, 10*time.Second)
		proxy.SetDown(true)
		start := time.Now()
		await(1, 60*time.Second) // threshold: 2 × sync_timeout (2 s) + 10 s
		if took := time.Since(start); took < 10*time.Second {
			t.Fatalf("degraded after %v, before the threshold", took)
		}
		proxy.SetDown(false)
		await(0, 90*time.Second)
	})
}

// TestMetricsAfterAnInvocation scrapes /metrics on the loopback listener
// after an end-to-end invocation.
func TestMetricsAfterAnInvocation(t *testing.T) {
	onEachHomeserver(t, func(t *testing.T, hs string) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		e := newE2E(t, hs, 1)
		p := e.start("LISA_RUNTIME__METRICS_LISTEN=" + addr)
		e.awaitLog(p, "sync baseline recorded")
		ev := e.mention(e.allowed[0], "count me")
		e.awaitReply(e.allowed[0], ev)
		var body string
		deadline := time.Now().Add(20 * time.Second)
		for {
			resp, err := http.Get("http://" + addr + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			body = string(b)
			if strings.Contains(body, `lisa_invocations_total{outcome="answered"} 1`) || time.Now().After(deadline) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		for _, want := range []string{
			`lisa_invocations_total{outcome="answered"} 1`,
			`lisa_sync_requests_total{result="ok"}`,
			`lisa_phase_duration_seconds_count{phase="llm"} 1`,
			`lisa_phase_duration_seconds_count{phase="context"} 1`,
			`lisa_phase_duration_seconds_count{phase="queue"} 1`,
			`lisa_phase_duration_seconds_count{phase="send"} 1`,
			`lisa_llm_requests_total{result="ok"} 1`,
			`lisa_actor_mailbox_length{actor="app/sync"}`,
			`lisa_actor_restarts_total{actor="app/rooms"} 0`,
			`lisa_store_bytes`,
			`lisa_sync_lag_seconds`,
		} {
			if !strings.Contains(body, want) {
				t.Errorf("metrics lack %q", want)
			}
		}
		if strings.Contains(body, string(e.allowed[0])) {
			t.Error("metrics name a room in clear")
		}
	})
}
