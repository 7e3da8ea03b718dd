package tools

import (
	"context"
	"encoding/json"
	"log/slog"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/lisabot/lisa/messages"
)

// handlerFunc adapts a function to Handler (tests only).
type handlerFunc func(ctx context.Context, call *messages.ToolCall) *messages.ToolResult

func (f handlerFunc) Call(ctx context.Context, call *messages.ToolCall) *messages.ToolResult {
	return f(ctx, call)
}

func ok(content string) *messages.ToolResult {
	return &messages.ToolResult{OK: true, Code: "ok", Content: content}
}

func newSystem() *actor.ActorSystem {
	return actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
}

func startPoolWith(t *testing.T, cfg Config) (*actor.ActorSystem, *Client) {
	t.Helper()
	sys := newSystem()
	pid := sys.Root.Spawn(NewProps(cfg))
	t.Cleanup(func() { _ = sys.Root.StopFuture(pid).Wait() })
	return sys, NewClient(sys.Root, pid)
}

func startPool(t *testing.T, n int) (*actor.ActorSystem, *Client) {
	t.Helper()
	return startPoolWith(t, Config{Workers: n})
}

func call(name string, arg int) *messages.ToolCall {
	return &messages.ToolCall{Name: name, Args: json.RawMessage(strconv.Itoa(arg))}
}

func TestPoolBoundsConcurrencyAndQueues(t *testing.T) {
	_, c := startPool(t, 3)
	var running, maxRunning atomic.Int64
	release := make(chan struct{})
	c.Register("slow", handlerFunc(func(_ context.Context, call *messages.ToolCall) *messages.ToolResult {
		n := running.Add(1)
		for m := maxRunning.Load(); n > m && !maxRunning.CompareAndSwap(m, n); m = maxRunning.Load() {
		}
		<-release
		running.Add(-1)
		return ok(string(call.Args))
	}), 0)
	results := make(chan string, 10)
	for i := range 10 {
		go func() {
			res, err := c.Call(context.Background(), call("slow", i))
			if err != nil {
				results <- err.Error()
				return
			}
			results <- res.Content
		}()
	}
	waitStatus(t, c, func(st *Status) bool { return st.Busy == 3 && st.Queued == 7 && running.Load() == 3 })
	close(release)
	seen := map[string]bool{}
	for range 10 {
		seen[<-results] = true
	}
	if len(seen) != 10 || maxRunning.Load() != 3 {
		t.Fatalf("results %v, max running %d", seen, maxRunning.Load())
	}
	waitStatus(t, c, func(st *Status) bool { return st.Completed == 10 })
	st, _ := c.Status(time.Second)
	if st.Completed != 10 || st.MaxQueued != 7 || st.Busy != 0 {
		t.Fatalf("final status %+v", st)
	}
}

func TestPanickingHandlerIsReportedAndWorkerReplaced(t *testing.T) {
	_, c := startPool(t, 1)
	c.Register("boom", handlerFunc(func(context.Context, *messages.ToolCall) *messages.ToolResult { panic("boom") }), 0)
	c.Register("echo", handlerFunc(func(_ context.Context, call *messages.ToolCall) *messages.ToolResult {
		return ok("after " + string(call.Args))
	}), 0)
	res, err := c.Call(context.Background(), call("boom", 1))
	if err != nil {
		t.Fatal(err)
	}
	if res.OK || res.Code != string(messages.ToolFailed) {
		t.Fatalf("result %+v, want a tool_failed result", res)
	}
	// The single worker was replaced: the pool still works.
	res, err = c.Call(context.Background(), call("echo", 2))
	if err != nil || !res.OK || res.Content != "after 2" {
		t.Fatalf("after replacement: %+v %v", res, err)
	}
	waitStatus(t, c, func(st *Status) bool { return st.Busy == 0 })
	st, _ := c.Status(time.Second)
	if st.Replaced != 1 || st.Busy != 0 {
		t.Fatalf("status %+v, want one replaced worker", st)
	}
}

