package rooms

import (
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/lisabot/lisa/messages"
)

type clock struct{}

func (clock) AfterFunc(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }
func (clock) Now() time.Time                                  { return time.Now() }

// manualClock records the delays asked for and fires each timer at once;
// its time moves only when the test advances it.
type manualClock struct {
	mu     sync.Mutex
	now    time.Time
	delays []time.Duration
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func (c *manualClock) AfterFunc(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	c.delays = append(c.delays, d)
	c.mu.Unlock()
	go f()
	return func() bool { return false }
}

func (c *manualClock) asked() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.delays)
}

// probe is a stand-in room: it forwards commands to its parent as its own
// and records grants.
type probe struct {
	mu     *sync.Mutex
	grants map[string][]uint64
}

type (
	ask     struct{ token uint64 }
	release struct{ token uint64 }
	reset   struct{}
	crash   struct{}
	working struct{ busy bool }
)

func (p *probe) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *ask:
		ctx.Request(ctx.Parent(), &messages.AcquireSlot{Token: m.token})
	case *release:
		ctx.Request(ctx.Parent(), &messages.ReleaseSlot{Token: m.token})
	case *reset:
		ctx.Request(ctx.Parent(), &messages.ResetSlots{})
	case *working:
		ctx.Request(ctx.Parent(), &RoomBusy{Busy: m.busy})
	case *crash:
		panic("probe crash")
	case *messages.SlotGranted:
		p.mu.Lock()
		p.grants[ctx.Self().Id] = append(p.grants[ctx.Self().Id], m.Token)
		p.mu.Unlock()
	}
}

func TestSlotLimiter(t *testing.T) {
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	var mu sync.Mutex
	grants := map[string][]uint64{}
	sup := sys.Root.Spawn(Props(Config{
		Rooms: []string{"!a:hs", "!b:hs", "!c:hs"}, MaxConcurrent: 1,
		RoomProps: func(string) *actor.Props {
			return actor.PropsFromProducer(func() actor.Actor { return &probe{mu: &mu, grants: grants} })
		},
		MaxRestarts: 5, RestartWindow: time.Minute, RespawnBase: time.Millisecond, RespawnMax: time.Millisecond,
		Clock: clock{}, Logger: slog.New(slog.DiscardHandler),
	}))
	defer func() { _ = sys.Root.StopFuture(sup).Wait() }()
	room := func(id string) *actor.PID { return actor.NewPID(sys.Address(), sup.Id+"/"+id) }
	status := func() *messages.SlotStatus {
		res, err := sys.Root.RequestFuture(sup, &messages.SlotStatusRequest{}, time.Second).Result()
		if err != nil {
			t.Fatal(err)
		}
		return res.(*messages.SlotStatus)
	}
	granted := func(id string) []uint64 {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(grants[sup.Id+"/"+id])
	}
	await := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out: %s (status %+v)", what, status())
			}
			time.Sleep(time.Millisecond)
		}
	}

	for _, id := range []string{"!a:hs", "!b:hs", "!c:hs"} {
		await("room "+id+" spawned", func() bool { _, ok := sys.ProcessRegistry.GetLocal(sup.Id + "/" + id); return ok })
	}
	sys.Root.Send(room("!a:hs"), &ask{token: 1})
	await("a granted", func() bool { return len(granted("!a:hs")) == 1 })
	sys.Root.Send(room("!b:hs"), &ask{token: 2})
	await("b waits", func() bool { return len(status().Waiting) == 1 })
	sys.Root.Send(room("!c:hs"), &ask{token: 3})
	await("b and c wait", func() bool { return len(status().Waiting) == 2 })
	if len(granted("!b:hs")) != 0 {
		t.Fatal("limit 1 exceeded")
	}

	// A stale release (wrong token) changes nothing.
	sys.Root.Send(room("!a:hs"), &release{token: 99})
	// A new incarnation of a resets: its slot goes to b, the first waiter.
	sys.Root.Send(room("!a:hs"), &reset{})
	await("b granted", func() bool { return slices.Equal(granted("!b:hs"), []uint64{2}) })

	// b fails while holding the slot: c gets it.
	sys.Root.Send(room("!b:hs"), &crash{})
	await("c granted", func() bool { return slices.Equal(granted("!c:hs"), []uint64{3}) })
	sys.Root.Send(room("!c:hs"), &release{token: 3})
	await("all free", func() bool { st := status(); return len(st.Holders) == 0 && len(st.Waiting) == 0 })
	if st := status(); st.MaxHeld != 1 {
		t.Fatalf("max held = %d, want 1", st.MaxHeld)
	}
}

// TestRespawnBackoffStartsOverAfterAQuietWindow: consecutive stops double
// the respawn delay; a room that then runs for a whole restart window
// without failing starts over at the base delay.
func TestRespawnBackoffStartsOverAfterAQuietWindow(t *testing.T) {
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	clk := &manualClock{now: time.Unix(1_700_000_000, 0)}
	var mu sync.Mutex
	sup := sys.Root.Spawn(Props(Config{
		Rooms: []string{"!a:hs"}, MaxConcurrent: 1,
		RoomProps: func(string) *actor.Props {
			return actor.PropsFromProducer(func() actor.Actor { return &probe{mu: &mu, grants: map[string][]uint64{}} })
		},
		MaxRestarts: 0, RestartWindow: time.Minute, RespawnBase: time.Second, RespawnMax: 10 * time.Second,
		Clock: clk, Logger: slog.New(slog.DiscardHandler),
	}))
	defer func() { _ = sys.Root.StopFuture(sup).Wait() }()
	id := sup.Id + "/!a:hs"
	// awaitRunning waits until incarnation n exists: the respawn that
	// started it has been handled, so the supervisor has recorded its
	// start time.
	awaitRunning := func(n int) time.Time {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			if _, ok := sys.ProcessRegistry.GetLocal(id); ok && len(clk.asked()) == n-1 {
				return deadline
			}
			if time.Now().After(deadline) {
				t.Fatalf("room not running before crash %d (delays %v)", n, clk.asked())
			}
			time.Sleep(time.Millisecond)
		}
	}
	crashAndAwait := func(n int) {
		t.Helper()
		// Wait for the incarnation to exist, crash it, wait for the
		// respawn to be scheduled.
		deadline := awaitRunning(n)
		sys.Root.Send(actor.NewPID(sys.Address(), id), &crash{})
		for len(clk.asked()) < n {
			if time.Now().After(deadline) {
				t.Fatalf("no respawn scheduled after crash %d", n)
			}
			time.Sleep(time.Millisecond)
		}
	}
	crashAndAwait(1)
	crashAndAwait(2)
	crashAndAwait(3)
	// The quiet window counts from the respawn, so advance only after it
	// was handled (advancing before it made the test flaky).
	awaitRunning(4)
	clk.advance(time.Minute)
	crashAndAwait(4)
	crashAndAwait(5)
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, time.Second, 2 * time.Second}
	if got := clk.asked(); !slices.Equal(got, want) {
		t.Fatalf("respawn delays = %v, want %v", got, want)
	}
}
