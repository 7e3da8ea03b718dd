package persistence_test

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/lisabot/lisa/messages/roompb"
	"github.com/lisabot/lisa/persistence"
)

func TestBulkLoadIsReadLikeAppendedEvents(t *testing.T) {
	dir := t.TempDir()
	s, err := persistence.OpenBadger(dir, persistence.BadgerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var entries []persistence.BulkEntry
	for i := range 5 {
		entries = append(entries, persistence.BulkEntry{Name: "app/rooms/!a:x", Index: uint64(i), Msg: &roompb.InvocationStarted{EventId: "$e", Attempt: uint32(i + 1)}})
	}
	entries = append(entries, persistence.BulkEntry{Name: "app/rooms/!a:x", Index: 3, Snapshot: true, Msg: &roompb.RoomSnapshot{NextEventIndex: 3}})
	if err := s.BulkLoad(entries); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = persistence.OpenBadger(dir, persistence.BadgerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	snap, idx, ok, err := s.LatestSnapshot("app/rooms/!a:x")
	if err != nil || !ok || idx != 3 || snap.(*roompb.RoomSnapshot).GetNextEventIndex() != 3 {
		t.Fatalf("snapshot = %v %d %v %v", snap, idx, ok, err)
	}
	var got []uint32
	if err := s.Events("app/rooms/!a:x", 3, 0, func(_ uint64, m proto.Message) error {
		got = append(got, m.(*roompb.InvocationStarted).GetAttempt())
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != 4 || got[1] != 5 {
		t.Fatalf("events after the snapshot = %v", got)
	}
	// The live path still refuses to overwrite a bulk-loaded index.
	if err := s.AppendEvent("app/rooms/!a:x", 4, &roompb.InvocationStarted{}); err == nil {
		t.Fatal("AppendEvent overwrote a bulk-loaded event")
	}
}
