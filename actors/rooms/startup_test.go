package rooms

import (
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/lisabot/lisa/messages"
)

// slowStarter is a stand-in room that reports live (ResetSlots, as a room
// does after replaying its journal) only when told to, and records
// nudges.
type slowStarter struct {
	rec *startRecord
}

type goLive struct{}

type startRecord struct {
	mu      sync.Mutex
	spawned []string
	nudged  map[string]int
}

func (r *startRecord) snapshot() ([]string, map[string]int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := map[string]int{}
	for k, v := range r.nudged {
		n[k] = v
	}
	return append([]string(nil), r.spawned...), n
}

func (s *slowStarter) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *actor.Started:
		s.rec.mu.Lock()
		s.rec.spawned = append(s.rec.spawned, ctx.Self().Id)
		s.rec.mu.Unlock()
	case *goLive:
		ctx.Request(ctx.Parent(), &messages.ResetSlots{})
	case *messages.Nudge:
		s.rec.mu.Lock()
		s.rec.nudged[ctx.Self().Id]++
		s.rec.mu.Unlock()
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// Rooms start at most StartConcurrency at a time, in order; a nudge starts
// a waiting room at once; every room ends up started; and waiting rooms
// are not reported as stopped.
func TestStartupSweep(t *testing.T) {
	sys := actor.NewActorSystem()
	rec := &startRecord{nudged: map[string]int{}}
	var roomIDs []string
	for i := range 6 {
		roomIDs = append(roomIDs, fmt.Sprintf("!r%d:x", i))
	}
	pid, err := sys.Root.SpawnNamed(Props(Config{
		Rooms: roomIDs, MaxConcurrent: 1, StartConcurrency: 2,
		RoomProps: func(string) *actor.Props {
			return actor.PropsFromProducer(func() actor.Actor { return &slowStarter{rec: rec} })
		},
		MaxRestarts: 3, RestartWindow: time.Minute, RespawnBase: time.Second, RespawnMax: time.Second,
		Clock: clock{}, Logger: slog.New(slog.DiscardHandler),
	}), "rooms")
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Root.Stop(pid)
	roomPID := func(i int) *actor.PID { return actor.NewPID(sys.Address(), "rooms/"+roomIDs[i]) }

	waitFor(t, "two rooms", func() bool { s, _ := rec.snapshot(); return len(s) == 2 })
	time.Sleep(20 * time.Millisecond)
	if s, _ := rec.snapshot(); len(s) != 2 || s[0] != "rooms/!r0:x" && s[1] != "rooms/!r0:x" {
		t.Fatalf("started %v, want the first two rooms only", s)
	}
	res, err := sys.Root.RequestFuture(pid, &messages.RoomsStatusRequest{}, time.Second).Result()
	if err != nil {
		t.Fatal(err)
	}
	for room, up := range res.(*messages.RoomsStatus).Running {
		if !up {
			t.Errorf("room %s waiting to start is reported as stopped", room)
		}
	}

	// A nudge for room 5 starts it now (a real room drains its inbox once
	// it has replayed its journal, so the nudge itself is not passed on).
	sys.Root.Send(pid, &messages.Nudge{Room: messages.RoomID(roomIDs[5])})
	waitFor(t, "the nudged room", func() bool { s, _ := rec.snapshot(); return len(s) == 3 })
	if s, _ := rec.snapshot(); s[2] != "rooms/!r5:x" {
		t.Fatalf("started %v, want the nudged room third", s)
	}

	// As rooms go live the rest start, each exactly once.
	for _, i := range []int{0, 1, 5} {
		sys.Root.Send(roomPID(i), &goLive{})
	}
	waitFor(t, "rooms 2 and 3", func() bool { s, _ := rec.snapshot(); return len(s) == 5 })
	for _, i := range []int{2, 3} {
		sys.Root.Send(roomPID(i), &goLive{})
	}
	waitFor(t, "room 4", func() bool { s, _ := rec.snapshot(); return len(s) == 6 })
	sys.Root.Send(roomPID(4), &goLive{})
	time.Sleep(20 * time.Millisecond)
	s, _ := rec.snapshot()
	seen := map[string]bool{}
	for _, id := range s {
		if seen[id] {
			t.Fatalf("room %s started twice: %v", id, s)
		}
		seen[id] = true
	}
	if len(seen) != 6 {
		t.Fatalf("started %v", s)
	}
	// Nudges now reach live rooms.
	sys.Root.Send(pid, &messages.Nudge{Room: messages.RoomID(roomIDs[4])})
	waitFor(t, "a nudge", func() bool { _, n := rec.snapshot(); return n["rooms/!r4:x"] == 1 })
}
