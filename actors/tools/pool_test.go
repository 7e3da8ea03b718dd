package tools

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

func startPool(t *testing.T, n int) (*actor.ActorSystem, *Client) {
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	pid := sys.Root.Spawn(Props(n, slog.New(slog.DiscardHandler)))
	t.Cleanup(func() { _ = sys.Root.StopFuture(pid).Wait() })
	return sys, NewClient(sys.Root, pid)
}

func TestPoolBoundsConcurrencyAndQueues(t *testing.T) {
	_, c := startPool(t, 3)
	var running, maxRunning atomic.Int64
	release := make(chan struct{})
	results := make(chan any, 10)
	for i := range 10 {
		go func() {
			res, err := c.Run(context.Background(), func(ctx context.Context) any {
				n := running.Add(1)
				for m := maxRunning.Load(); n > m && !maxRunning.CompareAndSwap(m, n); m = maxRunning.Load() {
				}
				<-release
				running.Add(-1)
				return i
			})
			if err != nil {
				results <- err
				return
			}
			results <- res
		}()
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := c.Status(time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if st.Busy == 3 && st.Queued == 7 && running.Load() == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status %+v: want 3 busy, 7 queued", st)
		}
		time.Sleep(time.Millisecond)
	}
	close(release)
	seen := map[any]bool{}
	for range 10 {
		seen[<-results] = true
	}
	if len(seen) != 10 || maxRunning.Load() != 3 {
		t.Fatalf("results %v, max running %d", seen, maxRunning.Load())
	}
	st, _ := c.Status(time.Second)
	if st.Completed != 10 || st.MaxQueued != 7 || st.Busy != 0 {
		t.Fatalf("final status %+v", st)
	}
}

func TestPanickingWorkIsReportedAndWorkerReplaced(t *testing.T) {
	_, c := startPool(t, 1)
	res, err := c.Run(context.Background(), func(context.Context) any { panic("boom") })
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := res.(*Panicked); !ok {
		t.Fatalf("result %T, want *Panicked", res)
	}
	// The single worker was replaced: the pool still works.
	res, err = c.Run(context.Background(), func(context.Context) any { return "after" })
	if err != nil || res != "after" {
		t.Fatalf("after replacement: %v %v", res, err)
	}
	st, _ := c.Status(time.Second)
	if st.Replaced != 1 {
		t.Fatalf("replaced = %d", st.Replaced)
	}
}

func TestCancelledCallsLeaveTheQueue(t *testing.T) {
	_, c := startPool(t, 1)
	block := make(chan struct{}, 1)
	go func() { _, _ = c.Run(context.Background(), func(context.Context) any { <-block; return nil }) }()
	waitStatus(t, c, func(st *Status) bool { return st.Busy == 1 })
	ctx, cancel := context.WithCancel(context.Background())
	ran := atomic.Bool{}
	errc := make(chan error, 1)
	go func() {
		_, err := c.Run(ctx, func(context.Context) any { ran.Store(true); return nil })
		errc <- err
	}()
	waitStatus(t, c, func(st *Status) bool { return st.Queued == 1 })
	cancel()
	if err := <-errc; err != context.Canceled {
		t.Fatalf("err = %v", err)
	}
	// The cancelled call leaves the queue at once, while the worker is
	// still busy.
	waitStatus(t, c, func(st *Status) bool { return st.Queued == 0 && st.Busy == 1 })
	// A running call sees its context end.
	ctx2, cancel2 := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel2()
	_, c2 := startPool(t, 1)
	observed := make(chan string, 1)
	_, err := c2.Run(ctx2, func(ctx context.Context) any {
		select {
		case <-ctx.Done():
			observed <- "cancelled"
		case <-time.After(10 * time.Second):
			observed <- "never cancelled"
		}
		return nil
	})
	if err != context.DeadlineExceeded {
		t.Fatalf("Run err = %v", err)
	}
	if got := <-observed; got != "cancelled" {
		t.Fatalf("running work: %s", got)
	}
	// Free the worker; the cancelled call must still never run.
	block <- struct{}{}
	waitStatus(t, c, func(st *Status) bool { return st.Busy == 0 && st.Queued == 0 })
	if ran.Load() {
		t.Fatal("a cancelled queued call ran")
	}
}

func waitStatus(t *testing.T, c *Client, cond func(*Status) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if st, err := c.Status(time.Second); err == nil && cond(st) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("pool never reached the expected state")
		}
		time.Sleep(time.Millisecond)
	}
}
