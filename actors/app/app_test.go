package app_test

import (
	"errors"
	"log/slog"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/lisabot/lisa/actors/app"
	"github.com/lisabot/lisa/actors/room"
	"github.com/lisabot/lisa/persistence"
	"github.com/lisabot/lisa/testkit/golden"
)

const (
	roomA = "!alpha:hs"
	roomB = "!beta:hs"
)

// TestRoomPanicReplaysIdenticalState persists work, crashes the room actor
// while a reply is being sent, and checks that the restarted actor replays
// exactly the state it had (compared with a golden digest), reconciles
// instead of re-generating, and sends the reply once.
func TestRoomPanicReplaysIdenticalState(t *testing.T) {
	h := newHarness(t, roomA)
	h.start()
	h.enqueue(roomA, "$a1", "$a2", "$a3")
	h.waitFor("three answers", h.answered(roomA, 3))

	hold := make(chan struct{})
	h.sender.setHold(hold)
	h.enqueue(roomA, "$a4")
	h.waitFor("reply ready and sending", func() bool { return h.status(roomA).Phase == "sending" })
	before := h.status(roomA)

	h.sys.Root.Send(h.roomPID(roomA), &crash{})
	h.waitFor("room restart", func() bool { return h.restarts(roomA) == 1 })
	after := h.status(roomA)
	if after.Digest != before.Digest {
		t.Fatalf("state after restart differs:\nbefore %s\nafter  %s", before.Digest, after.Digest)
	}
	golden.Check(t, filepath.Join("testdata", "restart_replay.golden"), after.Digest)
	if after.Phase != "sending" && after.Phase != "reconciling" {
		t.Fatalf("restarted room is %q; want it to reconcile and resend the ready reply", after.Phase)
	}
	if calls := h.invoker.calls.Load(); calls != 4 {
		t.Fatalf("invoker called %d times; a ready reply must never be regenerated", calls)
	}

	close(hold)
	h.waitFor("fourth answer", h.answered(roomA, 4))
	sends, distinct := h.sender.total()
	if sends != 4 || distinct != 4 {
		t.Fatalf("homeserver got %d sends for %d replies; want exactly one each", sends, distinct)
	}
}

// TestCrashInOneRoomLeavesSiblingUntouched crashes room A repeatedly (past
// its restart budget, so it is stopped and respawned) while room B keeps
// working with the same process and no restarts.
func TestCrashInOneRoomLeavesSiblingUntouched(t *testing.T) {
	h := newHarness(t, roomA, roomB)
	h.start()
	procB, ok := h.sys.Actors.ProcessRegistry.GetLocal("app/rooms/" + roomB)
	if !ok {
		t.Fatal("room B not registered")
	}
	h.enqueue(roomB, "$b1")
	h.waitFor("B answers", h.answered(roomB, 1))

	h.sys.Root.Send(h.roomPID(roomA), &crash{})
	h.waitFor("A restarted", func() bool { return h.restarts(roomA) == 1 })
	for range 4 { // exceed MaxRestarts (3 per minute): A is stopped, then respawned
		h.sys.Root.Send(h.roomPID(roomA), &crash{})
	}
	h.enqueue(roomA, "$a1")
	h.enqueue(roomB, "$b2")
	h.waitFor("A answers after respawn", h.answered(roomA, 1))
	h.waitFor("B answers", h.answered(roomB, 2))

	procB2, ok := h.sys.Actors.ProcessRegistry.GetLocal("app/rooms/" + roomB)
	if !ok || procB2 != procB {
		t.Fatal("room B's process changed: the crash in A touched B")
	}
	if r := h.restarts(roomB); r != 0 {
		t.Fatalf("room B restarted %d times", r)
	}
	if r := h.restarts(roomA); r < 1 {
		t.Fatalf("room A restarts = %d", r)
	}
	statsB, _ := h.sys.Registry.Get(h.sys.Actors, "app/rooms/"+roomB)
	if statsB.Failures != 0 {
		t.Fatalf("room B failures = %d", statsB.Failures)
	}
}

