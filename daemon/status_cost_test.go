package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/lisabot/lisa/actors/app"
	"github.com/lisabot/lisa/actors/room"
	"github.com/lisabot/lisa/actors/tools"
	"github.com/lisabot/lisa/adapters/status"
	"github.com/lisabot/lisa/messages"
	"github.com/lisabot/lisa/persistence"
	"github.com/lisabot/lisa/trail"
)

// roomAsks counts the status requests the room actors receive and, when
// swallow is set, leaves them unanswered (a room stuck behind its
// mailbox).
type roomAsks struct {
	n       atomic.Int64
	swallow atomic.Bool
}

func (c *roomAsks) option() actor.PropsOption {
	return actor.WithReceiverMiddleware(func(next actor.ReceiverFunc) actor.ReceiverFunc {
		return func(ctx actor.ReceiverContext, env *actor.MessageEnvelope) {
			if _, ok := env.Message.(*messages.RoomStatusRequest); ok {
				c.n.Add(1)
				if c.swallow.Load() {
					return
				}
			}
			next(ctx, env)
		}
	})
}

// statusDaemon is a daemon with n idle rooms on a real Badger store and
// the real actor tree (rooms and the tool pool; no sync), enough for
// its status page.
func statusDaemon(t *testing.T, n int, asks *roomAsks) *Daemon {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	store, err := persistence.OpenBadger(t.TempDir(), persistence.BadgerOptions{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	provider, err := persistence.NewProvider(store, SnapshotInterval, log)
	if err != nil {
		t.Fatal(err)
	}
	rooms := make([]string, n)
	for i := range rooms {
		rooms[i] = fmt.Sprintf("!room%05d:hs", i)
	}
	sys := app.NewSystem(log)
	tree := sys.Tree(app.TreeConfig{
		Rooms: rooms, MaxConcurrent: 4, Policy: room.Policy{MaxAttempts: 1},
		Provider: provider, Inbox: store, BotEvents: store, Durable: store,
		InvocationTimeout: time.Minute, ToolWorkers: 1, SendTimeout: time.Minute,
		RoomRestarts: 3, RoomRestartWindow: time.Minute, RespawnBase: time.Second, RespawnMax: time.Minute,
		RoomOptions: []actor.PropsOption{asks.option()},
		Clock:       app.RealClock{}, Logger: log,
	})
	if _, err := sys.Start(tree); err != nil {
		t.Fatal(err)
	}
	d := &Daemon{store: store, sys: sys, log: log, rooms: rooms, tools: tools.NewClient(sys.Root, sys.ToolsPID()),
		syncAgeLimit: time.Minute, trail: trail.New(200, log), names: &roomNames{}, invocations: &sync.WaitGroup{}, stopping: &atomic.Bool{}}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := sys.Stop(ctx); err != nil {
			t.Error(err)
		}
		_ = store.Close()
	})
	// Every room is spawned and answers before anything is measured.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if _, st, _ := d.healthWithin(context.Background()); len(st) == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the rooms did not all answer")
		}
	}
	return d
}

type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *testClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func load(t *testing.T, h http.Handler, path string) (int, []byte) {
	t.Helper()
	req := httptest.NewRequest("GET", path, nil)
	req.Host = "127.0.0.1:8088"
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	b, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, b
}

// TestStatusPageCostIsBounded (#39 item 6): with 10,000 rooms one load
// of the page asks each room once (not once more for the listed rooms),
// lists MaxActors actors with the totals of all, and stays small; a
// second load within the cache window asks no room at all; and a load
// whose rooms do not answer returns within the page's time limit, saying
// so.
func TestStatusPageCostIsBounded(t *testing.T) {
	const n = 10_000
	asks := &roomAsks{}
	d := statusDaemon(t, n, asks)
	clk := &testClock{now: time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)}
	h := status.Handler(d.statusPage, status.Options{Now: clk.Now, CacheFor: time.Second})

	asks.n.Store(0)
	code, html := load(t, h, "/")
	first := asks.n.Load()
	_, js := load(t, h, "/status.json")
	code2, html2 := load(t, h, "/")
	if code != 200 || code2 != 200 {
		t.Fatalf("loads: %d, %d", code, code2)
	}
	if first != n {
		t.Errorf("one load asked the rooms %d times, want %d (each once)", first, n)
	}
	if again := asks.n.Load() - first; again != 0 {
		t.Errorf("two loads within the cache window asked the rooms %d times, want 0", again)
	}
	if len(html2) != len(html) {
		t.Errorf("the cached page differs: %d vs %d bytes", len(html2), len(html))
	}
	var pg status.Page
	if err := json.Unmarshal(js, &pg); err != nil {
		t.Fatal(err)
	}
	if len(pg.Actors) != status.MaxActors || pg.ActorTotals.Count < n || pg.ActorTotals.Shown != status.MaxActors {
		t.Errorf("actors listed %d, totals %+v; want %d listed of all %d+", len(pg.Actors), pg.ActorTotals, status.MaxActors, n)
	}
	if !strings.Contains(string(html), fmt.Sprintf("%d of %d actors shown", status.MaxActors, pg.ActorTotals.Count)) {
		t.Errorf("the page does not say how many actors it leaves off")
	}
	// What the actors table alone would weigh if it listed every actor,
	// as it did before: the JSON of every actor row.
	var all []status.Actor
	for _, s := range d.sys.Registry.Snapshot(d.sys.Actors) {
		all = append(all, status.Actor{ID: s.ID, Mailbox: s.Len, Posted: s.Posted, Received: s.Received, Restarts: s.Restarts, Failures: s.Failures})
	}
	full, _ := json.Marshal(all)
	t.Logf("%d rooms: page %d B of HTML, %d B of JSON, %d room requests per load, 0 within the cache window; every actor listed would add %d B of JSON (%.0f× the whole JSON now)",
		n, len(html), len(js), first, len(full), float64(len(full))/float64(len(js)))
	if len(full) < 20*len(js) {
		t.Errorf("the JSON (%d B) is not much smaller than every actor's row (%d B)", len(js), len(full))
	}

	// Rooms that never answer: the load ends at the page's time limit.
	asks.swallow.Store(true)
	asks.n.Store(0)
	const limit = 300 * time.Millisecond
	slow := status.Handler(d.statusPage, status.Options{Timeout: limit})
	start := time.Now()
	code, body := load(t, slow, "/status.json")
	took := time.Since(start)
	if code != 200 || !strings.Contains(string(body), "were not asked for their status in time") {
		t.Errorf("a load with silent rooms: %d %.300s", code, body)
	}
	// Before, each room had askTimeout (2 s): 10,000 of them, hours.
	if took > limit+askTimeout/2 {
		t.Errorf("a load with silent rooms took %s; its limit is %s", took, limit)
	}
	t.Logf("silent rooms: the load returned after %s (limit %s), having asked %d rooms", took.Round(time.Millisecond), limit, asks.n.Load())
	asks.swallow.Store(false)
}