func TestCancelledCallsLeaveTheQueue(t *testing.T) {
	_, c := startPool(t, 1)
	block := make(chan struct{}, 1)
	ran := atomic.Bool{}
	c.Register("block", handlerFunc(func(context.Context, *messages.ToolCall) *messages.ToolResult { <-block; return ok("") }), 0)
	c.Register("mark", handlerFunc(func(context.Context, *messages.ToolCall) *messages.ToolResult { ran.Store(true); return ok("") }), 0)
	go func() { _, _ = c.Call(context.Background(), call("block", 0)) }()
	waitStatus(t, c, func(st *Status) bool { return st.Busy == 1 })
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := c.Call(ctx, call("mark", 0))
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

	// A running call sees its deadline, which travels with the call.
	ctx2, cancel2 := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel2()
	_, c2 := startPool(t, 1)
	observed := make(chan string, 2)
	waiter := handlerFunc(func(ctx context.Context, _ *messages.ToolCall) *messages.ToolResult {
		select {
		case <-ctx.Done():
			observed <- "cancelled"
			return &messages.ToolResult{Code: "cancelled"}
		case <-time.After(10 * time.Second):
			observed <- "never cancelled"
		}
		return ok("")
	})
	c2.Register("wait", waiter, 0)
	// The handler and the caller see the deadline at about the same
	// time: the caller gets either its context's error or the handler's
	// answer to the cancellation.
	if res, err := c2.Call(ctx2, call("wait", 0)); err != context.DeadlineExceeded && (err != nil || res.Code != "cancelled") {
		t.Fatalf("Call = %+v, %v", res, err)
	}
	if got := <-observed; got != "cancelled" {
		t.Fatalf("running call: %s", got)
	}
	// A running call whose caller gives up (no deadline) is cancelled.
	waitStatus(t, c2, func(st *Status) bool { return st.Busy == 0 })
	ctx3, cancel3 := context.WithCancel(context.Background())
	errc3 := make(chan error, 1)
	go func() {
		_, err := c2.Call(ctx3, call("wait", 0))
		errc3 <- err
	}()
	waitStatus(t, c2, func(st *Status) bool { return st.Busy == 1 })
	cancel3()
	if err := <-errc3; err != context.Canceled {
		t.Fatalf("Call err = %v", err)
	}
	if got := <-observed; got != "cancelled" {
		t.Fatalf("running call after cancel: %s", got)
	}
	waitStatus(t, c2, func(st *Status) bool { return st.Busy == 0 })

	// Free the worker; the cancelled call must still never run.
	block <- struct{}{}
	waitStatus(t, c, func(st *Status) bool { return st.Busy == 0 && st.Queued == 0 })
	if ran.Load() {
		t.Fatal("a cancelled queued call ran")
	}
}

// TestFullQueueAnswersBusy: calls beyond the queue bound are answered at
// once with a retryable "busy" result and never run.
func TestFullQueueAnswersBusy(t *testing.T) {
	_, c := startPoolWith(t, Config{Workers: 1, QueueLimit: 2})
	release := make(chan struct{})
	var runs atomic.Int64
	c.Register("slow", handlerFunc(func(context.Context, *messages.ToolCall) *messages.ToolResult {
		runs.Add(1)
		<-release
		return ok("")
	}), 0)
	results := make(chan *messages.ToolResult, 3)
	for i := range 3 {
		go func() {
			res, _ := c.Call(context.Background(), call("slow", i))
			results <- res
		}()
		// One running, then two queued, in this order.
		waitStatus(t, c, func(st *Status) bool { return st.Busy+st.Queued == i+1 })
	}
	res, err := c.Call(context.Background(), call("slow", 9))
	if err != nil || res.OK || res.Code != string(messages.ToolBusy) || !res.Retryable {
		t.Fatalf("over the bound: %+v %v, want a retryable busy result", res, err)
	}
	close(release)
	for range 3 {
		if r := <-results; r == nil || !r.OK {
			t.Fatalf("queued call: %+v", r)
		}
	}
	// The worker answers its caller first, then reports to the pool.
	waitStatus(t, c, func(st *Status) bool { return st.Completed == 3 })
	st, _ := c.Status(time.Second)
	if runs.Load() != 3 || st.Rejected != 1 || st.Busy != 0 {
		t.Fatalf("runs %d, status %+v", runs.Load(), st)
	}
}