// TestReplayAfterProcessRestartEqualsLiveState stops the whole system with
// work in every state, reopens Badger in a new system and compares.
func TestReplayAfterProcessRestartEqualsLiveState(t *testing.T) {
	h := newHarness(t, roomA, roomB)
	h.snapshot = 3 // exercise snapshots and compaction
	h.start()
	h.enqueue(roomA, "$a1", "$a2", "$a3", "$a4", "$a5")
	h.enqueue(roomB, "$b1")
	h.waitFor("A answers", h.answered(roomA, 5))
	h.waitFor("B answers", h.answered(roomB, 1))
	hold := make(chan struct{})
	h.invoker.hold = hold // later invocations block in the "LLM"
	defer close(hold)
	h.enqueue(roomB, "$b2", "$b3")
	h.waitFor("B running", func() bool { return h.status(roomB).Phase == "running" })

	live := map[string]string{roomA: h.status(roomA).Digest, roomB: h.status(roomB).Digest}
	sendsBefore, _ := h.sender.total()
	h.stop()

	// Compaction: nothing before the latest snapshot is left.
	check, err := persistence.OpenBadger(h.dir, persistence.BadgerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, idx, ok, err := check.LatestSnapshot("app/rooms/" + roomA)
	if err != nil || !ok || idx == 0 {
		t.Fatalf("room A has no snapshot: %v %v", ok, err)
	}
	if err := check.Events("app/rooms/"+roomA, 0, 0, func(uint64, proto.Message) error { return nil }); !errors.Is(err, persistence.ErrGap) {
		t.Fatalf("events before snapshot %d were not compacted: %v", idx, err)
	}
	// An offline replay (no actor) reproduces the live state too.
	prov, err := persistence.NewProvider(check, h.snapshot, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range live {
		st, err := room.Replay(prov, app.RoomActorID(id))
		if err != nil {
			t.Fatal(err)
		}
		if got := room.Digest(&st); got != want {
			t.Fatalf("offline replay of %s differs:\nlive     %s\nreplayed %s", id, want, got)
		}
	}
	if _, err := room.Replay(prov, app.RoomActorID("!never:hs")); err != nil {
		t.Fatalf("replaying an empty journal: %v", err)
	}
	if err := check.Close(); err != nil {
		t.Fatal(err)
	}

	// No slots in the new process: the rooms replay and then wait, so the
	// state we look at is the replayed one, not one that moved on.
	h.invoker = &fakeInvoker{hold: hold}
	h.maxConc = 0
	h.start()
	for id, want := range live {
		if got := h.status(id).Digest; got != want {
			t.Fatalf("room %s replayed to a different state:\nlive     %s\nreplayed %s", id, want, got)
		}
	}
	if sends, _ := h.sender.total(); sends != sendsBefore {
		t.Fatalf("restart re-sent replies: %d sends, had %d", sends, sendsBefore)
	}
}

// TestConcurrentRoomsBounded checks max_concurrent_rooms across rooms.
func TestConcurrentRoomsBounded(t *testing.T) {
	ids := []string{"!r1:hs", "!r2:hs", "!r3:hs", "!r4:hs"}
	h := newHarness(t, ids...)
	h.maxConc = 2
	hold := make(chan struct{})
	h.invoker.hold = hold
	h.start()
	for _, id := range ids {
		h.enqueue(id, "$x"+id)
	}
	h.waitFor("two rooms running", func() bool { return h.invoker.inFlight.Load() == 2 })
	close(hold)
	for _, id := range ids {
		h.waitFor("answer in "+id, h.answered(id, 1))
	}
	if m := h.invoker.maxInFlight.Load(); m != 2 {
		t.Fatalf("max concurrent invocations = %d, want exactly 2", m)
	}
}
