package chaos

import (
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

type (
	ping    struct{ n int }
	forward struct{ n int }
	spawnIt struct{}
)

// relay forwards each ping to its sink as a forward; on spawnIt it spawns
// a child relay named "child".
type relay struct {
	sink     *actor.PID
	started  *atomic.Int64
	received *atomic.Int64
}

func (r *relay) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		r.started.Add(1)
	case *ping:
		r.received.Add(1)
		ctx.Send(r.sink, &forward{n: m.n})
	case *spawnIt:
		_, _ = ctx.SpawnNamed(actor.PropsFromProducer(func() actor.Actor {
			return &relay{sink: r.sink, started: r.started, received: r.received}
		}), "child")
	}
}

// sink collects forwards.
type sink struct {
	mu  sync.Mutex
	got []int
}

func (s *sink) Receive(ctx actor.Context) {
	if f, ok := ctx.Message().(*forward); ok {
		s.mu.Lock()
		s.got = append(s.got, f.n)
		s.mu.Unlock()
	}
}

func (s *sink) values() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.got)
}

type faultLog struct {
	mu     sync.Mutex
	faults []Fault
}

func (l *faultLog) add(f Fault) {
	l.mu.Lock()
	l.faults = append(l.faults, f)
	l.mu.Unlock()
}

func (l *faultLog) all() []Fault {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.faults)
}

func await(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out: %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func newSystem(t *testing.T) *actor.ActorSystem {
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	t.Cleanup(sys.Shutdown)
	return sys
}

// TestTargetedSendFaults injects each kind into a grandchild (reached only
// through the spawn middleware) and checks what the sink saw.
func TestTargetedSendFaults(t *testing.T) {
	cases := []struct {
		kind      Kind
		delivered bool // the forward of the faulted ping arrives
		restarted bool
		stopped   bool
	}{
		{PanicBeforeSend, false, true, false},
		{PanicAfterSend, true, true, false},
		{StopAfterSend, true, false, true},
		{PanicOnReceive, false, true, false},
	}
	for _, c := range cases {
		t.Run(c.kind.String(), func(t *testing.T) {
			sys := newSystem(t)
			var faults faultLog
			in := NewInjector(ActorPlan{Seed: 1, Targets: []Target{{Actor: "/child", Message: "*chaos.ping", Kind: c.kind}}}, faults.add)
			root := actor.NewRootContext(sys, nil).WithSpawnMiddleware(in.Spawn())
			sk := &sink{}
			sinkPID := root.Spawn(actor.PropsFromProducer(func() actor.Actor { return sk }))
			var started, received atomic.Int64
			parent, err := root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor {
				return &relay{sink: sinkPID, started: &started, received: &received}
			}), "parent")
			if err != nil {
				t.Fatal(err)
			}
			root.Send(parent, &spawnIt{})
			child := actor.NewPID(sys.Address(), "parent/child")
			await(t, "child started", func() bool { return started.Load() == 2 })

			// The parent is not targeted: its ping goes through.
			root.Send(parent, &ping{n: 1})
			await(t, "parent forward", func() bool { return slices.Contains(sk.values(), 1) })
			root.Send(child, &ping{n: 2})
			await(t, "fault logged", func() bool { return len(faults.all()) == 1 })
			f := faults.all()[0]
			if f.Kind != c.kind || f.Actor != "parent/child" || f.Message != "*chaos.ping" {
				t.Fatalf("fault = %+v", f)
			}
			switch {
			case c.restarted:
				await(t, "child restarted", func() bool { return started.Load() == 3 })
			case c.stopped:
				await(t, "child stopped", func() bool { _, ok := sys.ProcessRegistry.GetLocal(child.Id); return !ok })
			}
			// A message after the fault shows whether 2 arrived before it.
			root.Send(parent, &ping{n: 3})
			await(t, "marker", func() bool { return slices.Contains(sk.values(), 3) })
			if got := slices.Contains(sk.values(), 2); got != c.delivered {
				t.Fatalf("forward of the faulted ping delivered = %v, want %v (sink %v)", got, c.delivered, sk.values())
			}
		})
	}
}

// TestRandomFaultsAreSeeded: the same seed injects the same faults for the
// same messages; another seed does not; lifecycle messages are never hit.
func TestRandomFaultsAreSeeded(t *testing.T) {
	run := func(seed uint64) []Kind {
		in := NewInjector(ActorPlan{Seed: seed, Rate: 0.3}, nil)
		var out []Kind
		for i := range 200 {
			out = append(out, in.decide("app/rooms/!a:hs", []string{"*messages.Nudge", "*room.effectDone"}[i%2]))
		}
		return out
	}
	a, b, c := run(7), run(7), run(8)
	if !slices.Equal(a, b) {
		t.Fatal("same seed, different faults")
	}
	if slices.Equal(a, c) {
		t.Fatal("different seeds, same faults")
	}
	counts := map[Kind]int{}
	for _, k := range a {
		counts[k]++
	}
	faulted := 200 - counts[NoFault]
	if faulted < 30 || faulted > 90 {
		t.Fatalf("rate 0.3 gave %d faults in 200", faulted)
	}
	for _, k := range AllKinds {
		if counts[k] == 0 {
			t.Fatalf("kind %s never drawn: %v", k, counts)
		}
	}
	for _, m := range []any{&actor.Started{}, &actor.Stopping{}, &actor.Restarting{}, &actor.Terminated{}, nil} {
		if eligible(m) {
			t.Fatalf("%T is eligible for faults", m)
		}
	}
	if !eligible(&ping{}) {
		t.Fatal("user messages must be eligible")
	}
}

func TestKillDecider(t *testing.T) {
	in := NewInjector(ActorPlan{Seed: 3, Kills: map[string]float64{"before-send": 0.25}}, nil)
	if in.KillDecider("after-send") != nil {
		t.Fatal("no rate, yet a decider")
	}
	d := in.KillDecider("before-send")
	kills := 0
	for range 400 {
		if d() {
			kills++
		}
	}
	if kills < 60 || kills > 140 {
		t.Fatalf("rate 0.25 killed %d of 400", kills)
	}
}

func TestParsePlan(t *testing.T) {
	p := ActorPlan{Seed: 9, Rate: 0.05, Kinds: []Kind{PanicOnReceive}, Actors: []string{"/rooms/"},
		Targets: []Target{{Actor: "inv-", Kind: StopAfterSend, Rate: 0.5}}, Kills: map[string]float64{"after-send": 0.1}}
	got, err := ParsePlan(p.Encode())
	if err != nil {
		t.Fatal(err)
	}
	if got.Encode() != p.Encode() {
		t.Fatalf("round trip: %s vs %s", got.Encode(), p.Encode())
	}
	for _, bad := range []string{
		`{`, `{"seed":1,"rate":2}`, `{"kinds":["explode"]}`, `{"surprise":1}`,
		`{"targets":[{"kind":"none"}]}`, `{"kills":{"after-send":-1}}`,
	} {
		if _, err := ParsePlan(bad); err == nil {
			t.Errorf("ParsePlan(%s) accepted", bad)
		}
	}
}
