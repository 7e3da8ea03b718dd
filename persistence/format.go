package persistence

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/dgraph-io/badger/v4"
	"google.golang.org/protobuf/proto"

	"github.com/lisabot/lisa/messages/roompb"
)

// FormatVersion is the data-dir format this build writes, and the newest
// it reads. A data dir without a format record was written before formats
// were recorded: it is format 1. Opening an older format migrates it in
// place, one step at a time (see migrations); a newer one is refused
// before anything is written.
const FormatVersion = 3

// ErrNewerFormat reports a data dir written by a newer build, in a format
// this build cannot read.
var ErrNewerFormat = errors.New("persistence: data dir of a newer format")

// formatKey holds the data dir's format: be64(version).
var formatKey = []byte{'f'}

// A migration turns a data dir of format from into format from+1. It must
// be idempotent: a crash after it ran and before the new format was
// recorded runs it again at the next open.
type migration struct {
	from int
	what string
	run  func(db *badger.DB, now time.Time) error
}

// migrations holds one step per format change, in order; migrations[i]
// starts from format i+1.
var migrations = []migration{
	// Format 2 records the format and indexes Lisa's replies by the
	// question they answer (key 'a', see RepliedTo). A data dir written
	// before has the same keys in the same encodings and no index: the
	// step builds it from the bot events ('b', whose value names the
	// question), so a question answered before the upgrade is known as
	// answered after it.
	{from: 1, what: "record the data dir's format and index replies by their question", run: indexReplies},
	// Format 3 gives every routed marker ('n') the time its event was
	// sent, by which the retention sweep removes it (see
	// SweepRetention); format 2 held be64(seq) alone, which an older
	// build reads as corrupt once it is 16 bytes long. A marker written
	// before has no known time: it gets the time of the migration (or
	// its pending inbox entry's, if later), so it is kept a whole
	// retention from the upgrade on.
	{from: 2, what: "give every routed marker a time for the retention sweep", run: timeMarkers},
}

// timeMarkers rewrites every routed marker of format 2, be64(seq), as
// markerValue(seq, t), t being now or, if later, the origin_server_ts of
// the marker's inbox entry while it is pending. Idempotent: a marker that
// already has a time is left as it is.
func timeMarkers(db *badger.DB, now time.Time) error {
	type marker struct {
		key  []byte
		room string
		seq  uint64
	}
	var legacy []marker
	err := db.View(func(txn *badger.Txn) error {
		prefix := []byte{'n', sep}
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
		defer it.Close()
		for it.Rewind(); it.ValidForPrefix(prefix); it.Next() {
			item := it.Item()
			var m marker
			err := item.Value(func(v []byte) error {
				seq, _, timed, err := decodeMarker(v)
				if err != nil || timed {
					return err
				}
				room, _, _ := bytes.Cut(item.Key()[len(prefix):], []byte{sep})
				m = marker{key: item.KeyCopy(nil), room: string(room), seq: seq}
				return nil
			})
			if err != nil {
				return err
			}
			if m.key != nil {
				legacy = append(legacy, m)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	at := make([]int64, len(legacy))
	err = db.View(func(txn *badger.Txn) error {
		for i, m := range legacy {
			at[i] = now.UnixMilli()
			item, err := txn.Get(indexedKey('i', m.room, m.seq))
			if errors.Is(err, badger.ErrKeyNotFound) {
				continue
			} else if err != nil {
				return err
			}
			c := &roompb.Candidate{}
			if err := item.Value(func(v []byte) error { return proto.Unmarshal(v, c) }); err != nil {
				return fmt.Errorf("%w: inbox entry: %v", ErrCorrupt, err)
			}
			at[i] = max(at[i], c.GetOriginTsMs())
		}
		return nil
	})
	if err != nil {
		return err
	}
	wb := db.NewWriteBatch()
	defer wb.Cancel()
	for i, m := range legacy {
		if err := wb.Set(m.key, markerValue(m.seq, at[i])); err != nil {
			return err
		}
	}
	return wb.Flush()
}

// indexReplies writes key('a', room, question) = reply for every bot event
// key('b', room, reply) whose value names the question it answers.
// Idempotent: the same keys get the same values.
func indexReplies(db *badger.DB, _ time.Time) error {
	type entry struct{ room, reply, question string }
	var all []entry
	err := db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: true, Prefix: []byte{'b', 0}})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			parts := bytes.SplitN(it.Item().Key()[2:], []byte{0}, 2)
			if len(parts) != 2 {
				continue
			}
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			if len(v) > 0 {
				all = append(all, entry{string(parts[0]), string(parts[1]), string(v)})
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	wb := db.NewWriteBatch()
	defer wb.Cancel()
	for _, e := range all {
		if err := wb.Set(key('a', e.room, e.question), []byte(e.reply)); err != nil {
			return err
		}
	}
	return wb.Flush()
}

// readFormat returns the recorded format; 1 when a store with data has no
// record, 0 when the store holds no key at all.
func readFormat(db *badger.DB) (int, error) {
	format := 0
	err := db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(formatKey)
		if errors.Is(err, badger.ErrKeyNotFound) {
			it := txn.NewIterator(badger.IteratorOptions{})
			defer it.Close()
			if it.Rewind(); it.Valid() {
				format = 1
			}
			return nil
		}
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error {
			if len(v) != 8 || binary.BigEndian.Uint64(v) == 0 || binary.BigEndian.Uint64(v) > 1<<20 {
				return fmt.Errorf("%w: format record %x", ErrCorrupt, v)
			}
			format = int(binary.BigEndian.Uint64(v))
			return nil
		})
	})
	return format, err
}

// openFormat checks the format of the store in dir and migrates an older
// one to FormatVersion; a new store gets FormatVersion. A newer format
// fails with ErrNewerFormat before any write.
func openFormat(db *badger.DB, dir string, now time.Time) error {
	format, err := readFormat(db)
	if err != nil {
		return err
	}
	if format > FormatVersion {
		return fmt.Errorf("%w: data dir %s has format %d; this lisa reads formats up to %d: upgrade lisa or restore a backup of the older format",
			ErrNewerFormat, dir, format, FormatVersion)
	}
	if format == 0 {
		return setFormat(db, FormatVersion)
	}
	for ; format < FormatVersion; format++ {
		m := migrations[format-1]
		if err := m.run(db, now); err != nil {
			return fmt.Errorf("persistence: migrate data dir %s from format %d (%s): %w", dir, format, m.what, err)
		}
		if err := setFormat(db, format+1); err != nil {
			return err
		}
	}
	return nil
}

// setFormat records format durably.
func setFormat(db *badger.DB, format int) error {
	if err := db.Update(func(txn *badger.Txn) error {
		return txn.Set(formatKey, binary.BigEndian.AppendUint64(nil, uint64(format)))
	}); err != nil {
		return err
	}
	return db.Sync()
}

// Format returns the data dir's format: FormatVersion once it is open.
func (s *Badger) Format() int { return s.format }
