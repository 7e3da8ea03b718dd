package rooms

import (
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/lisabot/lisa/messages"
)

// TestIdleCountsBusyRooms: the supervisor answers IdleRequest from what it
// knows (slot holders and rooms that reported RoomBusy, each once) and
// forgets a room's report when it fails, stops or starts a new
// incarnation; a report from an actor that is not its child is dropped.
func TestIdleCountsBusyRooms(t *testing.T) {
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	var mu sync.Mutex
	grants := map[string][]uint64{}
	sup := sys.Root.Spawn(Props(Config{
		Rooms: []string{"!a:hs", "!b:hs", "!c:hs"}, MaxConcurrent: 1,
		RoomProps: func(string) *actor.Props {
			return actor.PropsFromProducer(func() actor.Actor { return &probe{mu: &mu, grants: grants} })
		},
		// One failure is restarted; a second within the window stops the
		// room (respawned an hour later: never, in this test).
		MaxRestarts: 1, RestartWindow: time.Minute, RespawnBase: time.Hour, RespawnMax: time.Hour,
		Clock: clock{}, Logger: slog.New(slog.DiscardHandler),
	}))
	defer func() { _ = sys.Root.StopFuture(sup).Wait() }()
	room := func(id string) *actor.PID { return actor.NewPID(sys.Address(), sup.Id+"/"+id) }
	busy := func() int {
		t.Helper()
		res, err := sys.Root.RequestFuture(sup, &IdleRequest{}, time.Second).Result()
		if err != nil {
			t.Fatal(err)
		}
		return res.(*Idle).Busy
	}
	await := func(what string, want int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			got := busy()
			if got == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: busy = %d, want %d", what, got, want)
			}
			time.Sleep(time.Millisecond)
		}
	}
	for _, id := range []string{"!a:hs", "!b:hs", "!c:hs"} {
		waitFor(t, "room "+id+" spawned", func() bool { _, ok := sys.ProcessRegistry.GetLocal(sup.Id + "/" + id); return ok })
	}
	await("nothing started", 0)

	sys.Root.Send(room("!a:hs"), &ask{token: 1})
	await("a holds the slot", 1)
	sys.Root.Send(room("!b:hs"), &working{busy: true})
	await("b sends", 2)
	sys.Root.Send(room("!a:hs"), &working{busy: true})
	await("a holds the slot and is busy: counted once", 2)
	sys.Root.Send(room("!a:hs"), &release{token: 1})
	await("a released its slot but is still busy", 2)
	sys.Root.Send(room("!a:hs"), &working{busy: false})
	await("a finished", 1)

	// b fails while busy: its new incarnation starts idle.
	sys.Root.Send(room("!b:hs"), &crash{})
	await("b restarted", 0)

	// c is busy, then a new incarnation reports live (ResetSlots).
	sys.Root.Send(room("!c:hs"), &working{busy: true})
	await("c busy", 1)
	sys.Root.Send(room("!c:hs"), &reset{})
	await("c reset", 0)

	// b is busy and is then stopped for good (second failure): Terminated
	// forgets it.
	sys.Root.Send(room("!b:hs"), &working{busy: true})
	await("b busy again", 1)
	sys.Root.Send(room("!b:hs"), &crash{})
	waitFor(t, "b stopped", func() bool { _, ok := sys.ProcessRegistry.GetLocal(sup.Id + "/!b:hs"); return !ok })
	await("b stopped", 0)

	// A report from an actor that is not a current room is dropped, as is
	// one from the stopped room's name.
	stranger := sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		switch c.Message().(type) {
		case *working:
			c.Request(sup, &RoomBusy{Busy: true})
		case *IdleRequest:
			c.Forward(sup) // behind the report: one sender's messages stay in order
		}
	}))
	sys.Root.Send(stranger, &working{busy: true})
	res, err := sys.Root.RequestFuture(stranger, &IdleRequest{}, time.Second).Result()
	if err != nil {
		t.Fatal(err)
	}
	if got := res.(*Idle).Busy; got != 0 {
		t.Fatalf("a stranger's report counted: busy = %d", got)
	}
	sys.Root.Send(room("!a:hs"), &ask{token: 2})
	await("a holds the slot again", 1)
	sys.Root.Send(sup, &messages.Drain{})
	await("draining keeps running work counted", 1)
}
