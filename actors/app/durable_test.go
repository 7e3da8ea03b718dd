package app_test

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
)

// gatedDurable is a room.Durable whose syncs wait for a gate and can
// fail; it counts the barriers taken and the waits that returned.
type gatedDurable struct {
	mu      sync.Mutex
	gate    chan struct{}
	fail    int // the next fail waits return an error
	marked  atomic.Int32
	entered atomic.Int32
}

func (d *gatedDurable) Barrier() func() error {
	d.marked.Add(1)
	return func() error {
		d.entered.Add(1)
		d.mu.Lock()
		gate := d.gate
		d.mu.Unlock()
		if gate != nil {
			<-gate
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.fail > 0 {
			d.fail--
			return errors.New("sync failed")
		}
		return nil
	}
}

// A reply is sent only after the journal is synced up to the point where
// the room decided to send it: while the sync is held nothing reaches the
// homeserver, and after it the reply is sent once.
func TestReplyWaitsForTheJournalSync(t *testing.T) {
	h := newHarness(t, roomA)
	gate := make(chan struct{})
	d := &gatedDurable{gate: gate}
	h.durable = d
	h.start()
	h.enqueue(roomA, "$a1")
	h.waitFor("the send waiting for the sync", func() bool { return d.entered.Load() == 1 })
	if sends, _ := h.sender.total(); sends != 0 {
		t.Fatalf("%d sends before the journal was synced", sends)
	}
	close(gate)
	h.waitFor("the answer", h.answered(roomA, 1))
	if sends, distinct := h.sender.total(); sends != 1 || distinct != 1 {
		t.Fatalf("%d sends of %d replies, want 1 of 1", sends, distinct)
	}
}

// A failed sync sends nothing; the room tries again and sends the reply
// once the journal is synced.
func TestFailedJournalSyncIsRetriedBeforeSending(t *testing.T) {
	h := newHarness(t, roomA)
	d := &gatedDurable{fail: 2}
	h.durable = d
	h.start()
	h.enqueue(roomA, "$a1")
	h.waitFor("the answer", h.answered(roomA, 1))
	if n := d.entered.Load(); n < 3 {
		t.Fatalf("%d syncs before the send, want the 2 failed and 1 that worked", n)
	}
	if sends, distinct := h.sender.total(); sends != 1 || distinct != 1 {
		t.Fatalf("%d sends of %d replies, want 1 of 1", sends, distinct)
	}
}
