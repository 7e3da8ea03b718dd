package persistence

import (
	"errors"

	"github.com/dgraph-io/badger/v4"
)

// Routed reports whether the sync ledger ever routed (room, eventID) to
// the room's inbox. The routed marker outlives the inbox entry, so this
// tells an edit of a message that invoked Lisa from an edit of one that
// did not. Once the retention sweep removed the marker, a question Lisa
// answered is still known as routed by its reply (RepliedTo, never
// swept), so that a redaction of it still takes her reply away.
func (s *Badger) Routed(room, eventID string) (bool, error) {
	found := false
	err := s.view(func(txn *badger.Txn) error {
		for _, k := range [][]byte{key('n', room, eventID), key('a', room, eventID)} {
			_, err := txn.Get(k)
			switch {
			case errors.Is(err, badger.ErrKeyNotFound):
				continue
			case err != nil:
				return err
			}
			found = true
			return nil
		}
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
