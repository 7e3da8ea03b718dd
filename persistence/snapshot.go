package persistence

import (
	"github.com/dgraph-io/badger/v4"
	"google.golang.org/protobuf/proto"
)

// SnapshotCompactor is implemented by journals that can store a snapshot
// and drop what it makes redundant in one durable write. Provider uses it
// when available: one fsync at a snapshot point instead of three.
type SnapshotCompactor interface {
	// SaveSnapshotCompacting stores snap as the state before the event at
	// index and, in the same transaction, removes name's events and
	// snapshots with smaller indices. Either all of it is stored or
	// nothing is.
	SaveSnapshotCompacting(name string, index uint64, snap proto.Message) error
}

var _ SnapshotCompactor = (*Badger)(nil)

// maxCompactInTxn bounds the deletions that go into the snapshot's own
// transaction; a longer backlog (say, after an earlier compaction failed)
// is deleted afterwards in chunks.
const maxCompactInTxn = 4096

// SaveSnapshotCompacting implements SnapshotCompactor.
func (s *Badger) SaveSnapshotCompacting(name string, index uint64, snap proto.Message) error {
	val, err := encodeAny(snap)
	if err != nil {
		return err
	}
	backlog := false
	err = s.update(func(txn *badger.Txn) error {
		backlog = false
		n := 0
		for _, kind := range []byte{'j', 's'} {
			prefix := prefixOf(kind, name)
			var keys [][]byte
			it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
			for it.Rewind(); it.ValidForPrefix(prefix); it.Next() {
				k := it.Item().KeyCopy(nil)
				if indexOf(k) >= index {
					break
				}
				if n == maxCompactInTxn {
					backlog = true
					break
				}
				keys = append(keys, k)
				n++
			}
			it.Close()
			for _, k := range keys {
				if err := txn.Delete(k); err != nil {
					return err
				}
			}
		}
		return txn.Set(indexedKey('s', name, index), val)
	})
	if err != nil || !backlog || index == 0 {
		return err
	}
	// The snapshot is durable; the rest of the backlog is garbage that
	// can go in further transactions. If that fails, the next snapshot
	// tries again.
	if err := s.DeleteEvents(name, index-1); err != nil {
		return nil
	}
	_ = s.DeleteSnapshots(name, index-1)
	return nil
}
