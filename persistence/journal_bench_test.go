package persistence_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/lisabot/lisa/messages/roompb"
	"github.com/lisabot/lisa/persistence"
)

func benchEvent(i int) proto.Message {
	return &roompb.InvocationQueued{Candidate: &roompb.Candidate{
		RoomId: "!bench:hs", EventId: fmt.Sprintf("$e%d", i), Sender: "@ann:hs", Trigger: "mention",
		Body: "Lisa, what did we decide about the release?", OriginTsMs: 1_700_000_000_000,
	}}
}

func openBench(b *testing.B) *persistence.Badger {
	b.Helper()
	s, err := persistence.OpenBadger(b.TempDir(), persistence.BadgerOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	return s
}

// BenchmarkBadgerAppend measures one durable journal write (a
// synchronous Badger commit: the fsync dominates).
func BenchmarkBadgerAppend(b *testing.B) {
	s := openBench(b)
	ev := benchEvent(0)
	b.ReportAllocs()
	i := uint64(0)
	for b.Loop() {
		if err := s.AppendEvent("app/rooms/!bench:hs", i, ev); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkBadgerAppendParallel measures durable journal writes from
// many rooms at once, as the throughput phase of `lisa-bench` causes.
func BenchmarkBadgerAppendParallel(b *testing.B) {
	s := openBench(b)
	ev := benchEvent(0)
	b.ReportAllocs()
	b.SetParallelism(16)
	var room atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		name := fmt.Sprintf("app/rooms/!r%d:hs", room.Add(1))
		i := uint64(0)
		for pb.Next() {
			if err := s.AppendEvent(name, i, ev); err != nil {
				b.Error(err)
				return
			}
			i++
		}
	})
}

// BenchmarkBadgerReplay measures reading a room's journal tail as a
// restart does: the latest snapshot, then 50 events after it.
func BenchmarkBadgerReplay(b *testing.B) {
	s := openBench(b)
	var entries []persistence.BulkEntry
	const name = "app/rooms/!bench:hs"
	for i := range 100 {
		entries = append(entries, persistence.BulkEntry{Name: name, Index: uint64(i), Msg: benchEvent(i)})
	}
	entries = append(entries, persistence.BulkEntry{Name: name, Index: 50, Snapshot: true, Msg: &roompb.RoomSnapshot{NextEventIndex: 50}})
	if err := s.BulkLoad(entries); err != nil {
		b.Fatal(err)
	}
	p, err := persistence.NewProvider(s, 50, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		_, idx, ok := p.GetSnapshot(name)
		if !ok {
			b.Fatal("no snapshot")
		}
		n := 0
		p.GetEvents(name, idx, 0, func(any) { n++ })
		if n != 50 {
			b.Fatalf("replayed %d events", n)
		}
	}
}

// BenchmarkProviderPersist measures the protoactor provider's event write
// path on the in-memory store: encoding and bookkeeping without the disk.
func BenchmarkProviderPersist(b *testing.B) {
	p, err := persistence.NewProvider(persistence.NewMemory(), 50, nil)
	if err != nil {
		b.Fatal(err)
	}
	ev := benchEvent(0)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		p.PersistEvent("app/rooms/!bench:hs", i, ev)
		i++
	}
}

// BenchmarkPreloadReplay measures a start-up sweep's replay of 200
// rooms × 49 events (one short of the snapshot interval) through a
// preloading Provider, one room after another: the bulk scan, decoding
// and delivery, without actors. It reports events per second.
func BenchmarkPreloadReplay(b *testing.B) {
	s := openBench(b)
	const rooms, perRoom = 200, 49
	var entries []persistence.BulkEntry
	var names []string
	for r := range rooms {
		name := fmt.Sprintf("app/rooms/!r%04d:hs", r)
		names = append(names, name)
		entries = append(entries, persistence.BulkEntry{Name: name, Index: 0, Snapshot: true, Msg: &roompb.RoomSnapshot{}})
		for i := range perRoom {
			entries = append(entries, persistence.BulkEntry{Name: name, Index: uint64(i), Msg: benchEvent(i)})
		}
	}
	if err := s.BulkLoad(entries); err != nil {
		b.Fatal(err)
	}
	p, err := persistence.NewProvider(s, 50, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		stop := p.Preload(names)
		for _, name := range names {
			_, idx, _ := p.GetSnapshot(name)
			n := 0
			p.GetEvents(name, idx, 0, func(any) { n++ })
			if n != perRoom {
				b.Fatalf("replayed %d events", n)
			}
		}
		stop()
	}
	b.ReportMetric(float64(rooms*perRoom*b.N)/b.Elapsed().Seconds(), "events/s")
}
