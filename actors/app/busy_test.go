package app_test

import (
	"testing"
	"time"
)

// TestBusyRoomsFollowsRealRooms: real room actors tell the supervisor when
// they start and finish work a shutdown waits for, so one BusyRooms
// request sees a running invocation and a reply in flight, and zero once
// both are done.
func TestBusyRoomsFollowsRealRooms(t *testing.T) {
	h := newHarness(t, "!a:hs", "!b:hs")
	h.invoker.hold = make(chan struct{})
	h.start()
	busy := func() int {
		t.Helper()
		n, err := h.sys.BusyRooms(time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := busy(); n != 0 {
		t.Fatalf("busy before any work = %d", n)
	}
	sendHold := make(chan struct{})
	h.sender.setHold(sendHold)
	h.enqueue("!a:hs", "$a1")
	h.enqueue("!b:hs", "$b1")
	h.waitFor("both invocations running", func() bool { return h.invoker.inFlight.Load() == 2 })
	h.waitFor("two busy rooms", func() bool { return busy() == 2 })
	close(h.invoker.hold) // both answers are ready; their sends wait
	h.waitFor("both replies being sent", func() bool {
		return h.status("!a:hs").Phase == "sending" && h.status("!b:hs").Phase == "sending"
	})
	if n := busy(); n != 2 {
		t.Fatalf("busy while two replies are in flight = %d, want 2", n)
	}
	close(sendHold)
	h.waitFor("both answered", func() bool { return h.answered("!a:hs", 1)() && h.answered("!b:hs", 1)() })
	h.waitFor("no busy room", func() bool { return busy() == 0 })
}
