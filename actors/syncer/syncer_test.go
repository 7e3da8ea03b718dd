package syncer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/lisabot/lisa/messages"
	"github.com/lisabot/lisa/messages/roompb"
	"github.com/lisabot/lisa/persistence"
)

// script is a Source whose answers the test hands out one by one.
type script struct {
	mu    sync.Mutex
	calls []*roompb.SyncCursor // prev cursor of each call
	next  chan answer
	ctxs  []context.Context
}

type answer struct {
	batch *messages.SyncBatch
	err   error
	hang  bool // block until the request is cancelled
}

func (s *script) Next(ctx context.Context, prev *roompb.SyncCursor) (*messages.SyncBatch, error) {
	s.mu.Lock()
	s.calls = append(s.calls, prev)
	s.ctxs = append(s.ctxs, ctx)
	s.mu.Unlock()
	a := <-s.next
	if a.hang {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return a.batch, a.err
}

func (s *script) call(i int) (*roompb.SyncCursor, context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[i], s.ctxs[i]
}

func (s *script) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.calls)
}

// clock runs timers after a real but tiny delay and records requested
// delays.
type clock struct {
	mu     sync.Mutex
	delays []time.Duration
}

func (c *clock) AfterFunc(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	c.delays = append(c.delays, d)
	c.mu.Unlock()
	if d >= time.Hour { // the watchdog in tests that do not want it
		return func() bool { return true }
	}
	return time.AfterFunc(time.Millisecond, f).Stop
}

func batch(next string, cands ...string) *messages.SyncBatch {
	b := &messages.SyncBatch{Cursor: &roompb.SyncCursor{NextBatch: next, BaselineDone: true}, Rejected: map[string]int{}}
	for _, c := range cands {
		b.Candidates = append(b.Candidates, &roompb.Candidate{RoomId: "!r:hs", EventId: c, Body: "x"})
	}
	return b
}

type env struct {
	t      *testing.T
	sys    *actor.ActorSystem
	src    *script
	store  *persistence.Memory
	nudges chan *messages.Nudge
	clock  *clock
	pid    *actor.PID
}

func start(t *testing.T, watchdog time.Duration) *env {
	e := &env{t: t, sys: actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) })),
		src: &script{next: make(chan answer, 10)}, store: persistence.NewMemory(), nudges: make(chan *messages.Nudge, 10), clock: &clock{}}
	rooms := e.sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if n, ok := c.Message().(*messages.Nudge); ok {
			e.nudges <- n
		}
	}))
	e.pid = e.sys.Root.Spawn(Props(Config{
		Source: e.src, Ledger: e.store, Rooms: rooms, Watchdog: watchdog,
		Backoff: NewBackoff(time.Second, time.Minute, time.Minute, func() float64 { return 0 }),
		Clock:   e.clock, Logger: slog.New(slog.DiscardHandler),
	}))
	t.Cleanup(func() { _ = e.sys.Root.StopFuture(e.pid).Wait() })
	return e
}

func (e *env) waitCalls(n int) {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for e.src.count() < n {
		if time.Now().After(deadline) {
			e.t.Fatalf("source called %d times, want %d", e.src.count(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestBaselineThenCandidates(t *testing.T) {
	e := start(t, time.Hour)
	e.src.next <- answer{batch: batch("s1", "$history")}
	e.waitCalls(2)
	if prev, _ := e.src.call(0); prev.GetBaselineDone() {
		t.Fatal("first call was not a baseline")
	}
	if inbox, _ := e.store.Inbox("!r:hs"); len(inbox) != 0 {
		t.Fatalf("baseline candidates were queued: %v", inbox)
	}
	if prev, _ := e.src.call(1); prev.GetNextBatch() != "s1" || !prev.GetBaselineDone() {
		t.Fatalf("second call used cursor %v", prev)
	}
	e.src.next <- answer{batch: batch("s2", "$new")}
	select {
	case n := <-e.nudges:
		if n.Room != "!r:hs" {
			t.Fatalf("nudged %q", n.Room)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("room not nudged")
	}
	inbox, _ := e.store.Inbox("!r:hs")
	cur, _ := e.store.Cursor()
	if len(inbox) != 1 || inbox[0].GetEventId() != "$new" || cur.GetNextBatch() != "s2" {
		t.Fatalf("inbox %v cursor %v", inbox, cur)
	}
}

func TestFailuresBackOffAndCursorRejectionRebaselines(t *testing.T) {
	e := start(t, time.Hour)
	e.src.next <- answer{batch: batch("s1")}
	e.src.next <- answer{err: &messages.Error{Code: messages.CodeMatrixRateLimit, RetryAfter: 700 * time.Millisecond}}
	e.src.next <- answer{err: &messages.Error{Code: messages.CodeMatrixUnavailable}}
	e.src.next <- answer{err: &messages.Error{Code: messages.CodeCursorRejected, Permanent: true}}
	e.waitCalls(5)
	for i := 1; i <= 3; i++ {
		if prev, _ := e.src.call(i); prev.GetNextBatch() != "s1" {
			t.Fatalf("call %d after a failure used cursor %q, want s1", i, prev.GetNextBatch())
		}
	}
	if prev, _ := e.src.call(4); prev.GetNextBatch() != "" || prev.GetBaselineDone() {
		t.Fatalf("after cursor rejection the next call used %v, want a baseline", prev)
	}
	e.clock.mu.Lock()
	defer e.clock.mu.Unlock()
	var backoffs []time.Duration
	for _, d := range e.clock.delays {
		if d < time.Hour {
			backoffs = append(backoffs, d)
		}
	}
	if fmt.Sprint(backoffs) != fmt.Sprint([]time.Duration{700 * time.Millisecond, time.Second}) {
		t.Fatalf("backoff delays = %v", backoffs)
	}
}

func TestWatchdogReplacesStuckRequest(t *testing.T) {
	e := start(t, 50*time.Millisecond)
	e.src.next <- answer{hang: true}
	e.src.next <- answer{batch: batch("s1")}
	e.waitCalls(2)
	_, first := e.src.call(0)
	select {
	case <-first.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the stuck request was not cancelled")
	}
	if errors.Is(context.Cause(first), messages.ErrStopping) {
		t.Fatal("the watchdog's cancellation claims Lisa is stopping: the source would not check the next answer")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if cur, _ := e.store.Cursor(); cur.GetNextBatch() == "s1" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("sync did not recover after the watchdog")
		}
		time.Sleep(time.Millisecond)
	}
}

// Stopping cancels the request in flight with messages.ErrStopping, so the
// source knows the failure was not the homeserver's.
func TestStopCancelsWithStoppingCause(t *testing.T) {
	e := start(t, time.Hour)
	e.src.next <- answer{hang: true}
	e.waitCalls(1)
	if err := e.sys.Root.StopFuture(e.pid).Wait(); err != nil {
		t.Fatal(err)
	}
	_, ctx := e.src.call(0)
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("stopping did not cancel the request")
	}
	if cause := context.Cause(ctx); !errors.Is(cause, messages.ErrStopping) {
		t.Fatalf("cause %v, want messages.ErrStopping", cause)
	}
}
