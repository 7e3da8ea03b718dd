package fakehs_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/lisabot/lisa/testkit/fakehs"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func startWith(t *testing.T, o fakehs.Options) (*fakehs.Server, *mautrix.Client) {
	t.Helper()
	o.UserID, o.Token = bot, "tok"
	if o.DeviceID == "-" {
		o.DeviceID = ""
	} else if o.DeviceID == "" {
		o.DeviceID = "DEV"
	}
	s := fakehs.New(o)
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	s.CreateRoom(room, map[string]string{human: "Ann"})
	cli, err := mautrix.NewClient(s.URL(), bot, "tok")
	if err != nil {
		t.Fatal(err)
	}
	return s, cli
}

func send(cli *mautrix.Client, txn string) (string, error) {
	r, err := cli.SendMessageEvent(context.Background(), room, event.EventMessage,
		map[string]any{"msgtype": "m.text", "body": "hi"}, mautrix.ReqSendEvent{TransactionID: txn})
	if err != nil {
		return "", err
	}
	return string(r.EventID), nil
}

func lisaEvents(s *fakehs.Server) int {
	n := 0
	for _, e := range s.Events(room) {
		if e.Sender == bot {
			n++
		}
	}
	return n
}

// TestTxnPolicyAcrossRestart: kept by default (Synapse, Continuwuity),
// forgotten with ForgetOnRestart (Dendrite), forgotten after Expiry, and
// per token or per device across a new login.
func TestTxnPolicyAcrossRestart(t *testing.T) {
	for _, c := range []struct {
		name   string
		policy fakehs.TxnPolicy
		step   func(*fakehs.Server, *mautrix.Client, *clock)
		want   int // Lisa's events after the resend
	}{
		{"kept across a restart", fakehs.TxnPolicy{}, func(s *fakehs.Server, _ *mautrix.Client, _ *clock) { _ = s.Restart() }, 1},
		{"forgotten by a restart", fakehs.TxnPolicy{ForgetOnRestart: true}, func(s *fakehs.Server, _ *mautrix.Client, _ *clock) { _ = s.Restart() }, 2},
		{"expired", fakehs.TxnPolicy{Expiry: time.Hour}, func(_ *fakehs.Server, _ *mautrix.Client, c *clock) { c.Add(time.Hour) }, 2},
		{"not yet expired", fakehs.TxnPolicy{Expiry: time.Hour}, func(_ *fakehs.Server, _ *mautrix.Client, c *clock) { c.Add(59 * time.Minute) }, 1},
		{"per token, new login", fakehs.TxnPolicy{PerToken: true}, func(s *fakehs.Server, cli *mautrix.Client, _ *clock) {
			s.SetToken("tok2")
			cli.AccessToken = "tok2"
		}, 2},
		{"per device, new login", fakehs.TxnPolicy{}, func(s *fakehs.Server, cli *mautrix.Client, _ *clock) {
			s.SetToken("tok2")
			cli.AccessToken = "tok2"
		}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			clk := &clock{t: time.Unix(1_700_000_000, 0)}
			s, cli := startWith(t, fakehs.Options{Now: clk.Now, Txn: c.policy})
			url := s.URL()
			if _, err := send(cli, "t1"); err != nil {
				t.Fatal(err)
			}
			c.step(s, cli, clk)
			// A restart drops kept-alive connections; a PUT on one would
			// fail with EOF (Go does not retry it).
			cli.Client.CloseIdleConnections()
			if s.URL() != url {
				t.Fatalf("URL moved: %s -> %s", url, s.URL())
			}
			if _, err := send(cli, "t1"); err != nil {
				t.Fatal(err)
			}
			if got := lisaEvents(s); got != c.want {
				t.Fatalf("%d events after the resend, want %d", got, c.want)
			}
		})
	}
}

// TestSendFaults: each fault stores the event; only StoreThenClose keeps
// the mapping that makes the resend a no-op.
func TestSendFaults(t *testing.T) {
	for _, c := range []struct {
		fault  fakehs.SendFault
		status int // 0: no answer
		want   int
	}{
		{fakehs.StoreNoMappingThen500, 500, 2},
		{fakehs.StoreNoMappingThenClose, 0, 2},
		{fakehs.StoreThenClose, 0, 1},
	} {
		s, cli := startWith(t, fakehs.Options{})
		s.FailSends(1, c.fault)
		_, err := send(cli, "t1")
		var herr mautrix.HTTPError
		if c.status != 0 && (!errors.As(err, &herr) || herr.Response == nil || herr.Response.StatusCode != c.status) {
			t.Fatalf("fault %d: err %v, want status %d", c.fault, err, c.status)
		}
		if c.status == 0 && (err == nil || errors.As(err, &herr) && herr.Response != nil) {
			t.Fatalf("fault %d: err %v, want a closed connection", c.fault, err)
		}
		if lisaEvents(s) != 1 {
			t.Fatalf("fault %d: the event was not stored", c.fault)
		}
		if _, err := send(cli, "t1"); err != nil {
			t.Fatal(err)
		}
		if got := lisaEvents(s); got != c.want {
			t.Fatalf("fault %d: %d events after the resend, want %d", c.fault, got, c.want)
		}
	}
}

