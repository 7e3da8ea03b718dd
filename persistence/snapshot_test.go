package persistence_test

import (
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/lisabot/lisa/messages/roompb"
	"github.com/lisabot/lisa/persistence"
)

func countEvents(t *testing.T, s *persistence.Badger, name string, from uint64) (int, error) {
	t.Helper()
	n := 0
	err := s.Events(name, from, 0, func(uint64, proto.Message) error { n++; return nil })
	return n, err
}

// A snapshot through the provider removes everything before it in the
// same write, and nothing after it; a backlog longer than one transaction
// is removed too.
func TestSnapshotCompactsInOneWrite(t *testing.T) {
	for _, events := range []int{120, 6000} {
		s, err := persistence.OpenBadger(t.TempDir(), persistence.BadgerOptions{})
		if err != nil {
			t.Fatal(err)
		}
		const name = "app/rooms/!a:x"
		var entries []persistence.BulkEntry
		for i := range events {
			entries = append(entries, persistence.BulkEntry{Name: name, Index: uint64(i), Msg: &roompb.InvocationStarted{EventId: "$e"}})
		}
		entries = append(entries, persistence.BulkEntry{Name: name, Index: 50, Snapshot: true, Msg: &roompb.RoomSnapshot{NextEventIndex: 50}})
		if err := s.BulkLoad(entries); err != nil {
			t.Fatal(err)
		}
		p, err := persistence.NewProvider(s, 50, nil)
		if err != nil {
			t.Fatal(err)
		}
		at := events - 20
		p.PersistSnapshot(name, at, &roompb.RoomSnapshot{NextEventIndex: uint64(at)})
		snap, idx, ok, err := s.LatestSnapshot(name)
		if err != nil || !ok || idx != uint64(at) || snap.(*roompb.RoomSnapshot).GetNextEventIndex() != uint64(at) {
			t.Fatalf("%d events: latest snapshot %v at %d (%v, %v)", events, snap, idx, ok, err)
		}
		if _, err := countEvents(t, s, name, 0); !errors.Is(err, persistence.ErrGap) {
			t.Errorf("%d events: events before the snapshot remain: %v", events, err)
		}
		if n, err := countEvents(t, s, name, uint64(at)); err != nil || n != 20 {
			t.Errorf("%d events: %d events after the snapshot (%v), want 20", events, n, err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
