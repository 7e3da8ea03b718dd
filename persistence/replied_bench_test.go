package persistence_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/lisabot/lisa/persistence"
)

// BenchmarkRepliedTo is the ledger read each question taken in costs (a
// data dir older than the room is caught with it), on a store holding
// 1,000 rooms × 100 replies; BenchmarkIsBotEvent, the read the sync
// already made for a reply to Lisa, is its floor in the same run.
func BenchmarkRepliedTo(b *testing.B)  { benchLedgerRead(b, true) }
func BenchmarkIsBotEvent(b *testing.B) { benchLedgerRead(b, false) }

func benchLedgerRead(b *testing.B, replied bool) {
	s, err := persistence.OpenBadger(b.TempDir(), persistence.BadgerOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	const rooms, perRoom = 1000, 100
	for r := range rooms {
		for i := range perRoom {
			if err := s.RecordBotEvent(fmt.Sprintf("!r%d:hs", r), fmt.Sprintf("$reply%d", i), fmt.Sprintf("$q%d", i)); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ResetTimer()
	for i := range b.N {
		room, q := fmt.Sprintf("!r%d:hs", i%rooms), fmt.Sprintf("$q%d", (i/rooms)%(perRoom*2))
		if replied {
			_, err = s.RepliedTo(room, q)
		} else {
			_, err = s.IsBotEvent(room, q)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBackup writes a backup of a store of 1,000 rooms × 100 replies
// and 1,000 committed questions.
func BenchmarkBackup(b *testing.B) {
	s, err := persistence.OpenBadger(b.TempDir(), persistence.BadgerOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	for r := range 1000 {
		for i := range 100 {
			if err := s.RecordBotEvent(fmt.Sprintf("!r%d:hs", r), fmt.Sprintf("$reply%d", i), fmt.Sprintf("$q%d", i)); err != nil {
				b.Fatal(err)
			}
		}
		if err := commit(s, r); err != nil {
			b.Fatal(err)
		}
	}
	dir := b.TempDir()
	b.ResetTimer()
	for i := range b.N {
		info, err := s.BackupTo(filepath.Join(dir, fmt.Sprintf("b%d", i)))
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(info.Bytes), "bytes")
	}
}
