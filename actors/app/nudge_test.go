package app_test

import (
	"sync"
	"testing"

	"github.com/lisabot/lisa/actors/room"
	"github.com/lisabot/lisa/messages"
	"github.com/lisabot/lisa/messages/roompb"
)

// gatedInbox blocks inbox reads while a gate is armed.
type gatedInbox struct {
	store room.Inbox
	mu    sync.Mutex
	gate  chan struct{}
}

func (g *gatedInbox) Inbox(id string) ([]*roompb.Candidate, error) {
	g.mu.Lock()
	gate := g.gate
	g.mu.Unlock()
	if gate != nil {
		<-gate
	}
	return g.store.Inbox(id)
}

func (g *gatedInbox) RemoveInbox(room, eventID string) error {
	return g.store.RemoveInbox(room, eventID)
}

func (g *gatedInbox) arm() chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.gate = make(chan struct{})
	return g.gate
}

// A nudge that carries its entries is answered without reading the inbox;
// once its queue is empty the room reads the inbox and answers an entry
// whose nudge never came.
func TestNudgeEntriesSkipTheInboxRead(t *testing.T) {
	h := newHarness(t, roomA)
	gi := &gatedInbox{}
	h.inbox = func(in room.Inbox) room.Inbox { gi.store = in; return gi }
	h.start()
	gate := gi.arm()
	if lost := h.commit(roomA, "$lost"); len(lost) != 1 {
		t.Fatal("entry not committed")
	}
	entries := h.commit(roomA, "$a1")
	h.sys.Root.Send(h.sys.RoomsPID(), &messages.Nudge{Room: roomA, Entries: entries})
	h.waitFor("the nudged entry answered while inbox reads are blocked", func() bool {
		sends, _ := h.sender.total()
		return sends == 1
	})
	close(gate)
	h.waitFor("the entry whose nudge was lost", h.answered(roomA, 2))
	if sends, distinct := h.sender.total(); sends != 2 || distinct != 2 {
		t.Fatalf("%d sends of %d replies, want 2 of 2", sends, distinct)
	}
}
