package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/lisabot/lisa/actors/app"
	"github.com/lisabot/lisa/actors/room"
	"github.com/lisabot/lisa/actors/syncer"
	"github.com/lisabot/lisa/messages"
	"github.com/lisabot/lisa/messages/roompb"
	"github.com/lisabot/lisa/persistence"
)

// crash is a test-only message that makes a room actor panic.
type crash struct{}

// crashOn panics when a room receives *crash, like a bug would.
func crashOn(next actor.ReceiverFunc) actor.ReceiverFunc {
	return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
		if _, ok := env.Message.(*crash); ok {
			panic("injected crash")
		}
		next(c, env)
	}
}

// fakeSender stands in for the homeserver: it stores sent replies by
// transaction ID, like a homeserver that never forgets.
type fakeSender struct {
	mu    sync.Mutex
	sends map[string]int // txn -> successful sends
	ids   map[string]string
	hold  chan struct{} // when non-nil, sends wait for it (or ctx)
}

func newFakeSender() *fakeSender {
	return &fakeSender{sends: map[string]int{}, ids: map[string]string{}}
}

func (f *fakeSender) SendReply(ctx context.Context, room, txn string, content []byte) (string, error) {
	f.mu.Lock()
	hold := f.hold
	f.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return "", &messages.Error{Code: messages.CodeShutdown, Message: "cancelled", Ambiguous: true}
		}
	}
	if !json.Valid(content) {
		return "", &messages.Error{Code: messages.CodeMatrixRejected, Permanent: true}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sends[txn]++
	f.ids[txn] = "$reply_" + txn
	return f.ids[txn], nil
}

func (f *fakeSender) FindReply(_ context.Context, room, event, txn string) (string, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	id, ok := f.ids[txn]
	return id, ok, nil
}

func (f *fakeSender) FindReplyToRedact(ctx context.Context, room, event, txn string) (string, bool, error) {
	return f.FindReply(ctx, room, event, txn)
}

func (f *fakeSender) React(_ context.Context, _, event, _, txn string) (string, error) {
	return "$reaction_" + txn, nil
}

func (f *fakeSender) Redact(context.Context, string, string, string) error { return nil }

func (f *fakeSender) FindReactions(context.Context, string, string, string) ([]string, error) {
	return []string{}, nil
}

func (f *fakeSender) total() (sends, distinct int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, n := range f.sends {
		sends += n
	}
	return sends, len(f.sends)
}

func (f *fakeSender) setHold(ch chan struct{}) {
	f.mu.Lock()
	f.hold = ch
	f.mu.Unlock()
}

// fakeInvoker answers every candidate and measures concurrency.
type fakeInvoker struct {
	inFlight, maxInFlight atomic.Int64
	calls                 atomic.Int64
	hold                  chan struct{}
}

