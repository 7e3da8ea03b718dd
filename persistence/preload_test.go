package persistence

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/lisabot/lisa/messages/roompb"
)

// replayed is what a replay through a Provider sees of one journal.
type replayed struct {
	snap    string // "" without a snapshot
	snapIdx int
	events  []string
	panic   string
}

func replayThrough(p *Provider, name string) (r replayed) {
	defer func() {
		if v := recover(); v != nil {
			var se *StorageError
			if err, ok := v.(error); ok && errors.As(err, &se) {
				r.panic = se.Op
				return
			}
			panic(v)
		}
	}()
	start := 0
	if snap, idx, ok := p.GetSnapshot(name); ok {
		r.snap, r.snapIdx, start = fmt.Sprint(snap.(*roompb.RoomSnapshot).GetNextEventIndex()), idx, idx
	}
	p.GetEvents(name, start, 0, func(e any) { r.events = append(r.events, e.(*roompb.InvocationDuplicate).GetEventId()) })
	return r
}

func dup(i int) proto.Message { return &roompb.InvocationDuplicate{EventId: fmt.Sprintf("$%d", i)} }

// journalsFixture writes journals of several shapes, and one journal the
// preload is not asked for, between them.
func journalsFixture(t *testing.T) (*Badger, []string) {
	t.Helper()
	s, err := OpenBadger(t.TempDir(), BadgerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	var entries []BulkEntry
	events := func(name string, idx ...int) {
		for _, i := range idx {
			entries = append(entries, BulkEntry{Name: name, Index: uint64(i), Msg: dup(i)})
		}
	}
	snapshot := func(name string, idx int) {
		entries = append(entries, BulkEntry{Name: name, Index: uint64(idx), Snapshot: true, Msg: &roompb.RoomSnapshot{NextEventIndex: uint64(idx)}})
	}
	events("app/rooms/!a", 0, 1, 2)             // no snapshot
	snapshot("app/rooms/!b", 0)                 // snapshots, not compacted
	snapshot("app/rooms/!b", 3)                 //
	events("app/rooms/!b", 0, 1, 2, 3, 4)       //
	events("app/rooms/!b-foreign", 0, 1)        // not preloaded, sorts between
	snapshot("app/rooms/!c", 2)                 // snapshot, nothing after it
	events("app/rooms/!e", 0, 1, 3)             // a gap
	events("app/rooms/!f", 0)                   // after the gap
	if err := s.BulkLoad(entries); err != nil { // "!d" has no journal at all
		t.Fatal(err)
	}
	return s, []string{"app/rooms/!f", "app/rooms/!e", "app/rooms/!d", "app/rooms/!c", "app/rooms/!b", "app/rooms/!a", "app/rooms/!a"}
}

// awaitRead waits until the running preload has read everything it
// will (the window is larger than the fixture).
func awaitRead(t *testing.T, p *Provider) *preload {
	t.Helper()
	pl := p.pre.Load()
	if pl == nil {
		t.Fatal("no preload running")
	}
	<-pl.finished
	return pl
}

// A preloaded journal replays exactly as the store replays it: snapshot,
// events after it, the same gap error.
func TestPreloadReplaysLikeTheStore(t *testing.T) {
	s, names := journalsFixture(t)
	plain, _ := NewProvider(s, 50, nil)
	pre, _ := NewProvider(s, 50, nil)
	stop := pre.Preload(names)
	defer stop()
	pl := awaitRead(t, pre)
	pl.mu.Lock()
	held := len(pl.ready)
	pl.mu.Unlock()
	// Up to the gap in "!e" (in sorted order: a, b, c, d); "!d" has an
	// empty journal.
	if held != 4 {
		t.Fatalf("preload holds %d journals, want 4", held)
	}
	for _, name := range []string{"app/rooms/!a", "app/rooms/!b", "app/rooms/!c", "app/rooms/!d", "app/rooms/!e", "app/rooms/!f", "app/rooms/!b-foreign"} {
		want, got := replayThrough(plain, name), replayThrough(pre, name)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: preloaded replay %+v, store replay %+v", name, got, want)
		}
	}
	if got := replayThrough(pre, "app/rooms/!b"); got.snapIdx != 3 || len(got.events) != 2 {
		t.Errorf("!b replays %+v, want the snapshot at 3 and events 3, 4", got)
	}
}

