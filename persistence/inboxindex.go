package persistence

import (
	"sync"

	"github.com/dgraph-io/badger/v4"
)

// inboxIndex remembers which rooms' inboxes may hold entries, so that
// reading an empty inbox — what every idle room does when it starts, and
// thousands start at once — costs a map lookup instead of a read
// transaction (Badger serialises the start of every transaction).
//
// It never says "empty" for an inbox that holds an entry a reader must
// see: CommitSync marks the room after its commit and before it returns
// (so before the room is nudged), and a read that found the inbox empty
// clears the mark only if no commit marked the room since the read began.
// An inbox read between a commit and its mark may miss the new entry;
// the nudge that follows the commit reads it.
type inboxIndex struct {
	mu  sync.Mutex
	gen uint64
	// maybe maps a room whose inbox may hold entries to the generation
	// of its latest mark.
	maybe map[string]uint64
}

// loadInboxIndex marks every room with an inbox entry in db.
func loadInboxIndex(db *badger.DB) (*inboxIndex, error) {
	x := &inboxIndex{maybe: map[string]uint64{}}
	prefix := []byte{'i', sep}
	err := db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
		defer it.Close()
		for it.Rewind(); it.ValidForPrefix(prefix); it.Next() {
			k := it.Item().Key()
			if len(k) < len(prefix)+9 {
				continue
			}
			x.mark(string(k[len(prefix) : len(k)-9])) // 'i' 0 room 0 be64(seq)
		}
		return nil
	})
	return x, err
}

// mark notes that room's inbox may hold entries now.
func (x *inboxIndex) mark(room string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.gen++
	x.maybe[room] = x.gen
}

// check reports whether room's inbox may hold entries, and the
// generation to hand to found when the read is done.
func (x *inboxIndex) check(room string) (gen uint64, maybe bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	gen, maybe = x.maybe[room]
	return gen, maybe
}

// readEmpty notes that a read of room's inbox, begun when its mark had
// generation gen, found it empty.
func (x *inboxIndex) readEmpty(room string, gen uint64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.maybe[room] == gen {
		delete(x.maybe, room)
	}
}
