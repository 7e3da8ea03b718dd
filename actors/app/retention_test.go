package app_test

import (
	"sync"
	"testing"
	"time"

	"github.com/lisabot/lisa/messages"
	"github.com/lisabot/lisa/messages/roompb"
	"github.com/lisabot/lisa/persistence"
)

// TestSweptQuestionIsNotAnsweredAgain: a question answered, then older
// than the retention, loses its routed marker to the sweep; delivered
// again (a redelivery, a back-fill, a replay after a restore) in a new
// process, it is not routed, so its room answers nothing more, while a
// new question is answered once.
func TestSweptQuestionIsNotAnsweredAgain(t *testing.T) {
	const keep = 30 * 24 * time.Hour
	var (
		mu  sync.Mutex
		now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	h := newHarness(t, roomA)
	h.storeOpts = persistence.BadgerOptions{Now: clock, Retention: keep}
	h.start()
	question := &roompb.Candidate{RoomId: roomA, EventId: "$old", Sender: "@human:hs", Trigger: "mention", Body: "hello", OriginTsMs: clock().UnixMilli()}
	route := func(c *roompb.Candidate) int {
		t.Helper()
		cur, err := h.store.Cursor()
		if err != nil {
			t.Fatal(err)
		}
		cur.NextBatch += "+"
		acc, err := h.store.CommitSync(cur, []*roompb.Candidate{c})
		if err != nil {
			t.Fatal(err)
		}
		h.sys.Root.Send(h.sys.RoomsPID(), &messages.Nudge{Room: messages.RoomID(roomA), Entries: acc})
		return len(acc)
	}
	if n := route(question); n != 1 {
		t.Fatalf("%d routed", n)
	}
	h.waitFor("the question answered", h.answered(roomA, 1))
	h.waitFor("the inbox emptied", func() bool { in, err := h.store.Inbox(roomA); return err == nil && len(in) == 0 })

	mu.Lock()
	now = now.Add(keep + 24*time.Hour)
	mu.Unlock()
	res, err := h.store.SweepRetention(clock(), persistence.DefaultSweepLimit)
	if err != nil || res.Markers != 1 || !res.Done {
		t.Fatalf("sweep %+v %v", res, err)
	}
	h.stop()
	h.start()
	if n := route(question); n != 0 {
		t.Fatalf("the swept question was routed again (%d)", n)
	}
	fresh := &roompb.Candidate{RoomId: roomA, EventId: "$new", Sender: "@human:hs", Trigger: "mention", Body: "hi", OriginTsMs: clock().UnixMilli()}
	if n := route(fresh); n != 1 {
		t.Fatalf("the new question: %d routed", n)
	}
	h.waitFor("the new question answered", h.answered(roomA, 2))
	if sends, distinct := h.sender.total(); sends != 2 || distinct != 2 {
		t.Fatalf("%d sends, %d distinct: want the old and the new answer once each", sends, distinct)
	}
}