func (f *fakeInvoker) Invoke(ctx context.Context, c *roompb.Candidate, attempt uint32) ([]byte, error) {
	f.calls.Add(1)
	n := f.inFlight.Add(1)
	defer f.inFlight.Add(-1)
	for {
		m := f.maxInFlight.Load()
		if n <= m || f.maxInFlight.CompareAndSwap(m, n) {
			break
		}
	}
	if f.hold != nil {
		select {
		case <-f.hold:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return json.Marshal(map[string]string{"msgtype": "m.text", "body": "answer to " + c.GetEventId()})
}

type harness struct {
	t      *testing.T
	dir    string
	store  *persistence.Badger
	sys    *app.System
	sender *fakeSender
	// send, when set, replaces sender as the room's homeserver.
	send room.Sender
	// durable, when set, is the rooms' room.Durable.
	durable room.Durable
	// inbox, when set, wraps the store as the rooms' room.Inbox.
	inbox  func(room.Inbox) room.Inbox
	settle time.Duration
	// lateStore and recheck are the rooms' Policy.LateStoreWindow and
	// RecheckEvery; link, when set, is the /sync source.
	lateStore, recheck time.Duration
	link               *fakeLink
	invoker            *fakeInvoker
	rooms              []string
	maxConc            int
	snapshot           int
	// storeOpts are the store's options (retention and its clock).
	storeOpts persistence.BadgerOptions
	// txnRetention is the rooms' Policy.TxnIDRetention (a server that
	// keeps transaction IDs across its restarts); sendRetryBase and
	// sendRetryMax, when set, replace the Policy's send backoff.
	txnRetention                time.Duration
	sendRetryBase, sendRetryMax time.Duration
	// sendTimeout, when set, replaces the rooms' SendTimeout (10 s).
	sendTimeout time.Duration
}

func newHarness(t *testing.T, roomIDs ...string) *harness {
	return &harness{t: t, dir: t.TempDir(), sender: newFakeSender(), invoker: &fakeInvoker{}, rooms: roomIDs, maxConc: 2, snapshot: 4}
}

func (h *harness) start() {
	t := h.t
	t.Helper()
	store, err := persistence.OpenBadger(h.dir, h.storeOpts)
	if err != nil {
		t.Fatal(err)
	}
	h.store = store
	log := slog.New(slog.DiscardHandler)
	provider, err := persistence.NewProvider(store, h.snapshot, log)
	if err != nil {
		t.Fatal(err)
	}
	sys := app.NewSystem(log)
	h.sys = sys
	sendBase, sendMax := 10*time.Millisecond, 50*time.Millisecond
	sendTimeout := 10 * time.Second
	if h.sendTimeout > 0 {
		sendTimeout = h.sendTimeout
	}
	if h.sendRetryBase > 0 {
		sendBase, sendMax = h.sendRetryBase, h.sendRetryMax
	}
	tree := sys.Tree(app.TreeConfig{
		Rooms: h.rooms, MaxConcurrent: h.maxConc,
		Policy: room.Policy{
			MaxAttempts: 3,
			RetryBase:   10 * time.Millisecond, RetryMax: 50 * time.Millisecond,
			SendRetryBase: sendBase, SendRetryMax: sendMax,
			SettleDelay: h.settle, LateStoreWindow: h.lateStore, RecheckEvery: h.recheck,
			TxnIDRetention: h.txnRetention,
			ErrorReply:     func(*roompb.Candidate) []byte { return []byte(`{"msgtype":"m.text","body":"sorry"}`) },
		},
		Provider: provider, Inbox: h.roomInbox(store), BotEvents: store, Sender: h.roomSender(), Durable: h.durable,
		Invoker: h.invoker, InvocationTimeout: 10 * time.Second, SendTimeout: sendTimeout,
		RoomRestarts: 3, RoomRestartWindow: time.Minute,
		RespawnBase: 20 * time.Millisecond, RespawnMax: 200 * time.Millisecond,
		RoomOptions: []actor.PropsOption{actor.WithReceiverMiddleware(crashOn)},
		Clock:       app.RealClock{}, Logger: log,
		Sync: h.syncConfig(),
	})
	if _, err := sys.Start(tree); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.stop)
	for _, id := range h.rooms {
		h.waitFor("room "+id+" live", func() bool { _, err := h.statusErr(id); return err == nil })
	}
}

func (h *harness) roomInbox(store *persistence.Badger) room.Inbox {
	if h.inbox != nil {
		return h.inbox(store)
	}
	return store
}

func (h *harness) roomSender() room.Sender {
	if h.send != nil {
		return h.send
	}
	return h.sender
}

func (h *harness) stop() {
	if h.sys == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := h.sys.Stop(ctx); err != nil {
		h.t.Errorf("stop actors: %v", err)
	}
	if err := h.store.Close(); err != nil {
		h.t.Errorf("close store: %v", err)
	}
	h.sys = nil
}

func (h *harness) roomPID(id string) *actor.PID { return h.sys.RoomPID(id) }

func (h *harness) statusErr(id string) (*messages.RoomStatus, error) {
	res, err := h.sys.Root.RequestFuture(h.roomPID(id), &messages.RoomStatusRequest{}, 2*time.Second).Result()
	if err != nil {
		return nil, err
	}
	st, ok := res.(*messages.RoomStatus)
	if !ok {
		return nil, fmt.Errorf("unexpected reply %T", res)
	}
	return st, nil
}

func (h *harness) status(id string) *messages.RoomStatus {
	h.t.Helper()
	st, err := h.statusErr(id)
	if err != nil {
		h.t.Fatalf("status of %s: %v", id, err)
	}
	return st
}

// enqueue commits candidates the way the sync actor does and nudges
// without the entries (the room reads its inbox).
func (h *harness) enqueue(roomID string, events ...string) {
	h.t.Helper()
	h.commit(roomID, events...)
	h.sys.Root.Send(h.sys.RoomsPID(), &messages.Nudge{Room: messages.RoomID(roomID)})
}

// commit commits candidates the way the sync actor does and returns the
// entries it added.
func (h *harness) commit(roomID string, events ...string) []*roompb.Candidate {
	h.t.Helper()
	var cs []*roompb.Candidate
	for _, e := range events {
		cs = append(cs, &roompb.Candidate{RoomId: roomID, EventId: e, Sender: "@human:hs", Trigger: "mention", Body: "hello " + e})
	}
	cur, err := h.store.Cursor()
	if err != nil {
		h.t.Fatal(err)
	}
	cur.NextBatch += "+"
	accepted, err := h.store.CommitSync(cur, cs)
	if err != nil {
		h.t.Fatal(err)
	}
	return accepted
}

// waitFor awaits cond with a deadline; it checks often and gives up
// loudly.
func (h *harness) waitFor(what string, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			h.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (h *harness) answered(id string, n uint64) func() bool {
	return func() bool {
		st, err := h.statusErr(id)
		return err == nil && st.Answered == n && len(st.Queue) == 0
	}
}

func (h *harness) restarts(id string) int64 {
	st, _ := h.sys.Registry.Get(h.sys.Actors, "app/rooms/"+id)
	return st.Restarts
}

// fakeLink is a /sync source whose homeserver is up (empty batches every
// few milliseconds) or down (every request fails), as the test says.
type fakeLink struct {
	down     atomic.Bool
	n, fails atomic.Int64
}

func (l *fakeLink) Next(ctx context.Context, prev *roompb.SyncCursor) (*messages.SyncBatch, error) {
	t := time.NewTimer(20 * time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-t.C:
	}
	if l.down.Load() {
		l.fails.Add(1)
		return nil, &messages.Error{Code: messages.CodeMatrixUnavailable, Message: "connection refused"}
	}
	return &messages.SyncBatch{Cursor: &roompb.SyncCursor{NextBatch: fmt.Sprintf("s%d", l.n.Add(1)), BaselineDone: true}}, nil
}

func (h *harness) syncConfig() *app.SyncConfig {
	if h.link == nil {
		return nil
	}
	return &app.SyncConfig{
		Source: h.link, Ledger: h.store, Watchdog: 5 * time.Second,
		Backoff: syncer.NewBackoff(5*time.Millisecond, 20*time.Millisecond, 0, func() float64 { return 0 }),
	}
}
