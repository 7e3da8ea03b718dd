package persistence

import (
	"encoding/json"
	"errors"
	"fmt"

	badger "github.com/dgraph-io/badger/v4"
)

// UsageRecord is the token usage of one LLM request, kept with the
// attempt it belongs to. It holds counts and identifiers only: never a
// prompt or a reply.
type UsageRecord struct {
	// Day is the request's day in the persona's time zone (YYYY-MM-DD).
	Day string `json:"-"`
	// Room is the room the invocation belongs to.
	Room string `json:"-"`
	// ID identifies the request uniquely across restarts (see
	// [Badger.RecordUsage]).
	ID string `json:"-"`
	// Event and Attempt name the invocation's attempt that made the
	// request.
	Event   string `json:"e"`
	Attempt uint32 `json:"a"`
	// PromptTokens and CompletionTokens are the counts.
	PromptTokens     int64 `json:"p"`
	CompletionTokens int64 `json:"c"`
	// Estimated marks counts estimated from bytes: the server reported
	// none, or the request failed after it reached the server (its
	// prompt, estimated, and no completion).
	Estimated bool `json:"x,omitempty"`
	// AtMs is when the response came, or the failure, in Unix
	// milliseconds.
	AtMs int64 `json:"t"`
}

// RecordUsage stores rec under (day, room, ID). The write is acknowledged
// once committed (it then survives a kill of the process, and is synced
// with the next barrier); writing the same ID again replaces the record,
// so a record is never counted twice. rec.ID must be unique per request:
// the caller makes it from a per-process random prefix and a counter.
func (s *Badger) RecordUsage(rec UsageRecord) error {
	if rec.Day == "" || rec.Room == "" || rec.ID == "" {
		return errors.New("persistence: usage record without day, room or ID")
	}
	val, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return s.updateLazy(func(txn *badger.Txn) error {
		return txn.Set(key('u', rec.Day, rec.Room, rec.ID), val)
	})
}

// Usage calls fn for every usage record of day, in key order (room, then
// ID).
func (s *Badger) Usage(day string, fn func(UsageRecord) error) error {
	prefix := prefixOf('u', day)
	return s.view(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix, PrefetchValues: true})
		defer it.Close()
		for it.Rewind(); it.ValidForPrefix(prefix); it.Next() {
			item := it.Item()
			parts := splitKey(item.Key()[len(prefix):])
			if len(parts) != 2 {
				return fmt.Errorf("%w: usage key", ErrCorrupt)
			}
			rec := UsageRecord{Day: day, Room: parts[0], ID: parts[1]}
			if err := item.Value(func(v []byte) error { return json.Unmarshal(v, &rec) }); err != nil {
				return fmt.Errorf("%w: usage record: %v", ErrCorrupt, err)
			}
			if err := fn(rec); err != nil {
				return err
			}
		}
		return nil
	})
}

// BudgetNotice claims the budget notice of room on day for eventID: it
// returns true when the notice was unclaimed (it is now eventID's) or is
// already eventID's, so that an attempt repeated after a restart gives
// the same answer; false when another event has it. The claim is synced
// before it returns: the notice is sent at most once per room and day.
func (s *Badger) BudgetNotice(day, room, eventID string) (bool, error) {
	mine := false
	err := s.update(func(txn *badger.Txn) error {
		k := key('v', day, room)
		item, err := txn.Get(k)
		switch {
		case errors.Is(err, badger.ErrKeyNotFound):
			mine = true
			return txn.Set(k, []byte(eventID))
		case err != nil:
			return err
		}
		return item.Value(func(v []byte) error {
			mine = string(v) == eventID
			return nil
		})
	})
	return mine, err
}

// splitKey splits the NUL-separated parts of a key's tail.
func splitKey(b []byte) []string {
	var parts []string
	start := 0
	for i, c := range b {
		if c == sep {
			parts = append(parts, string(b[start:i]))
			start = i + 1
		}
	}
	return append(parts, string(b[start:]))
}
