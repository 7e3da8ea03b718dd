package persistence

import (
	"testing"

	"github.com/lisabot/lisa/messages/roompb"
)

// The index says "maybe entries" for a room from the commit that routed
// to it until a read that began after that commit found the inbox
// empty; a read that began before a later commit clears nothing.
func TestInboxIndexNeverHidesAnEntry(t *testing.T) {
	tests := []struct {
		name  string
		steps func(x *inboxIndex)
		maybe bool
	}{
		{"never routed", func(*inboxIndex) {}, false},
		{"routed", func(x *inboxIndex) { x.mark("!r") }, true},
		{"routed, read empty", func(x *inboxIndex) {
			x.mark("!r")
			gen, _ := x.check("!r")
			x.readEmpty("!r", gen)
		}, false},
		{"routed again while an empty read ran", func(x *inboxIndex) {
			x.mark("!r")
			gen, _ := x.check("!r")
			x.mark("!r") // a commit lands during the read
			x.readEmpty("!r", gen)
		}, true},
		{"another room read empty", func(x *inboxIndex) {
			x.mark("!r")
			x.mark("!s")
			gen, _ := x.check("!s")
			x.readEmpty("!s", gen)
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := &inboxIndex{maybe: map[string]uint64{}}
			tt.steps(x)
			if _, maybe := x.check("!r"); maybe != tt.maybe {
				t.Fatalf("maybe = %v, want %v", maybe, tt.maybe)
			}
		})
	}
}

// Through the store: an inbox emptied by taking its entry reads empty,
// a new commit is seen at once, and entries pending at a reopen are
// found (the index is rebuilt from the store).
func TestBadgerInboxAcrossTakesAndReopen(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenBadger(dir, BadgerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cand := func(id string) *roompb.Candidate {
		return &roompb.Candidate{RoomId: "!r:x", EventId: id, Sender: "@a:x", Body: "Lisa?"}
	}
	inbox := func(s *Badger) int {
		t.Helper()
		got, err := s.Inbox("!r:x")
		if err != nil {
			t.Fatal(err)
		}
		return len(got)
	}
	if _, err := s.CommitSync(&roompb.SyncCursor{NextBatch: "1"}, []*roompb.Candidate{cand("$1")}); err != nil {
		t.Fatal(err)
	}
	if n := inbox(s); n != 1 {
		t.Fatalf("inbox after a commit holds %d", n)
	}
	if err := s.AppendEvent("app/rooms/!r:x", 0, &roompb.InvocationQueued{Candidate: cand("$1")}); err != nil {
		t.Fatal(err)
	}
	if n := inbox(s); n != 0 {
		t.Fatalf("inbox after the take holds %d", n)
	}
	if _, err := s.CommitSync(&roompb.SyncCursor{NextBatch: "2"}, []*roompb.Candidate{cand("$2")}); err != nil {
		t.Fatal(err)
	}
	if n := inbox(s); n != 1 {
		t.Fatalf("inbox after a second commit holds %d", n)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Inbox("!r:x"); err == nil {
		t.Fatal("a closed store read an inbox")
	}
	s, err = OpenBadger(dir, BadgerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if n := inbox(s); n != 1 {
		t.Fatalf("inbox after a reopen holds %d", n)
	}
	if _, err := s.Inbox("!never:x"); err != nil {
		t.Fatal(err)
	}
}
