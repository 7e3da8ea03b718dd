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
	// onFirstSend, if set, runs while the first send is failing (the
	// homeserver going down with it).
	onFirstSend func()
}

func (s *lateSender) SendReply(_ context.Context, _, txn string, _ []byte) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sends++
	if s.sends == 1 {
		if s.onFirstSend != nil {
			s.onFirstSend()
		}
		s.pending = append(s.pending, txn)
		return "", &messages.Error{Code: messages.CodeMatrixUnavailable, Message: "connection reset", Ambiguous: true}
	}
	s.stored[txn]++
	return "$reply_" + txn, nil
}

func (s *lateSender) React(_ context.Context, _, _, _, txn string) (string, error) {
	return "$reaction_" + txn, nil
}

func (s *lateSender) Redact(context.Context, string, string, string) error { return nil }

func (s *lateSender) FindReactions(context.Context, string, string, string) ([]string, error) {
	return []string{}, nil
}

func (s *lateSender) FindReplyToRedact(ctx context.Context, room, event, txn string) (string, bool, error) {
	return s.FindReply(ctx, room, event, txn)
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

func (s *lateSender) sent() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sends
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

// TestHeldWhileHomeserverMayHaveRestarted: a send fails in doubt while the
// /sync link fails too (the homeserver restarting). Dendrite may then
// store the send minutes later, after the settling delay: the reply is
// held for the late-store window and found, not sent twice. With the link
// up throughout, the same failure is not held.
func TestHeldWhileHomeserverMayHaveRestarted(t *testing.T) {
	for _, c := range []struct {
		name        string
		window      time.Duration
		linkFails   bool
		lateStore   bool
		wantReplies int
	}{
		{"link failed: held until the late store", time.Hour, true, true, 1},
		// The hazard the hold closes: the settled miss is trusted and
		// the late store becomes a second reply.
		{"hazard without a window", 0, true, true, 2},
		// A held reply would never be answered within the test's
		// deadline: with a healthy link the settled miss is trusted.
		{"link up: not held", time.Hour, false, false, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			hs := &lateSender{stored: map[string]int{}}
			h := newHarness(t, roomA)
			h.link = &fakeLink{}
			h.send, h.settle, h.lateStore, h.recheck = hs, 100*time.Millisecond, c.window, 50*time.Millisecond
			if c.linkFails {
				hs.onFirstSend = func() { h.link.down.Store(true) }
			}
			h.start()
			h.waitFor("link up", func() bool { return h.link.n.Load() > 0 })
			h.enqueue(roomA, "$a1")
			h.waitFor("first lookup", func() bool { n, _ := hs.counts(); return n >= 1 })
			if c.linkFails {
				h.waitFor("a failed /sync", func() bool { return h.link.fails.Load() > 0 })
			}
			h.link.down.Store(false)
			if c.lateStore {
				// Well past the settling delay: several lookups
				// missed, or the reply was sent again.
				h.waitFor("lookups past the settle", func() bool {
					n, _ := hs.counts()
					return n >= 5 || hs.sent() >= 2
				})
				hs.finish()
			}
			h.waitFor("answered", h.answered(roomA, 1))
			lookups, replies := hs.counts()
			if replies != c.wantReplies {
				t.Fatalf("%d replies in the room after %d lookups, want %d", replies, lookups, c.wantReplies)
			}
		})
	}
}
