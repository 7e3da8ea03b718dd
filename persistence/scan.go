package persistence

import (
	"bytes"
	"context"
	"fmt"

	"github.com/dgraph-io/badger/v4"
	"google.golang.org/protobuf/proto"

	"github.com/lisabot/lisa/messages"
)

// rawJournal is what a replay needs of one journal, still encoded: the
// latest snapshot and the events after it, copied out of the store in one
// buffer. Decoding waits for the actor that replays it, so that rooms
// decode in parallel on their own goroutines.
type rawJournal struct {
	dec *decoder
	// snap is the latest snapshot's encoding (nil: none) and snapIdx its
	// index.
	snap    []byte
	snapIdx uint64
	// Events first, first+1, … are buf[ends[i-1]:ends[i]].
	first uint64
	buf   []byte
	ends  []int
}

// snapshot decodes the snapshot.
func (r *rawJournal) snapshot(name string) (proto.Message, error) {
	m, err := r.dec.decode(r.snap)
	if err != nil {
		return nil, fmt.Errorf("snapshot %s index %d: %w", messages.ActorLogID(name), r.snapIdx, err)
	}
	return m, nil
}

// events decodes each event in order and hands it to fn.
func (r *rawJournal) events(name string, fn func(proto.Message)) error {
	start := 0
	for i, end := range r.ends {
		m, err := r.dec.decode(r.buf[start:end])
		if err != nil {
			return fmt.Errorf("%s index %d: %w", messages.ActorLogID(name), r.first+uint64(i), err)
		}
		fn(m)
		start = end
	}
	return nil
}

// journalScanner reads many journals in one pass over the store.
type journalScanner interface {
	// scanJournals calls want for each name, in order (names must be
	// sorted); when it returns true, it reads the journal and calls got
	// with it. It stops at the first error, when got returns an error,
	// or when ctx ends.
	scanJournals(ctx context.Context, names []string, want func(string) bool, got func(string, *rawJournal) error) error
}

var _ journalScanner = (*Badger)(nil)

// scanJournals implements journalScanner with one read transaction and
// two forward iterators (snapshots and events) that walk the key space
// once in order: every table block is read and decompressed once,
// where a seek per journal reads the blocks at every journal's start
// again.
func (s *Badger) scanJournals(ctx context.Context, names []string, want func(string) bool, got func(string, *rawJournal) error) error {
	for i := 1; i < len(names); i++ {
		if names[i-1] >= names[i] {
			// The walk only goes forward: a name out of order would
			// read as an empty journal.
			return fmt.Errorf("persistence: journals to scan are not sorted and distinct at %d", i)
		}
	}
	return s.view(func(txn *badger.Txn) error {
		snaps := newKeyWalk(txn, 's')
		defer snaps.close()
		evs := newKeyWalk(txn, 'j')
		defer evs.close()
		for _, name := range names {
			if err := ctx.Err(); err != nil {
				return err
			}
			if !want(name) {
				continue
			}
			r := &rawJournal{dec: &s.dec}
			if err := snaps.latest(name, r); err != nil {
				return err
			}
			if err := evs.events(name, r); err != nil {
				return err
			}
			if err := got(name, r); err != nil {
				return err
			}
		}
		return nil
	})
}

// keyWalk walks one kind of key ('j' or 's') forward, journal by
// journal, in key order.
type keyWalk struct {
	it     *badger.Iterator
	kind   byte
	primed bool
}

func newKeyWalk(txn *badger.Txn, kind byte) *keyWalk {
	return &keyWalk{it: txn.NewIterator(badger.IteratorOptions{Prefix: []byte{kind, sep}}), kind: kind}
}

func (w *keyWalk) close() { w.it.Close() }

// to moves the walk to the first key of name's journal (or past it, if
// there is none), skipping the keys of journals before it one by one: in
// a store of room journals those are rare, and Next reuses the block a
// seek would fetch again.
func (w *keyWalk) to(prefix []byte) {
	if !w.primed {
		w.it.Seek(prefix)
		w.primed = true
		return
	}
	for skipped := 0; w.it.Valid() && bytes.Compare(w.it.Item().Key(), prefix) < 0; skipped++ {
		if skipped == 64 {
			// A long stretch of journals that are not replayed here:
			// one seek is cheaper than walking it.
			w.it.Seek(prefix)
			return
		}
		w.it.Next()
	}
}

// latest copies name's latest snapshot into r.
func (w *keyWalk) latest(name string, r *rawJournal) error {
	prefix := prefixOf(w.kind, name)
	w.to(prefix)
	for ; w.it.ValidForPrefix(prefix); w.it.Next() {
		item := w.it.Item()
		v, err := item.ValueCopy(r.snap[:0])
		if err != nil {
			return err
		}
		r.snap, r.snapIdx = v, indexOf(item.Key())
	}
	return nil
}

// events copies name's events from the snapshot's index on into r,
// checking that no index is missing.
func (w *keyWalk) events(name string, r *rawJournal) error {
	prefix := prefixOf(w.kind, name)
	w.to(prefix)
	r.first = 0
	if r.snap != nil {
		r.first = r.snapIdx
	}
	want := r.first
	for ; w.it.ValidForPrefix(prefix); w.it.Next() {
		item := w.it.Item()
		idx := indexOf(item.Key())
		if idx < r.first {
			continue // before the snapshot: compacted away soon
		}
		if idx != want {
			return gapError(name, want, idx)
		}
		if err := item.Value(func(v []byte) error {
			r.buf = append(r.buf, v...)
			return nil
		}); err != nil {
			return err
		}
		r.ends = append(r.ends, len(r.buf))
		want++
	}
	return nil
}
