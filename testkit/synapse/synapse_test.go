package synapse_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lisabot/lisa/testkit/synapse"
)

// call performs one client-API request as acct (no token when empty) and
// returns the status and the decoded JSON body. Errors never show the
// token.
func call(t *testing.T, s *synapse.Server, token, method, path string, body any) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, s.URL()+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	out := map[string]any{}
	if len(data) > 0 {
		if err := json.Unmarshal(data, &out); err != nil {
			t.Fatalf("%s %s: HTTP %d, not JSON: %.200s", method, path, resp.StatusCode, data)
		}
	}
	return resp.StatusCode, out
}

// must is call that fails the test unless the status is 200.
func must(t *testing.T, s *synapse.Server, token, method, path string, body any) map[string]any {
	t.Helper()
	status, out := call(t, s, token, method, path, body)
	if status != http.StatusOK {
		t.Fatalf("%s %s: HTTP %d %v", method, path, status, out)
	}
	return out
}

// send puts one m.room.message with txnID and returns the event ID.
func send(t *testing.T, s *synapse.Server, token, roomID, txnID, text string) string {
	t.Helper()
	out := must(t, s, token, http.MethodPut, "/_matrix/client/v3/rooms/"+url.PathEscape(roomID)+
		"/send/m.room.message/"+url.PathEscape(txnID), map[string]string{"msgtype": "m.text", "body": text})
	id, _ := out["event_id"].(string)
	if id == "" {
		t.Fatalf("send %s: no event_id in %v", txnID, out)
	}
	return id
}

// bodies returns the bodies of the room's m.room.message events, newest
// first, as the token's user sees them.
func bodies(t *testing.T, s *synapse.Server, token, roomID string) []string {
	t.Helper()
	out := must(t, s, token, http.MethodGet, "/_matrix/client/v3/rooms/"+url.PathEscape(roomID)+
		"/messages?dir=b&limit=100", nil)
	var got []string
	chunk, _ := out["chunk"].([]any)
	for _, e := range chunk {
		ev, _ := e.(map[string]any)
		if ev["type"] != "m.room.message" {
			continue
		}
		content, _ := ev["content"].(map[string]any)
		b, _ := content["body"].(string)
		got = append(got, b)
	}
	return got
}

// count returns how often text occurs in list.
func count(list []string, text string) int {
	n := 0
	for _, s := range list {
		if s == text {
			n++
		}
	}
	return n
}

