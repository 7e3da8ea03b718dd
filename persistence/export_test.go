package persistence

import (
	"time"

	"github.com/dgraph-io/badger/v4"
)

// NewLogSyncerForTest returns the sync a Badger store in dir would run
// (see logSyncer) and a function that closes its files.
func NewLogSyncerForTest(dir string) (sync func() error, close func()) {
	l := newLogSyncer(dir)
	return l.sync, l.close
}

// FormatOnDiskForTest returns the format recorded in the closed store in
// dir, as readFormat reads it.
func FormatOnDiskForTest(dir string) (int, error) {
	db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil))
	if err != nil {
		return 0, err
	}
	defer db.Close()
	return readFormat(db)
}

// SetFormatForTest records format in the closed store in dir.
func SetFormatForTest(dir string, format int) error {
	db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil))
	if err != nil {
		return err
	}
	defer db.Close()
	return setFormat(db, format)
}

// MigrateOnceForTest runs the one migration from format from on the
// closed store in dir and records format from+1.
func MigrateOnceForTest(dir string, from int, now time.Time) error {
	db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil))
	if err != nil {
		return err
	}
	defer db.Close()
	if err := migrations[from-1].run(db, now); err != nil {
		return err
	}
	return setFormat(db, from+1)
}

// Migrations is the number of steps in the migration table.
var Migrations = len(migrations)

// BackupRawForTest writes a backup of the closed store in dir without
// checking its format, as a build of that format would.
func BackupRawForTest(dir, path string) error {
	db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil))
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = (&Badger{db: db}).BackupTo(path)
	return err
}

// KeysForTest counts the keys of kind ('n', 'u', 'v', …) in the open
// store s.
func KeysForTest(s *Badger, kind byte) (int, error) {
	n := 0
	err := s.view(func(txn *badger.Txn) error {
		prefix := []byte{kind, sep}
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
		defer it.Close()
		for it.Rewind(); it.ValidForPrefix(prefix); it.Next() {
			n++
		}
		return nil
	})
	return n, err
}

// MarkerBytesForTest returns the stored key and value lengths of the
// routed marker of (room, eventID).
func MarkerBytesForTest(s *Badger, room, eventID string) (keyLen, valueLen int, err error) {
	err = s.view(func(txn *badger.Txn) error {
		k := key('n', room, eventID)
		item, err := txn.Get(k)
		if err != nil {
			return err
		}
		keyLen, valueLen = len(k), int(item.ValueSize())
		return nil
	})
	return keyLen, valueLen, err
}
