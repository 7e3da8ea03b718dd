package homeserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lisabot/lisa/testkit/homeserver"
	"github.com/lisabot/lisa/testkit/need"
)

// put sends one m.room.message with txnID as acct and returns its event ID.
func put(t *testing.T, hs homeserver.Server, acct homeserver.Account, roomID, txnID, text string) string {
	t.Helper()
	out := do(t, hs, acct, http.MethodPut, "/_matrix/client/v3/rooms/"+url.PathEscape(roomID)+
		"/send/m.room.message/"+url.PathEscape(txnID), map[string]string{"msgtype": "m.text", "body": text})
	id, _ := out["event_id"].(string)
	if id == "" {
		t.Fatalf("send %s: %v", txnID, out)
	}
	return id
}

// do performs one client-API request as acct and fails the test unless it
// answers 200. Errors never show the token.
func do(t *testing.T, hs homeserver.Server, acct homeserver.Account, method, path string, body any) map[string]any {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, hs.URL()+path, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+acct.AccessToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	out := map[string]any{}
	if err := json.Unmarshal(data, &out); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%s %s: HTTP %d %.300s", method, path, resp.StatusCode, data)
	}
	return out
}

// TestEach runs the same body on every homeserver in the list: two users,
// a room, a message, a restart (same URL, same users), a send repeated
// with its transaction ID after the restart (one event where the server
// keeps txn IDs, two where it does not), a SIGKILL and another restart.
func TestEach(t *testing.T) {
	t.Parallel()
	var ran []string
	homeserver.Each(t, func(t *testing.T, hs homeserver.Server) {
		ran = append(ran, hs.Name())
		ctx := t.Context()
		alice, err := hs.RegisterAdmin(ctx, "alice", "alice-password-1", "ALICE")
		if err != nil {
			t.Fatal(err)
		}
		bob, err := hs.RegisterUser(ctx, "bob", "bob-password-1", "BOB")
		if err != nil {
			t.Fatal(err)
		}
		if alice.UserID != "@alice:"+hs.ServerName() || strings.Contains(fmt.Sprint(alice), alice.AccessToken) {
			t.Fatalf("account %v", alice)
		}
		room := do(t, hs, alice, http.MethodPost, "/_matrix/client/v3/createRoom", map[string]any{"preset": "public_chat"})["room_id"].(string)
		do(t, hs, bob, http.MethodPost, "/_matrix/client/v3/join/"+url.PathEscape(room), map[string]any{})
		first := put(t, hs, alice, room, "txn-1", "hello")
		u := hs.URL()
		began := time.Now()
		if err := hs.Restart(ctx); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s %s restarted in %d ms", hs.Name(), hs.Version(), time.Since(began).Milliseconds())
		if hs.URL() != u {
			t.Errorf("URL after restart %s, want %s", hs.URL(), u)
		}
		if _, err := hs.Login(ctx, "bob", "bob-password-1", "BOB2"); err != nil {
			t.Fatal(err)
		}
		again := put(t, hs, alice, room, "txn-1", "hello")
		if hs.TxnIDsSurviveRestart() != (again == first) {
			t.Errorf("%s: TxnIDsSurviveRestart() = %v, but the same txn ID after a restart gave %s (first %s)",
				hs.Name(), hs.TxnIDsSurviveRestart(), again, first)
		}
		if err := hs.Kill(); err != nil {
			t.Fatal(err)
		}
		if hs.PID() != 0 {
			t.Errorf("PID after Kill = %d", hs.PID())
		}
		if err := hs.Restart(ctx); err != nil {
			t.Fatal(err)
		}
		ev := do(t, hs, bob, http.MethodGet, "/_matrix/client/v3/rooms/"+url.PathEscape(room)+"/event/"+url.PathEscape(first), nil)
		if c, _ := ev["content"].(map[string]any); c["body"] != "hello" {
			t.Fatalf("event after a crash: %v", ev)
		}
		if tail := hs.OutputTail(); strings.Contains(tail, alice.AccessToken) {
			t.Error("the log tail shows an access token")
		}
	})
	if !slices.Contains(ran, homeserver.Dendrite) {
		t.Errorf("Each ran %v, without dendrite", ran)
	}
	if need.HaveSynapse() != slices.Contains(ran, homeserver.Synapse) {
		t.Errorf("Each ran %v; Synapse can run here: %v", ran, need.HaveSynapse())
	}
}

// recorder is a testing.TB that records Fatalf and Logf instead of ending
// the test.
type recorder struct {
	testing.TB
	fatal, logged string
}

func (r *recorder) Helper()                      {}
func (r *recorder) Fatalf(f string, args ...any) { r.fatal = fmt.Sprintf(f, args...) }
func (r *recorder) Logf(f string, args ...any)   { r.logged = fmt.Sprintf(f, args...) }

// TestList: LISA_HOMESERVERS picks the servers; an unknown one fails;
// synapse requested where it cannot run fails in one line; unset, the
// list is Dendrite plus Synapse where it can run.
func TestList(t *testing.T) {
	for v, want := range map[string][]string{"dendrite": {"dendrite"}, "Dendrite, dendrite": {"dendrite"}} {
		t.Setenv(homeserver.Env, v)
		r := &recorder{TB: t}
		if got := homeserver.List(r); !slices.Equal(got, want) || r.fatal != "" {
			t.Errorf("%s=%q: %v (%s), want %v", homeserver.Env, v, got, r.fatal, want)
		}
	}
	t.Setenv(homeserver.Env, "dendrite,conduit")
	r := &recorder{TB: t}
	homeserver.List(r)
	if !strings.Contains(r.fatal, `"conduit"`) {
		t.Errorf("unknown server: %q", r.fatal)
	}
	t.Setenv(homeserver.Env, "synapse")
	r = &recorder{TB: t}
	got := homeserver.List(r)
	if need.HaveSynapse() {
		if !slices.Equal(got, []string{"synapse"}) || r.fatal != "" {
			t.Errorf("synapse requested: %v %q", got, r.fatal)
		}
	} else if strings.Contains(r.fatal, "\n") || !strings.Contains(r.fatal, "cannot run here") {
		t.Errorf("synapse requested where it cannot run: %q", r.fatal)
	}
	t.Setenv(homeserver.Env, "")
	r = &recorder{TB: t}
	got = homeserver.List(r)
	want := []string{"dendrite"}
	if need.HaveSynapse() || need.SynapseRequired() {
		want = append(want, "synapse")
	} else if !strings.Contains(r.logged, "dendrite only") {
		t.Errorf("synapse left out without a line: %q", r.logged)
	}
	if !slices.Equal(got, want) {
		t.Errorf("default list %v, want %v", got, want)
	}
}