// TestLifecycle runs a real Synapse through what tests need: two users,
// a login, a room, a message; a restart on the same database after which
// users, tokens, the message and the send's transaction ID survive; a
// SIGKILL and another restart; and the cleanup that stops it and removes its
// data. It logs the start and restart times.
func TestLifecycle(t *testing.T) {
	t.Parallel()
	var (
		s   *synapse.Server
		pid int
	)
	if !t.Run("serve", func(t *testing.T) {
		began := time.Now()
		s = synapse.Start(t, synapse.Options{})
		t.Logf("synapse %s started in %d ms", synapse.Version, time.Since(began).Milliseconds())
		ctx := t.Context()
		url0 := s.URL()
		if !strings.HasPrefix(url0, "http://127.0.0.1:") {
			t.Fatalf("URL %s is not loopback", url0)
		}
		alice, err := s.RegisterAdmin(ctx, "alice", "alice-password-1", "ALICEDEV")
		if err != nil {
			t.Fatal(err)
		}
		bob, err := s.RegisterUser(ctx, "bob", "bob-password-1", "BOBDEV")
		if err != nil {
			t.Fatal(err)
		}
		if alice.UserID != "@alice:localhost" || alice.DeviceID != "ALICEDEV" || bob.UserID != "@bob:localhost" {
			t.Fatalf("accounts %v, %v", alice, bob)
		}
		if strings.Contains(fmt.Sprintf("%v %+v %#v", alice, alice, alice), alice.AccessToken) {
			t.Fatal("formatting an account shows its access token")
		}
		// alice is an admin: the admin API answers her.
		if status, _ := call(t, s, alice.AccessToken, http.MethodGet, "/_synapse/admin/v2/users/@bob:localhost", nil); status != http.StatusOK {
			t.Fatalf("admin API as alice: HTTP %d", status)
		}
		if status, _ := call(t, s, bob.AccessToken, http.MethodGet, "/_synapse/admin/v2/users/@alice:localhost", nil); status != http.StatusForbidden {
			t.Fatalf("admin API as bob: HTTP %d, want 403", status)
		}
		// A second login of bob on another device.
		bob2, err := s.Login(ctx, "bob", "bob-password-1", "BOBPHONE")
		if err != nil {
			t.Fatal(err)
		}
		if who := must(t, s, bob2.AccessToken, http.MethodGet, "/_matrix/client/v3/account/whoami", nil); who["device_id"] != "BOBPHONE" {
			t.Fatalf("whoami %v", who)
		}

		room := must(t, s, alice.AccessToken, http.MethodPost, "/_matrix/client/v3/createRoom",
			map[string]any{"preset": "public_chat", "name": "lifecycle"})["room_id"].(string)
		must(t, s, bob.AccessToken, http.MethodPost, "/_matrix/client/v3/join/"+url.PathEscape(room), map[string]any{})
		first := send(t, s, alice.AccessToken, room, "txn-1", "before the restart")
		if again := send(t, s, alice.AccessToken, room, "txn-1", "before the restart"); again != first {
			t.Fatalf("same txn ID, same process: event %s, then %s", first, again)
		}
		if got := bodies(t, s, bob.AccessToken, room); count(got, "before the restart") != 1 {
			t.Fatalf("bob sees %q", got)
		}

		oldPID := s.PID()
		began = time.Now()
		if err := s.Restart(ctx); err != nil {
			t.Fatal(err)
		}
		t.Logf("synapse restarted in %d ms", time.Since(began).Milliseconds())
		if s.URL() != url0 {
			t.Errorf("URL after restart %s, want %s", s.URL(), url0)
		}
		if s.PID() == oldPID || s.PID() == 0 {
			t.Errorf("PID after restart %d (was %d)", s.PID(), oldPID)
		}
		// Users, access tokens and the event survive.
		if who := must(t, s, alice.AccessToken, http.MethodGet, "/_matrix/client/v3/account/whoami", nil); who["user_id"] != alice.UserID {
			t.Fatalf("whoami after restart %v", who)
		}
		if _, err := s.Login(ctx, "bob", "bob-password-1", "BOBDEV"); err != nil {
			t.Fatalf("bob logs in after the restart: %v", err)
		}
		ev := must(t, s, bob.AccessToken, http.MethodGet, "/_matrix/client/v3/rooms/"+url.PathEscape(room)+"/event/"+url.PathEscape(first), nil)
		if c, _ := ev["content"].(map[string]any); c["body"] != "before the restart" {
			t.Fatalf("event after restart: %v", ev)
		}
		// Synapse 1.67 keeps send transaction IDs in its database, so a
		// send repeated after a restart gets the original event back. The
		// in-memory HttpTransactionCache of synapse/rest/client/transactions.py
		// (keyed by request path and access token, 30 to 60 min) is gone
		// after the restart; what answers is the event_txn_id table
		// (synapse/storage/schema/main/delta/58/19txn_id.sql: unique on
		// room_id, user_id, token_id, txn_id), written with the event by
		// _persist_transaction_ids_txn in synapse/storage/databases/main/events.py
		// and read by get_event_id_from_transaction_id in
		// synapse/storage/databases/main/events_worker.py, which
		// EventCreationHandler.create_and_send_nonmember_event
		// (synapse/handlers/message.py) consults before creating an event;
		// _cleanup_old_transaction_ids deletes rows older than 24 h. The key
		// includes the access token: another token of the same user gets a
		// new event (device-scoped txn IDs came in v1.81).
		if again := send(t, s, alice.AccessToken, room, "txn-1", "before the restart"); again != first {
			t.Fatalf("same txn ID after a restart: event %s, want the original %s", again, first)
		}
		second := send(t, s, alice.AccessToken, room, "txn-2", "after the restart")
		if second == first {
			t.Fatal("a new txn ID returned the old event")
		}

		// A crash: SIGKILL, then a restart on the same database.
		killed := s.PID()
		if err := s.Kill(); err != nil {
			t.Fatal(err)
		}
		if s.PID() != 0 {
			t.Errorf("PID after Kill = %d", s.PID())
		}
		if err := syscall.Kill(killed, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("kill(%d, 0) after Kill = %v, want ESRCH", killed, err)
		}
		began = time.Now()
		if err := s.Restart(ctx); err != nil {
			t.Fatal(err)
		}
		t.Logf("synapse restarted after SIGKILL in %d ms", time.Since(began).Milliseconds())
		if again := send(t, s, alice.AccessToken, room, "txn-2", "after the restart"); again != second {
			t.Fatalf("same txn ID after SIGKILL and restart: event %s, want %s", again, second)
		}
		got := bodies(t, s, bob.AccessToken, room)
		if count(got, "before the restart") != 1 || count(got, "after the restart") != 1 {
			t.Fatalf("bob sees %q, want each message once", got)
		}
		if tail := s.OutputTail(); strings.Contains(tail, alice.AccessToken) || strings.Contains(tail, bob.AccessToken) {
			t.Error("the output tail shows an access token")
		}
		pid = s.PID()
	}) {
		return
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("kill(%d, 0) after the test ended = %v, want ESRCH", pid, err)
	}
	if _, err := os.Stat(s.DataDir()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("data dir after the test ended: %v, want it removed", err)
	}
	if err := s.Restart(t.Context()); !errors.Is(err, synapse.ErrStopped) {
		t.Errorf("Restart after the test ended = %v, want ErrStopped", err)
	}
}

