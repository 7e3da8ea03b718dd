package persistence

import (
	"errors"

	"github.com/dgraph-io/badger/v4"
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
