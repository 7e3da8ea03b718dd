package persistence

import (
	"encoding/binary"
	"errors"

	"github.com/dgraph-io/badger/v4"

	"github.com/lisabot/lisa/messages/roompb"
)

// Routed reports whether the sync ledger ever routed (room, eventID) to
// the room's inbox. The routed marker outlives the inbox entry, so this
// tells an edit of a message that invoked Lisa from an edit of one that
// did not.
func (s *Badger) Routed(room, eventID string) (bool, error) {
	found := false
	err := s.view(func(txn *badger.Txn) error {
		_, err := txn.Get(key('n', room, eventID))
		switch {
		case errors.Is(err, badger.ErrKeyNotFound):
			return nil
		case err != nil:
			return err
		}
		found = true
		return nil
	})
	return found, err
}

// Routed implements the same query as [Badger.Routed].
func (m *Memory) Routed(room, eventID string) (bool, error) {
	if err := m.lock(); err != nil {
		return false, err
	}
	defer m.mu.Unlock()
	_, ok := m.routed[[2]string{room, eventID}]
	return ok, nil
}

// routedOriginal returns the original message of an edit that invokes
// Lisa for the first time (it is keyed to the original), or "". Routing
// such an edit routes its original too, so that a later edit of the same
// message is seen as an edit of a message that invoked her (see
// roompb.Candidate.original_routed), however long ago.
func routedOriginal(c *roompb.Candidate) string {
	if c.GetReplacesEventId() == "" || c.GetOriginalRouted() {
		return ""
	}
	return c.GetReplacesEventId()
}

// markOriginal sets the routed marker of the original message of c (see
// routedOriginal) in txn, pointing at c's inbox entry seq, unless it has
// one.
func markOriginal(txn *badger.Txn, c *roompb.Candidate, seq uint64) error {
	orig := routedOriginal(c)
	if orig == "" {
		return nil
	}
	k := key('n', c.GetRoomId(), orig)
	switch _, err := txn.Get(k); {
	case err == nil:
		return nil
	case !errors.Is(err, badger.ErrKeyNotFound):
		return err
	}
	return txn.Set(k, binary.BigEndian.AppendUint64(nil, seq))
}