// TestDefaultRateLimits: with Synapse's own limits kept (rc_message 0.2/s,
// burst 10), a burst of sends gets 429 M_LIMIT_EXCEEDED with
// retry_after_ms; with the launcher's default (raised limits), the same
// burst goes through.
func TestDefaultRateLimits(t *testing.T) {
	t.Parallel()
	for _, keep := range []bool{true, false} {
		t.Run(fmt.Sprintf("default_rate_limits=%v", keep), func(t *testing.T) {
			s := synapse.Start(t, synapse.Options{DefaultRateLimits: keep})
			acct, err := s.RegisterAdmin(t.Context(), "busy", "busy-password-1", "BUSY")
			if err != nil {
				t.Fatal(err)
			}
			room := must(t, s, acct.AccessToken, http.MethodPost, "/_matrix/client/v3/createRoom",
				map[string]any{"preset": "private_chat"})["room_id"].(string)
			limited := 0
			for i := range 20 {
				status, out := call(t, s, acct.AccessToken, http.MethodPut, "/_matrix/client/v3/rooms/"+
					url.PathEscape(room)+fmt.Sprintf("/send/m.room.message/burst-%d", i),
					map[string]string{"msgtype": "m.text", "body": fmt.Sprint("message ", i)})
				switch status {
				case http.StatusOK:
				case http.StatusTooManyRequests:
					retry, _ := out["retry_after_ms"].(float64)
					if out["errcode"] != "M_LIMIT_EXCEEDED" || retry <= 0 {
						t.Fatalf("send %d: 429 with %v, want M_LIMIT_EXCEEDED and retry_after_ms", i, out)
					}
					if limited == 0 {
						t.Logf("send %d: 429 M_LIMIT_EXCEEDED, retry_after_ms %.0f", i, retry)
					}
					limited++
				default:
					t.Fatalf("send %d: HTTP %d %v", i, status, out)
				}
			}
			if keep && limited == 0 {
				t.Error("20 sends at once with Synapse's default limits: none was rate-limited")
			}
			if !keep && limited > 0 {
				t.Errorf("%d of 20 sends rate-limited with raised limits", limited)
			}
		})
	}
}

