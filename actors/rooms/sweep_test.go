package rooms

import (
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/lisabot/lisa/messages"
)

// sweepFixture runs a supervisor over slowStarter rooms.
type sweepFixture struct {
	t   *testing.T
	sys *actor.ActorSystem
	pid *actor.PID
	rec *startRecord
}

func newSweepFixture(t *testing.T, rooms []string, concurrency int, preload func([]string) func()) *sweepFixture {
	t.Helper()
	sys := actor.NewActorSystem()
	rec := &startRecord{nudged: map[string]int{}}
	pid, err := sys.Root.SpawnNamed(Props(Config{
		Rooms: rooms, MaxConcurrent: 1, StartConcurrency: concurrency, Preload: preload,
		RoomProps: func(string) *actor.Props {
			return actor.PropsFromProducer(func() actor.Actor { return &slowStarter{rec: rec} })
		},
		MaxRestarts: 3, RestartWindow: time.Minute, RespawnBase: time.Second, RespawnMax: time.Second,
		Clock: clock{}, Logger: slog.New(slog.DiscardHandler),
	}), "rooms")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sys.Root.StopFuture(pid).Wait() })
	return &sweepFixture{t: t, sys: sys, pid: pid, rec: rec}
}

// spawned reports whether the supervisor has spawned room's actor: the
// registry holds it as soon as SpawnNamed returns.
func (f *sweepFixture) spawned(room string) bool {
	_, ok := f.sys.ProcessRegistry.GetLocal("rooms/" + room)
	return ok
}

func (f *sweepFixture) status() *Sweep {
	f.t.Helper()
	res, err := f.sys.Root.RequestFuture(f.pid, &SweepRequest{}, time.Second).Result()
	if err != nil {
		f.t.Fatal(err)
	}
	return res.(*Sweep)
}

// goLive makes room report live and waits until the supervisor has
// counted it (it starts the next rooms in the same step).
func (f *sweepFixture) goLive(room string, live int) {
	f.t.Helper()
	waitFor(f.t, "room "+room+" started", func() bool {
		s, _ := f.rec.snapshot()
		return slices.Contains(s, "rooms/"+room)
	})
	f.sys.Root.Send(actor.NewPID(f.sys.Address(), "rooms/"+room), &goLive{})
	waitFor(f.t, "room "+room+" counted live", func() bool { return f.status().Live == live })
}

func (f *sweepFixture) wantSpawned(t *testing.T, step string, want map[string]bool) {
	t.Helper()
	for room, w := range want {
		if got := f.spawned(room); got != w {
			t.Errorf("%s: room %s spawned = %v, want %v", step, room, got, w)
		}
	}
}

// A nudged room starts at once and holds the sweep: no other room starts
// until it is live, even when a sweep slot frees up.
func TestNudgedRoomHoldsTheSweep(t *testing.T) {
	rooms := []string{"!r0:x", "!r1:x", "!r2:x", "!r3:x", "!r4:x", "!r5:x"}
	f := newSweepFixture(t, rooms, 2, nil)
	waitFor(t, "two rooms", func() bool { return f.spawned("!r0:x") && f.spawned("!r1:x") })
	f.sys.Root.Send(f.pid, &messages.Nudge{Room: "!r5:x"})

	f.goLive("!r0:x", 1)
	f.wantSpawned(t, "a slot freed while the nudged room starts", map[string]bool{"!r5:x": true, "!r2:x": false, "!r3:x": false})
	f.goLive("!r5:x", 2)
	f.wantSpawned(t, "the nudged room is live", map[string]bool{"!r2:x": true, "!r3:x": false})
	for i, room := range []string{"!r1:x", "!r2:x", "!r3:x", "!r4:x"} {
		f.goLive(room, 3+i)
	}
	st := f.status()
	if !st.Done || st.Rooms != 6 || st.Live != 6 || st.Ended.Before(st.Began) {
		t.Fatalf("sweep status %+v, want done with 6 of 6 live", st)
	}
	if s, _ := f.rec.snapshot(); len(s) != 6 {
		t.Fatalf("started %v, want each room once", s)
	}
}

// The sweep starts rooms in sorted order (the order of their journals in
// the store), each once, tells the read-ahead that order, and ends the
// read-ahead when it is over.
func TestSweepOrderAndPreload(t *testing.T) {
	tests := []struct {
		name  string
		rooms []string
		want  []string
	}{
		{"unsorted with a duplicate", []string{"!c:x", "!a:x", "!b:x", "!a:x"}, []string{"rooms/!a:x", "rooms/!b:x", "rooms/!c:x"}},
		{"one room", []string{"!only:x"}, []string{"rooms/!only:x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := make(chan []string, 1)
			stopped := make(chan struct{})
			f := newSweepFixture(t, tt.rooms, 1, func(ids []string) func() {
				got <- slices.Clone(ids)
				return func() { close(stopped) }
			})
			if ids := <-got; !slices.Equal(ids, tt.want) {
				t.Fatalf("preload order %v, want %v", ids, tt.want)
			}
			for i, id := range tt.want {
				f.goLive(id[len("rooms/"):], i+1)
			}
			if s, _ := f.rec.snapshot(); !slices.Equal(s, tt.want) {
				t.Fatalf("started %v, want %v", s, tt.want)
			}
			<-stopped // the sweep is over: the read-ahead is ended (once: close panics twice)
			if st := f.status(); !st.Done || st.Live != len(tt.want) {
				t.Fatalf("sweep status %+v", st)
			}
		})
	}
}

// A supervisor without rooms has nothing to sweep and never calls the
// read-ahead.
func TestSweepWithoutRooms(t *testing.T) {
	f := newSweepFixture(t, nil, 0, func([]string) func() {
		t.Error("preload called without rooms")
		return func() {}
	})
	if st := f.status(); !st.Done || st.Rooms != 0 || st.Live != 0 {
		t.Fatalf("sweep status %+v, want done and empty", st)
	}
}