// What the preload holds is served once, and never after a write through
// the Provider or once the preload ended: those replays read the store.
func TestPreloadNeverServesAStaleJournal(t *testing.T) {
	tests := []struct {
		name string
		// before runs after the preload read everything and before the
		// replay of "!a" that is checked.
		before func(p *Provider, stop func())
		want   int // events replayed from "!a"
	}{
		{"served from memory", func(*Provider, func()) {}, 3},
		{"written through the provider", func(p *Provider, _ func()) { p.PersistEvent("app/rooms/!a", 4, dup(4)) }, 5},
		{"snapshot taken through the provider", func(p *Provider, _ func()) {
			p.PersistSnapshot("app/rooms/!a", 2, &roompb.RoomSnapshot{NextEventIndex: 2})
		}, 2},
		{"preload ended", func(_ *Provider, stop func()) { stop(); stop() }, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, names := journalsFixture(t)
			p, _ := NewProvider(s, 50, nil)
			stop := p.Preload(names)
			defer stop()
			awaitRead(t, p)
			// Behind the provider's back: only a replay from the store
			// sees it.
			if err := s.BulkLoad([]BulkEntry{{Name: "app/rooms/!a", Index: 3, Msg: dup(3)}}); err != nil {
				t.Fatal(err)
			}
			tt.before(p, stop)
			got := replayThrough(p, "app/rooms/!a")
			if len(got.events) != tt.want || got.panic != "" {
				t.Fatalf("replayed %+v, want %d events", got, tt.want)
			}
			// A second replay always reads the store.
			plain, _ := NewProvider(s, 50, nil)
			if again, want := replayThrough(p, "app/rooms/!a"), replayThrough(plain, "app/rooms/!a"); fmt.Sprint(again) != fmt.Sprint(want) {
				t.Fatalf("second replay %+v, the store holds %+v", again, want)
			}
		})
	}
}

// A journal replayed before the preload reached it is not read ahead
// afterwards; a second Preload ends the first.
func TestPreloadSkipsReplayedJournalsAndRestarts(t *testing.T) {
	s, names := journalsFixture(t)
	p, _ := NewProvider(s, 50, nil)
	first := p.Preload(names)
	defer first()
	firstPL := p.pre.Load()
	firstPL.take("app/rooms/!zzz") // any name: marks it done
	stop := p.Preload([]string{"app/rooms/!a"})
	defer stop()
	select {
	case <-firstPL.finished:
	default:
		t.Fatal("a second preload left the first running")
	}
	pl := p.pre.Load()
	if pl == firstPL {
		t.Fatal("the second preload did not replace the first")
	}
	replayThrough(p, "app/rooms/!a") // consumed before or after the read
	<-pl.finished
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if len(pl.ready) != 0 || len(pl.taken) != 0 {
		t.Fatalf("preload holds %d ready, %d taken after the only journal replayed", len(pl.ready), len(pl.taken))
	}
}

// The scan refuses names out of order: its walk only goes forward, so a
// name behind it would read as an empty journal.
func TestScanRefusesUnsortedNames(t *testing.T) {
	s, _ := journalsFixture(t)
	for _, names := range [][]string{{"app/rooms/!b", "app/rooms/!a"}, {"app/rooms/!a", "app/rooms/!a"}} {
		err := s.scanJournals(context.Background(), names, func(string) bool { return true }, func(string, *rawJournal) error { return nil })
		if err == nil {
			t.Errorf("scan of %v: no error", names)
		}
	}
}

// The memory store is not scanned in bulk: Preload does nothing and
// replays read the store.
func TestPreloadWithoutScanner(t *testing.T) {
	m := NewMemory()
	if err := m.AppendEvent("app/rooms/!a", 0, dup(0)); err != nil {
		t.Fatal(err)
	}
	p, _ := NewProvider(m, 50, nil)
	stop := p.Preload([]string{"app/rooms/!a"})
	defer stop()
	if p.pre.Load() != nil {
		t.Fatal("a preload runs on the memory store")
	}
	if got := replayThrough(p, "app/rooms/!a"); len(got.events) != 1 {
		t.Fatalf("replayed %v", got.events)
	}
}