// TestStartSkipsWithOneLine runs this test binary again without a
// tarball: Start skips with one line naming the missing tarball, and fails
// with it when LISA_REQUIRE_SYNAPSE=1. Synapse itself is not needed.
func TestStartSkipsWithOneLine(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "no-such-synapse.tar.gz")
	for _, require := range []string{"", "1"} {
		cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run", "^TestHelperStart$", "-test.v")
		cmd.Env = append(os.Environ(), "LISA_SYNAPSE_HELPER=1", synapse.TarballEnv+"="+missing,
			synapse.RequireEnv+"="+require)
		out, err := cmd.CombinedOutput()
		text := string(out)
		var lines []string
		for _, l := range strings.Split(text, "\n") {
			if strings.Contains(l, missing) {
				lines = append(lines, l)
			}
		}
		if len(lines) != 1 || !strings.Contains(lines[0], synapse.TarballEnv) || !strings.Contains(lines[0], synapse.RequireEnv) {
			t.Fatalf("%s=%q: want one line naming %s, %s and %s; output:\n%s", synapse.RequireEnv, require, missing, synapse.TarballEnv, synapse.RequireEnv, text)
		}
		if require == "" && (err != nil || !strings.Contains(text, "--- SKIP: TestHelperStart")) {
			t.Fatalf("without %s: %v, want a skip; output:\n%s", synapse.RequireEnv, err, text)
		}
		if require == "1" && (err == nil || !strings.Contains(text, "--- FAIL: TestHelperStart")) {
			t.Fatalf("with %s=1: %v, want a failure; output:\n%s", synapse.RequireEnv, err, text)
		}
		if strings.Contains(text, "synapse ready") {
			t.Fatalf("Synapse started without a tarball; output:\n%s", text)
		}
	}
}

// TestHelperStart is TestStartSkipsWithOneLine's child; it does nothing
// unless run by it.
func TestHelperStart(t *testing.T) {
	if os.Getenv("LISA_SYNAPSE_HELPER") != "1" {
		t.SkipNow()
	}
	synapse.Start(t, synapse.Options{})
	t.Error("Start returned without a tarball")
}

// TestPersistentDataDir: a second Launch on the same data directory keeps
// the signing key and the users, and the directory is not removed.
func TestPersistentDataDir(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "hs")
	s := synapse.Start(t, synapse.Options{DataDir: dir})
	if _, err := s.RegisterUser(t.Context(), "keeper", "keeper-password-1", "KEEP"); err != nil {
		t.Fatal(err)
	}
	key, err := os.ReadFile(filepath.Join(dir, "localhost.signing.key"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	s2 := synapse.Start(t, synapse.Options{DataDir: dir})
	acct, err := s2.Login(t.Context(), "keeper", "keeper-password-1", "KEEP2")
	if err != nil || acct.UserID != "@keeper:localhost" {
		t.Fatalf("login on the relaunched server: %v, %v", acct, err)
	}
	if again, _ := os.ReadFile(filepath.Join(dir, "localhost.signing.key")); !bytes.Equal(again, key) {
		t.Error("the signing key changed")
	}
	_, err = s2.Login(t.Context(), "keeper", "wrong-password", "")
	var apiErr *synapse.APIError
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusForbidden || strings.Contains(err.Error(), "wrong-password") {
		t.Errorf("login with a wrong password: %v, want HTTP 403 without the password", err)
	}
}

// TestRestartMovesWhenThePortIsTaken: Restart keeps the port when it can;
// when another process took it meanwhile, Synapse starts on a free one and
// the URL changes.
func TestRestartMovesWhenThePortIsTaken(t *testing.T) {
	t.Parallel()
	s := synapse.Start(t, synapse.Options{})
	old := s.URL()
	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", strings.TrimPrefix(old, "http://"))
	if err != nil {
		t.Fatalf("take the port back: %v", err)
	}
	defer l.Close()
	if err := s.Restart(t.Context()); err != nil {
		t.Fatal(err)
	}
	if s.URL() == old || !strings.HasPrefix(s.URL(), "http://127.0.0.1:") {
		t.Fatalf("URL after a restart with the port taken: %s (was %s)", s.URL(), old)
	}
	if _, err := s.RegisterUser(t.Context(), "mover", "mover-password-1", ""); err != nil {
		t.Fatal(err)
	}
}