// TestSendRateLimit: a burst passes, then 429 with retry_after_ms until
// the bucket refills; without retry_after_ms when asked.
func TestSendRateLimit(t *testing.T) {
	for _, omit := range []bool{false, true} {
		clk := &clock{t: time.Unix(1_700_000_000, 0)}
		s, cli := startWith(t, fakehs.Options{Now: clk.Now, SendRateLimit: &fakehs.RateLimit{PerSecond: 2, Burst: 2, OmitRetryAfter: omit}})
		for i := range 2 {
			if _, err := send(cli, "b"+string(rune('0'+i))); err != nil {
				t.Fatal(err)
			}
		}
		_, err := send(cli, "c")
		var herr mautrix.HTTPError
		if !errors.As(err, &herr) || herr.Response.StatusCode != 429 || herr.RespError.ErrCode != "M_LIMIT_EXCEEDED" {
			t.Fatalf("third send: %v", err)
		}
		ms, has := herr.RespError.ExtraData["retry_after_ms"].(float64)
		if has == omit || (!omit && ms != 500) {
			t.Fatalf("retry_after_ms = %v (present %v), omit %v", ms, has, omit)
		}
		clk.Add(500 * time.Millisecond)
		if _, err := send(cli, "c"); err != nil {
			t.Fatalf("after the wait: %v", err)
		}
		if n := s.Counts()["send_429"]; n != 1 || lisaEvents(s) != 3 {
			t.Fatalf("%d refusals, %d events", n, lisaEvents(s))
		}
	}
}

// TestSyncModes: an unparsable since is an initial sync; a since ahead is
// answered empty or clamped; the fixed limit and filtering after it.
func TestSyncModes(t *testing.T) {
	ctx := context.Background()
	post := func(s *fakehs.Server, typ string) {
		if _, _, err := s.PostEvent(room, human, typ, map[string]any{"msgtype": "m.text", "body": "x"}); err != nil {
			t.Fatal(err)
		}
	}
	s, cli := startWith(t, fakehs.Options{Sync: fakehs.SyncModes{BadSinceIsInitial: true, AheadSince: fakehs.AheadSinceEmpty}})
	post(s, "m.room.message")
	r, err := cli.FullSyncRequest(ctx, mautrix.ReqSync{Since: "garbage"})
	if err != nil || len(r.Rooms.Join[id.RoomID(room)].Timeline.Events) != 1 {
		t.Fatalf("bad since: %+v, %v", r, err)
	}
	r, err = cli.FullSyncRequest(ctx, mautrix.ReqSync{Since: "s99", Timeout: 10_000})
	if err != nil || len(r.Rooms.Join) != 0 || r.NextBatch != s.Head() {
		t.Fatalf("ahead, empty: %+v, %v", r, err)
	}
	s2, cli2 := startWith(t, fakehs.Options{Sync: fakehs.SyncModes{AheadSince: fakehs.AheadSinceClamp, FixedTimelineLimit: 2, FilterAfterLimit: true}})
	post(s2, "m.room.message")
	post(s2, "m.room.message")
	post(s2, "m.reaction")
	r, err = cli2.FullSyncRequest(ctx, mautrix.ReqSync{Since: "s99"})
	if err != nil || r.NextBatch != s2.Head() {
		t.Fatalf("ahead, clamped: %+v, %v", r, err)
	}
	filter := `{"room":{"timeline":{"limit":50,"types":["m.room.message"]}}}`
	r, err = cli2.FullSyncRequest(ctx, mautrix.ReqSync{FilterID: filter})
	tl := r.Rooms.Join[id.RoomID(room)].Timeline
	if err != nil || len(tl.Events) != 1 || !tl.Limited || tl.PrevBatch == "" {
		t.Fatalf("fixed limit 2, filtered after: %d events, limited %v, %v", len(tl.Events), tl.Limited, err)
	}
}

