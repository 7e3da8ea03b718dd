package room

import (
	"testing"
	"time"
)

// TestFlightsQuietSince: a room is quiet since the process started, the end
// of its last send, or its last failed lookup, whichever is latest; rooms
// do not share it.
func TestFlightsQuietSince(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	f := NewFlights(func() time.Time { return now })
	start := now
	if got := f.quietSince("!a:hs"); !got.Equal(start) {
		t.Fatalf("fresh room quiet since %v, want the start %v", got, start)
	}
	now = now.Add(10 * time.Second)
	done := f.begin("!a:hs")
	now = now.Add(3 * time.Second)
	done(false)
	if got, want := f.quietSince("!a:hs"), start.Add(13*time.Second); !got.Equal(want) {
		t.Fatalf("after a send: %v, want its end %v", got, want)
	}
	if got := f.quietSince("!b:hs"); !got.Equal(start) {
		t.Fatalf("another room: %v, want the start", got)
	}
	now = now.Add(time.Minute)
	f.lookupFailed("!a:hs")
	if got, want := f.quietSince("!a:hs"), start.Add(73*time.Second); !got.Equal(want) {
		t.Fatalf("after a failed lookup: %v, want %v", got, want)
	}
}

// TestFlightsLateStoreFrom: a send may be stored late only if the /sync
// link failed (or was not up yet) at some point since the send began.
func TestFlightsLateStoreFrom(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	tick := func(d time.Duration) { now = now.Add(d) }
	f := NewFlights(func() time.Time { return now })
	const room = "!a:hs"
	if got := f.lateStoreFrom(room); !got.IsZero() {
		t.Fatalf("no send yet: %v", got)
	}

	// Before the first /sync succeeded nothing is known: hold.
	end := f.begin(room)
	tick(time.Second)
	if got := end(true); !got.Equal(now) {
		t.Fatalf("send before the link was up: late store from %v, want its end %v", got, now)
	}

	// The link is up and stays up: a failed send cannot be stored late.
	tick(time.Second)
	f.SyncOutcome(true)
	tick(time.Second)
	end = f.begin(room)
	tick(time.Second)
	f.SyncOutcome(true)
	if got := end(true); !got.IsZero() {
		t.Fatalf("link up throughout: %v, want none", got)
	}
	if got := f.lateStoreFrom(room); !got.IsZero() {
		t.Fatalf("lookup with the link up throughout: %v, want none", got)
	}

	// A /sync fails after the send ended: the homeserver may have
	// restarted holding it; the lookup sees it even after recovery.
	ended := now
	tick(2 * time.Second)
	f.SyncOutcome(false)
	tick(2 * time.Second)
	f.SyncOutcome(true)
	if got := f.lateStoreFrom(room); !got.Equal(ended) {
		t.Fatalf("link failed after the send: %v, want the send's end %v", got, ended)
	}

	// A later send that began after the recovery is clean again; one
	// that was not ambiguous is never held.
	tick(time.Second)
	end = f.begin(room)
	tick(time.Second)
	f.SyncOutcome(false)
	if got := end(false); !got.IsZero() {
		t.Fatalf("unambiguous failure: %v, want none", got)
	}
	if got := f.lateStoreFrom(room); !got.Equal(now) {
		t.Fatalf("lookup while the link is down: %v, want the send's end %v", got, now)
	}
	if got := f.lateStoreFrom("!other:hs"); !got.IsZero() {
		t.Fatalf("a room without sends: %v", got)
	}
}

// TestFlightsTroubleFromARequest: a restart can pass between two /sync
// requests unseen by them; a send it cut short saw it, and so does every
// later lookup of that room.
func TestFlightsTroubleFromARequest(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	tick := func(d time.Duration) { now = now.Add(d) }
	f := NewFlights(func() time.Time { return now })
	f.SyncOutcome(true)
	tick(time.Second)
	end := f.begin("!a:hs")
	tick(time.Second)
	f.trouble() // the send found the homeserver unreachable
	if got := end(true); !got.Equal(now) {
		t.Fatalf("a send cut short with the /sync up: late store from %v, want its end %v", got, now)
	}
	ended := now
	tick(time.Second)
	f.SyncOutcome(true) // the next /sync succeeds: the trouble stays
	if got := f.lateStoreFrom("!a:hs"); !got.Equal(ended) {
		t.Fatalf("lookup after the /sync went on: %v, want the send's end %v", got, ended)
	}
	if got := f.lastTrouble(); !got.Equal(ended) {
		t.Fatalf("last trouble %v, want %v", got, ended)
	}
}

// TestFlightsWaitReactions: a lookup waits until every wait reaction of
// its room in flight has ended (another room's do not count), and the
// tracker forgets a room once none is.
func TestFlightsWaitReactions(t *testing.T) {
	f := NewFlights(time.Now)
	ctx := t.Context()
	if err := f.waitReactions(ctx, "!a:hs"); err != nil {
		t.Fatalf("no reaction in flight: %v", err)
	}
	end1, end2 := f.beginReaction("!a:hs"), f.beginReaction("!a:hs")
	endOther := f.beginReaction("!b:hs")
	defer endOther()
	waited := make(chan error, 1)
	go func() { waited <- f.waitReactions(ctx, "!a:hs") }()
	end1()
	select {
	case err := <-waited:
		t.Fatalf("returned (%v) with a reaction still in flight", err)
	case <-time.After(50 * time.Millisecond):
	}
	end2()
	select {
	case err := <-waited:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("still waiting after the last reaction ended")
	}
	f.mu.Lock()
	n := len(f.reactions)
	f.mu.Unlock()
	if n != 1 {
		t.Fatalf("tracker holds %d rooms, want only the one with a reaction in flight", n)
	}
}

// TestFlightsLastTrouble: the homeserver may have restarted at the
// process's start until a /sync succeeds, then when a failing /sync
// recovers; while the /sync fails, now.
func TestFlightsLastTrouble(t *testing.T) {
	start := time.UnixMilli(1_700_000_000_000)
	now := start
	f := NewFlights(func() time.Time { return now })
	now = now.Add(time.Second)
	if got := f.lastTrouble(); !got.Equal(now) {
		t.Fatalf("before the first /sync: %s, want now", got.Sub(start))
	}
	now = now.Add(time.Second)
	f.SyncOutcome(true) // first success: 2 s
	now = now.Add(time.Minute)
	f.SyncOutcome(true)
	if got := f.lastTrouble(); !got.Equal(start.Add(2 * time.Second)) {
		t.Fatalf("after the first /sync: %s, want 2s", got.Sub(start))
	}
	f.SyncOutcome(false) // the homeserver goes away at 62 s
	now = now.Add(10 * time.Second)
	if got := f.lastTrouble(); !got.Equal(now) {
		t.Fatalf("while /sync fails: %s, want now", got.Sub(start))
	}
	f.SyncOutcome(true) // back at 72 s
	now = now.Add(time.Minute)
	if got := f.lastTrouble(); !got.Equal(start.Add(72 * time.Second)) {
		t.Fatalf("after recovery: %s, want 72s", got.Sub(start))
	}
}
