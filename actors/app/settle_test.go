package app_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/lisabot/lisa/messages"
)

// lateSender is a homeserver that finishes Lisa's first send only when the
// test says so, after Lisa saw it fail: Dendrite does this with a request
// whose client gave up (killed, timed out) once it was queued for its
// roomserver, and its transaction cache cannot catch the repeat because
// the first request never completed.
type lateSender struct {
	mu      sync.Mutex
	sends   int
	stored  map[string]int // txn -> replies in the room
	pending []string
	lookups int
}

func (s *lateSender) SendReply(_ context.Context, _, txn string, _ []byte) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sends++
	if s.sends == 1 {
		s.pending = append(s.pending, txn)
		return "", &messages.Error{Code: messages.CodeMatrixUnavailable, Message: "connection reset", Ambiguous: true}
	}
	s.stored[txn]++
	return "$reply_" + txn, nil
}

func (s *lateSender) FindReply(_ context.Context, _, _, txn string) (string, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lookups++
	if s.stored[txn] > 0 {
		return "$reply_" + txn, true, nil
	}
	return "", false, nil
}

// finish stores the replies of the sends that failed.
func (s *lateSender) finish() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, txn := range s.pending {
		s.stored[txn]++
	}
	s.pending = nil
}

func (s *lateSender) counts() (lookups, replies int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range s.stored {
		replies += n
	}
	return s.lookups, replies
}

// TestLateStoredSendIsNotRepeated: a send fails ambiguously, the first
// lookup finds nothing, and only then does the homeserver store the
// request. With a settling delay the second lookup finds the reply and
// nothing is sent again; without one (the behaviour the delay replaced)
// the room sends a second reply — the duplicate a 40-minute chaos campaign
// once produced.
func TestLateStoredSendIsNotRepeated(t *testing.T) {
	for _, c := range []struct {
		name        string
		settle      time.Duration
		wantReplies int
	}{
		{"settling delay", time.Second, 1},
		// Demonstrates the hazard the delay closes, so this test would
		// notice if the scenario stopped reproducing it.
		{"hazard without delay: single lookup duplicates", 0, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			hs := &lateSender{stored: map[string]int{}}
			h := newHarness(t, roomA)
			h.send, h.settle = hs, c.settle
			h.start()
			h.enqueue(roomA, "$a1")
			h.waitFor("first lookup", func() bool { n, _ := hs.counts(); return n >= 1 })
			hs.finish()
			h.waitFor("answered", h.answered(roomA, 1))
			lookups, replies := hs.counts()
			if replies != c.wantReplies {
				t.Fatalf("%d replies in the room after %d lookups, want %d", replies, lookups, c.wantReplies)
			}
			if c.settle > 0 && lookups < 2 {
				t.Fatalf("found after %d lookups: the settled second lookup never ran", lookups)
			}
		})
	}
}
