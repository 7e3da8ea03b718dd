package persistence

import (
	"github.com/dgraph-io/badger/v4"
	"google.golang.org/protobuf/proto"
)

// BulkEntry is one journal event or snapshot for [Badger.BulkLoad].
type BulkEntry struct {
	// Name is the journal (actor) name.
	Name string
	// Index is the event index, or for a snapshot the index of the first
	// event it does not include.
	Index uint64
	// Snapshot marks a snapshot rather than an event.
	Snapshot bool
	// Msg is the event or snapshot.
	Msg proto.Message
}

// BulkLoad writes entries in large batches, synchronising once at the
// end, without the per-write conflict check of AppendEvent. It prepares
// data (benchmarks, imports) while nothing else uses the journals it
// writes; the live path always uses AppendEvent and SaveSnapshot.
func (s *Badger) BulkLoad(entries []BulkEntry) error {
	if s.closed.Load() {
		return ErrClosed
	}
	wb := s.db.NewWriteBatch()
	defer wb.Cancel()
	for _, e := range entries {
		val, err := encodeAny(e.Msg)
		if err != nil {
			return err
		}
		kind := byte('j')
		if e.Snapshot {
			kind = 's'
		}
		if err := wb.Set(indexedKey(kind, e.Name, e.Index), val); err != nil {
			return err
		}
	}
	if err := wb.Flush(); err != nil {
		return err
	}
	// An empty durable write: its sync covers every log the batch
	// wrote, set-aside memtable logs included (see logSyncer).
	return s.update(func(*badger.Txn) error { return nil })
}