// TestIdentityAndProxy: the Server header, the federation version and
// the server_version endpoint, and a proxy that rewrites the header and
// does not route federation.
func TestIdentityAndProxy(t *testing.T) {
	get := func(url string) (int, string, string) {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Server"), string(b)
	}
	id := fakehs.Identity{Name: "continuwuity", Version: "26.8.0-alpha.1", FederationVersion: true, ServerVersionPath: "/_continuwuity/server_version"}
	s, _ := startWith(t, fakehs.Options{Identity: id})
	if st, h, b := get(s.URL() + "/_matrix/federation/v1/version"); st != 200 || h != "" || !strings.Contains(b, `"name":"continuwuity"`) {
		t.Fatalf("federation version: %d %q %s", st, h, b)
	}
	if st, _, b := get(s.URL() + "/_continuwuity/server_version"); st != 200 || !strings.Contains(b, "26.8.0-alpha.1") {
		t.Fatalf("server_version: %d %s", st, b)
	}
	p, _ := startWith(t, fakehs.Options{Identity: fakehs.Identity{ServerHeader: "Synapse/1.67.0", Name: "Synapse", Version: "1.67.0", FederationVersion: true},
		Proxy: &fakehs.Proxy{ServerHeader: "nginx", HideFederation: true}})
	if st, h, _ := get(p.URL() + "/_matrix/client/versions"); st != 200 || h != "nginx" {
		t.Fatalf("behind the proxy: %d %q", st, h)
	}
	if st, _, _ := get(p.URL() + "/_matrix/federation/v1/version"); st != 404 {
		t.Fatalf("federation through the proxy: %d", st)
	}
}

// TestWhoamiWithoutDevice: a device-less token's whoami has no device_id.
func TestWhoamiWithoutDevice(t *testing.T) {
	s, _ := startWith(t, fakehs.Options{DeviceID: "-"})
	req, _ := http.NewRequest("GET", s.URL()+"/_matrix/client/v3/account/whoami", nil)
	req.Header.Set("Authorization", "Bearer tok")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if strings.Contains(string(b), "device_id") {
		t.Fatalf("whoami = %s", b)
	}
}

// TestRelationsModes: correct paging by default; filtering after the
// limit ends a short page without next_batch; NextBatchNewest overlaps.
func TestRelationsModes(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name     string
		modes    fakehs.RelationsModes
		wantNext bool
		wantLen  int
	}{
		{"default", fakehs.RelationsModes{}, true, 3},
		{"filter after limit", fakehs.RelationsModes{FilterAfterLimit: true}, false, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, cli := startWith(t, fakehs.Options{Relations: c.modes})
			root, _, _ := s.Post(room, human, map[string]any{"msgtype": "m.text", "body": "root"})
			var ids []string
			for range 5 {
				e, _, _ := s.Post(room, human, map[string]any{"msgtype": "m.text", "body": "r",
					"m.relates_to": map[string]any{"rel_type": "m.thread", "event_id": root}})
				ids = append(ids, e)
			}
			s.HideFromRelations(ids[3])
			resp, err := cli.GetRelations(ctx, room, id.EventID(root), &mautrix.ReqGetRelations{RelationType: event.RelThread, Dir: mautrix.DirectionBackward, Limit: 3})
			if err != nil || len(resp.Chunk) != c.wantLen || (resp.NextBatch != "") != c.wantNext {
				t.Fatalf("page: %v, %d events, next %q", err, len(resp.Chunk), resp.NextBatch)
			}
			if !c.wantNext {
				return
			}
			resp2, err := cli.GetRelations(ctx, room, id.EventID(root), &mautrix.ReqGetRelations{RelationType: event.RelThread, Dir: mautrix.DirectionBackward, Limit: 3, From: resp.NextBatch})
			if err != nil || len(resp2.Chunk) != 1 || string(resp2.Chunk[0].ID) != ids[0] {
				t.Fatalf("second page: %v, %+v", err, resp2)
			}
		})
	}
}

// TestDelayedSendFinishesAbandoned: a delayed send whose client gave up
// is still stored; a retry with its transaction ID waits for it under the
// room's lock and gets its event (Continuwuity), or, looked up before the
// lock (Dendrite), makes a second event.
func TestDelayedSendFinishesAbandoned(t *testing.T) {
	for _, c := range []struct {
		early bool
		want  int
	}{{false, 1}, {true, 2}} {
		s, cli := startWith(t, fakehs.Options{Txn: fakehs.TxnPolicy{LookupBeforeLock: c.early}})
		s.DelaySends(1, 300*time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		_, err := cli.SendMessageEvent(ctx, room, event.EventMessage, map[string]any{"msgtype": "m.text", "body": "hi"}, mautrix.ReqSendEvent{TransactionID: "t1"})
		cancel()
		if err == nil {
			t.Fatal("the delayed send answered before the client's deadline")
		}
		if _, err := send(cli, "t1"); err != nil {
			t.Fatal(err)
		}
		if got := lisaEvents(s); got != c.want {
			t.Fatalf("lookup before the lock %v: %d events, want %d", c.early, got, c.want)
		}
	}
}