// TestPerToolConcurrencyLimit: a tool at its limit waits while calls of
// other tools start on the free workers.
func TestPerToolConcurrencyLimit(t *testing.T) {
	_, c := startPool(t, 3)
	release := make(chan struct{})
	var heavy, maxHeavy atomic.Int64
	c.Register("heavy", handlerFunc(func(context.Context, *messages.ToolCall) *messages.ToolResult {
		n := heavy.Add(1)
		for m := maxHeavy.Load(); n > m && !maxHeavy.CompareAndSwap(m, n); m = maxHeavy.Load() {
		}
		<-release
		heavy.Add(-1)
		return ok("heavy")
	}), 1)
	c.Register("light", handlerFunc(func(context.Context, *messages.ToolCall) *messages.ToolResult { return ok("light") }), 0)
	done := make(chan string, 3)
	for i := range 3 {
		go func() {
			res, err := c.Call(context.Background(), call("heavy", i))
			if err != nil {
				done <- err.Error()
				return
			}
			done <- res.Content
		}()
	}
	waitStatus(t, c, func(st *Status) bool { return st.Busy == 1 && st.Queued == 2 })
	// Two workers are idle, but the heavy calls wait for theirs; a light
	// call passes them.
	res, err := c.Call(context.Background(), call("light", 0))
	if err != nil || res.Content != "light" {
		t.Fatalf("light call: %+v %v", res, err)
	}
	close(release)
	for range 3 {
		if got := <-done; got != "heavy" {
			t.Fatalf("heavy call: %s", got)
		}
	}
	if maxHeavy.Load() != 1 {
		t.Fatalf("%d heavy calls ran at once, limit 1", maxHeavy.Load())
	}
}

// TestCallAnswers: the call reaches its handler intact (session, args),
// unknown tools and expired deadlines are answered without running, and
// registration works before the pool is spawned.
func TestCallAnswers(t *testing.T) {
	sys := newSystem()
	pid := actor.NewPID(sys.Address(), "tools")
	c := NewClient(sys.Root, pid)
	got := make(chan *messages.ToolCall, 1)
	c.Register("echo", handlerFunc(func(_ context.Context, call *messages.ToolCall) *messages.ToolResult {
		got <- call
		return ok(call.Session)
	}), 0)
	if _, err := sys.Root.SpawnNamed(NewProps(Config{Workers: 2}), "tools"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sys.Root.StopFuture(pid).Wait() })

	deadline := time.Now().Add(time.Minute)
	res, err := c.Call(context.Background(), &messages.ToolCall{Name: "echo", Args: json.RawMessage(`{"q":1}`), Session: "s1", Deadline: deadline})
	if err != nil || !res.OK || res.Content != "s1" {
		t.Fatalf("echo = %+v %v", res, err)
	}
	if in := <-got; string(in.Args) != `{"q":1}` || !in.Deadline.Equal(deadline) {
		t.Fatalf("handler got %+v", in)
	}
	if res, err := c.Call(context.Background(), call("nope", 0)); err != nil || res.OK || res.Code != string(messages.ToolUnknownTool) {
		t.Fatalf("unknown tool = %+v %v", res, err)
	}
	past := &messages.ToolCall{Name: "echo", Deadline: time.Now().Add(-time.Second)}
	if res, err := c.Call(context.Background(), past); err != nil || res.OK || res.Code != string(messages.ToolTimeout) {
		t.Fatalf("expired call = %+v %v", res, err)
	}
	if len(got) != 0 {
		t.Fatal("an expired call ran")
	}
}

// TestStoppingPoolAnswersEveryCall: when the pool stops, queued and
// running calls are answered at once, so no caller waits for a pool that
// is gone.
func TestStoppingPoolAnswersEveryCall(t *testing.T) {
	sys := newSystem()
	pid := sys.Root.Spawn(NewProps(Config{Workers: 1}))
	c := NewClient(sys.Root, pid)
	release := make(chan struct{})
	defer close(release)
	c.Register("stuck", handlerFunc(func(context.Context, *messages.ToolCall) *messages.ToolResult {
		<-release // ignores its context
		return ok("late")
	}), 0)
	results := make(chan *messages.ToolResult, 2)
	for i := range 2 {
		go func() {
			res, err := c.Call(context.Background(), call("stuck", i))
			if err != nil {
				t.Error(err)
			}
			results <- res
		}()
	}
	waitStatus(t, c, func(st *Status) bool { return st.Busy == 1 && st.Queued == 1 })
	if err := sys.Root.StopFuture(pid).Wait(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		select {
		case r := <-results:
			if r == nil || r.OK || r.Code != string(messages.ToolTimeout) {
				t.Fatalf("result %+v, want a timeout result", r)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a caller still waits after the pool stopped")
		}
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
			st, _ := c.Status(time.Second)
			t.Fatalf("pool never reached the expected state; last %+v", st)
		}
		time.Sleep(time.Millisecond)
	}
}
