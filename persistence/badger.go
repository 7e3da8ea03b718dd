package persistence

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"
	"google.golang.org/protobuf/proto"

	"github.com/lisabot/lisa/messages"
	"github.com/lisabot/lisa/messages/roompb"
)

// BadgerOptions tunes the Badger store. The zero value is the production
// setting.
type BadgerOptions struct {
	// Logger receives Badger's warnings and errors. Nil discards them.
	Logger *slog.Logger
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Retention is how long routed markers, usage records and budget
	// notices are kept (runtime.retention_days); CommitSync routes no
	// event sent longer ago (see SweepRetention). Zero keeps them for
	// ever and routes events of any age, up to a floor an earlier sweep
	// left.
	Retention time.Duration
}

// Badger is the production Store: one embedded Badger database. Every
// acknowledged write survives a process kill. Snapshots, compaction,
// inbox removals and the clean-stop mark wait for a sync of the log before
// they return; CommitSync, journal events and bot events do not, and are
// made durable by the next sync: a durable write's, a barrier's
// ([Badger.Barrier], [Badger.Sync]) or, at the latest, one 10 ms later
// (see groupCommit).
type Badger struct {
	db     *badger.DB
	dec    decoder
	inbox  *inboxIndex
	writes *groupCommit
	logs   *logSyncer
	format int
	closed atomic.Bool
	// now, retention and log are BadgerOptions.Now, Retention and
	// Logger.
	now       func() time.Time
	retention time.Duration
	log       *slog.Logger
	sweep     sweepState
}

var _ Store = (*Badger)(nil)

// failedCloseWait bounds Close of a store whose sync failed.
const failedCloseWait = 2 * time.Second

// emptyValueLog is the text of the error (ristretto's z.NewFile, wrapped
// without %w) with which Badger fails to open a store whose newest
// value-log file is empty.
const emptyValueLog = "Create a new file"

// OpenBadger opens (creating if needed) the database in dir. A data dir
// of an older format is migrated to [FormatVersion] first; one of a newer
// format fails with [ErrNewerFormat], unchanged.
func OpenBadger(dir string, o BadgerOptions) (*Badger, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	opts := badgerOptions(dir, o)
	db, err := badger.Open(opts)
	if err != nil && strings.Contains(err.Error(), emptyValueLog) {
		// A crash right after Badger created a value-log file, before it
		// wrote the file's header, leaves it empty; the next open writes
		// the header and then fails anyway (badger v4.9.6 returns the
		// "new file" marker as an error). The file is whole now: open
		// once more instead of failing a start after a crash.
		badgerLogger{o.Logger}.Warningf("the store's newest value-log file was empty after a crash; opening again")
		db, err = badger.Open(opts)
	}
	if err != nil {
		return nil, fmt.Errorf("persistence: open badger at %s: %w", dir, err)
	}
	if err := openFormat(db, dir, o.Now()); err != nil {
		_ = db.Close()
		return nil, err
	}
	inbox, err := loadInboxIndex(db)
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("persistence: read inboxes at %s: %w", dir, err)
	}
	logs := newLogSyncer(dir)
	s := &Badger{db: db, inbox: inbox, logs: logs, format: FormatVersion, now: o.Now, retention: o.Retention, log: o.Logger}
	s.writes = startGroupCommit(db, logs.sync, func(err error) {
		if o.Logger != nil {
			o.Logger.Error("the store could not sync to disk; it accepts no more writes and nothing more is sent",
				"code", "store_sync_failed", "err", err.Error())
		}
	})
	return s, nil
}

// badgerOptions are the options Lisa opens the database in dir with.
func badgerOptions(dir string, o BadgerOptions) badger.Options {
	return badger.DefaultOptions(dir).
		// Synced by groupCommit, once for many commits, and never while a
		// commit waits (see groupCommit).
		WithSyncWrites(false).
		WithLogger(badgerLogger{o.Logger}).
		// A chat bot's state is small: modest memory instead of Badger's
		// server-sized defaults.
		WithMemTableSize(8 << 20).
		WithNumMemtables(2).
		WithBlockCacheSize(8 << 20).
		WithIndexCacheSize(4 << 20).
		WithValueLogFileSize(64 << 20).
		WithNumCompactors(2)
}

// Failed is closed when a sync of the store failed. From then on every
// write, Sync and barrier fails with ErrSyncFailed; the process must stop
// and start again from what is on disk.
func (s *Badger) Failed() <-chan struct{} { return s.writes.failedCh }

// Err returns the store's sync failure (wrapping ErrSyncFailed), or nil.
func (s *Badger) Err() error { return s.writes.err() }

// Size returns the database's size on disk (LSM tree plus value log).
func (s *Badger) Size() int64 {
	if s.closed.Load() {
		return 0
	}
	lsm, vlog := s.db.Size()
	return lsm + vlog
}

// Close closes the database. It is safe to call more than once.
func (s *Badger) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.writes.stop()
	s.logs.close()
	if failed := s.Err(); failed != nil {
		// Badger flushes its memtables on close and retries a flush
		// whose table cannot be synced forever: give up waiting. The
		// process is about to exit; what is on disk is what the next
		// start replays.
		closed := make(chan error, 1)
		go func() { closed <- s.db.Close() }()
		select {
		case err := <-closed:
			return errors.Join(failed, err)
		case <-time.After(failedCloseWait):
			return fmt.Errorf("%w; Badger did not close within %v", failed, failedCloseWait)
		}
	}
	return s.db.Close()
}

// update runs fn in a durable read-write transaction. Concurrent writes
// share transactions (see groupCommit); each returns once its own write is
// synced to disk.
func (s *Badger) update(fn func(txn *badger.Txn) error) error {
	if s.closed.Load() {
		return ErrClosed
	}
	return s.writes.update(fn)
}

// updateLazy runs fn in a read-write transaction and returns once it is
// committed, before it is synced (see groupCommit).
func (s *Badger) updateLazy(fn func(txn *badger.Txn) error) error {
	if s.closed.Load() {
		return ErrClosed
	}
	return s.writes.updateLazy(fn)
}

// Sync implements Store: it returns once every write acknowledged before
// the call is synced to disk.
func (s *Badger) Sync() error { return s.Barrier()() }

// Barrier implements Store.
func (s *Badger) Barrier() func() error {
	if s.closed.Load() {
		return func() error { return ErrClosed }
	}
	return s.writes.barrier()
}

func (s *Badger) view(fn func(txn *badger.Txn) error) error {
	if s.closed.Load() {
		return ErrClosed
	}
	return s.db.View(fn)
}

// AppendEvent implements Journal.
func (s *Badger) AppendEvent(name string, index uint64, ev proto.Message) error {
	val, err := encodeAny(ev)
	if err != nil {
		return err
	}
	k := indexedKey('j', name, index)
	room, eventID, takes := TakenFromInbox(ev)
	return s.updateLazy(func(txn *badger.Txn) error {
		if _, err := txn.Get(k); err == nil {
			return fmt.Errorf("%w: %s index %d", ErrConflict, messages.ActorLogID(name), index)
		} else if !errors.Is(err, badger.ErrKeyNotFound) {
			return err
		}
		if takes {
			if err := removeInbox(txn, room, eventID); err != nil {
				return err
			}
		}
		return txn.Set(k, val)
	})
}

// Events implements Journal. Values are decoded where Badger holds them,
// without a copy.
func (s *Badger) Events(name string, from, to uint64, fn func(uint64, proto.Message) error) error {
	prefix := prefixOf('j', name)
	return s.view(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
		defer it.Close()
		want := from
		for it.Seek(indexedKey('j', name, from)); it.ValidForPrefix(prefix); it.Next() {
			item := it.Item()
			idx := indexOf(item.Key())
			if to != 0 && idx >= to {
				break
			}
			if idx != want {
				return gapError(name, want, idx)
			}
			var msg proto.Message
			err := item.Value(func(v []byte) (err error) {
				msg, err = s.dec.decode(v)
				return err
			})
			if err != nil {
				return fmt.Errorf("%s index %d: %w", messages.ActorLogID(name), idx, err)
			}
			if err := fn(idx, msg); err != nil {
				return err
			}
			want++
		}
		return nil
	})
}

// SaveSnapshot implements Journal.
func (s *Badger) SaveSnapshot(name string, index uint64, snap proto.Message) error {
	val, err := encodeAny(snap)
	if err != nil {
		return err
	}
	return s.update(func(txn *badger.Txn) error {
		return txn.Set(indexedKey('s', name, index), val)
	})
}

// LatestSnapshot implements Journal.
func (s *Badger) LatestSnapshot(name string) (proto.Message, uint64, bool, error) {
	var (
		msg   proto.Message
		index uint64
		ok    bool
	)
	prefix := prefixOf('s', name)
	err := s.view(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix, Reverse: true})
		defer it.Close()
		it.Seek(append(bytes.Clone(prefix), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff))
		if !it.ValidForPrefix(prefix) {
			return nil
		}
		item := it.Item()
		index = indexOf(item.Key())
		if err := item.Value(func(v []byte) (err error) {
			msg, err = s.dec.decode(v)
			return err
		}); err != nil {
			return fmt.Errorf("snapshot %s index %d: %w", messages.ActorLogID(name), index, err)
		}
		ok = true
		return nil
	})
	return msg, index, ok, err
}

// DeleteEvents implements Journal.
func (s *Badger) DeleteEvents(name string, inclusiveTo uint64) error {
	return s.deleteTo('j', name, inclusiveTo)
}

// DeleteSnapshots implements Journal.
func (s *Badger) DeleteSnapshots(name string, inclusiveTo uint64) error {
	return s.deleteTo('s', name, inclusiveTo)
}

func (s *Badger) deleteTo(kind byte, name string, inclusiveTo uint64) error {
	prefix := prefixOf(kind, name)
	var keys [][]byte
	err := s.view(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
		defer it.Close()
		for it.Rewind(); it.ValidForPrefix(prefix); it.Next() {
			k := it.Item().KeyCopy(nil)
			if indexOf(k) > inclusiveTo {
				break
			}
			keys = append(keys, k)
		}
		return nil
	})
	if err != nil {
		return err
	}
	// Deletions are idempotent, so splitting them over transactions is safe.
	const chunk = 1000
	for len(keys) > 0 {
		n := min(chunk, len(keys))
		part := keys[:n]
		keys = keys[n:]
		if err := s.update(func(txn *badger.Txn) error {
			for _, k := range part {
				if err := txn.Delete(k); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return err
		}
	}
	return nil
}

// Cursor implements Ledger.
func (s *Badger) Cursor() (*roompb.SyncCursor, error) {
	cur := &roompb.SyncCursor{}
	err := s.view(func(txn *badger.Txn) error {
		item, err := txn.Get([]byte{'c'})
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error {
			if err := proto.Unmarshal(v, cur); err != nil {
				return fmt.Errorf("%w: sync cursor: %v", ErrCorrupt, err)
			}
			return nil
		})
	})
	return cur, err
}

// CommitSync implements Ledger.
func (s *Badger) CommitSync(cur *roompb.SyncCursor, cands []*roompb.Candidate) ([]*roompb.Candidate, error) {
	curVal, err := proto.Marshal(cur)
	if err != nil {
		return nil, err
	}
	for _, c := range cands {
		if err := validateCandidate(c); err != nil {
			return nil, err
		}
	}
	var (
		accepted []*roompb.Candidate
		tooOld   []*roompb.Candidate
		floorMs  int64
	)
	err = s.updateLazy(func(txn *badger.Txn) error {
		accepted, tooOld = accepted[:0], tooOld[:0]
		seq, err := getUint(txn, []byte{'q'})
		if err != nil {
			return err
		}
		floor, err := s.routeFloor(txn)
		if err != nil {
			return err
		}
		floorMs = floor
		for _, c := range cands {
			marker := key('n', c.GetRoomId(), c.GetEventId())
			if _, err := txn.Get(marker); err == nil {
				continue
			} else if !errors.Is(err, badger.ErrKeyNotFound) {
				return err
			}
			if c.GetOriginTsMs() < floor {
				// Older than the retention: its marker may be gone
				// (see SweepRetention), so it may have been routed.
				tooOld = append(tooOld, c)
				continue
			}
			seq++
			entry := proto.Clone(c).(*roompb.Candidate)
			entry.InboxSeq = seq
			val, err := proto.Marshal(entry)
			if err != nil {
				return err
			}
			if err := txn.Set(indexedKey('i', c.GetRoomId(), seq), val); err != nil {
				return err
			}
			if err := txn.Set(marker, markerValue(seq, c.GetOriginTsMs())); err != nil {
				return err
			}
			accepted = append(accepted, entry)
		}
		if err := txn.Set([]byte{'q'}, binary.BigEndian.AppendUint64(nil, seq)); err != nil {
			return err
		}
		return txn.Set([]byte{'c'}, curVal)
	})
	if err != nil {
		return nil, err
	}
	// Before returning, so before any room is nudged (see inboxIndex).
	for _, c := range accepted {
		s.inbox.mark(c.GetRoomId())
	}
	for _, c := range tooOld {
		if s.log != nil {
			s.log.Info("event older than runtime.retention_days not routed: it is never answered", "code", "event_too_old",
				"room", messages.RoomID(c.GetRoomId()), "event", messages.EventID(c.GetEventId()),
				"origin_ts_ms", c.GetOriginTsMs(), "floor_ms", floorMs)
		}
	}
	return accepted, nil
}

// Inbox implements Ledger.
func (s *Badger) Inbox(room string) ([]*roompb.Candidate, error) {
	gen, maybe := s.inbox.check(room)
	if !maybe {
		if s.closed.Load() {
			return nil, ErrClosed
		}
		return nil, nil
	}
	out, err := s.readInbox(room)
	if err == nil && len(out) == 0 {
		s.inbox.readEmpty(room, gen)
	}
	return out, err
}

// readInbox reads room's inbox from the store.
func (s *Badger) readInbox(room string) ([]*roompb.Candidate, error) {
	var out []*roompb.Candidate
	prefix := prefixOf('i', room)
	err := s.view(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
		defer it.Close()
		for it.Rewind(); it.ValidForPrefix(prefix); it.Next() {
			c := &roompb.Candidate{}
			if err := it.Item().Value(func(v []byte) error { return proto.Unmarshal(v, c) }); err != nil {
				return fmt.Errorf("%w: inbox entry: %v", ErrCorrupt, err)
			}
			out = append(out, c)
		}
		return nil
	})
	return out, err
}

// RemoveInbox implements Ledger.
func (s *Badger) RemoveInbox(room, eventID string) error {
	return s.update(func(txn *badger.Txn) error { return removeInbox(txn, room, eventID) })
}

// removeInbox deletes the inbox entry of (room, eventID) in txn, keeping
// its routed marker.
func removeInbox(txn *badger.Txn, room, eventID string) error {
	item, err := txn.Get(key('n', room, eventID))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	var seq uint64
	if err := item.Value(func(v []byte) (err error) {
		seq, _, _, err = decodeMarker(v)
		return err
	}); err != nil {
		return err
	}
	return txn.Delete(indexedKey('i', room, seq))
}

// sessionKey holds a fingerprint of the Matrix access token the last
// process used (SwapSessionFingerprint).
var sessionKey = []byte{'t'}

// SwapSessionFingerprint records fp, a fingerprint of this process's
// Matrix access token (never the token: a one-way digest of it), durably,
// and returns the one the previous process recorded ("" if none). A
// homeserver that scopes transaction IDs to the access token (Synapse
// before 1.81) recognises a send of an earlier process again only if the
// token is the same.
func (s *Badger) SwapSessionFingerprint(fp string) (string, error) {
	prev := ""
	err := s.update(func(txn *badger.Txn) error {
		item, err := txn.Get(sessionKey)
		switch {
		case errors.Is(err, badger.ErrKeyNotFound):
		case err != nil:
			return err
		default:
			v, err := item.ValueCopy(nil)
			if err != nil {
				return err
			}
			prev = string(v)
		}
		return txn.Set(sessionKey, []byte(fp))
	})
	return prev, err
}

// cleanStopKey marks a store whose last user stopped cleanly.
var cleanStopKey = []byte{'x'}

// MarkCleanStop records, durably, that Lisa stopped gracefully with no
// check of the homeserver's answers pending, so the next start may trust
// its first /sync. Call it last before Close.
func (s *Badger) MarkCleanStop() error {
	return s.update(func(txn *badger.Txn) error { return txn.Set(cleanStopKey, []byte{1}) })
}

// TakeCleanStop reports whether the previous run marked a clean stop, and
// removes the mark durably, so that a crash of this run is not taken for
// a clean stop at the next start.
func (s *Badger) TakeCleanStop() (bool, error) {
	found := false
	err := s.update(func(txn *badger.Txn) error {
		_, err := txn.Get(cleanStopKey)
		switch {
		case errors.Is(err, badger.ErrKeyNotFound):
			found = false
			return nil
		case err != nil:
			return err
		}
		found = true
		return txn.Delete(cleanStopKey)
	})
	return found, err
}

// RecordBotEvent implements BotEvents. An event that answers another is
// also indexed by the event it answers (see RepliedTo), in the same write.
func (s *Badger) RecordBotEvent(room, eventID, inReplyTo string) error {
	return s.updateLazy(func(txn *badger.Txn) error {
		if err := txn.Set(key('b', room, eventID), []byte(inReplyTo)); err != nil {
			return err
		}
		if inReplyTo == "" {
			return nil
		}
		return txn.Set(key('a', room, inReplyTo), []byte(eventID))
	})
}

// RepliedTo implements BotEvents.
func (s *Badger) RepliedTo(room, invoking string) (string, error) {
	reply := ""
	err := s.view(func(txn *badger.Txn) error {
		item, err := txn.Get(key('a', room, invoking))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		v, err := item.ValueCopy(nil)
		reply = string(v)
		return err
	})
	return reply, err
}

// IsBotEvent implements BotEvents.
func (s *Badger) IsBotEvent(room, eventID string) (bool, error) {
	found := false
	err := s.view(func(txn *badger.Txn) error {
		_, err := txn.Get(key('b', room, eventID))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		found = err == nil
		return err
	})
	return found, err
}

func getUint(txn *badger.Txn, k []byte) (uint64, error) {
	item, err := txn.Get(k)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	var n uint64
	err = item.Value(func(v []byte) error {
		if len(v) != 8 {
			return fmt.Errorf("%w: counter %q", ErrCorrupt, k)
		}
		n = binary.BigEndian.Uint64(v)
		return nil
	})
	return n, err
}

// badgerLogger routes Badger's logging into slog; its Info chatter is
// dropped.
type badgerLogger struct{ l *slog.Logger }

func (b badgerLogger) Errorf(f string, a ...any) {
	if b.l != nil {
		b.l.Error(fmt.Sprintf(f, a...), "lib", "badger")
	}
}

func (b badgerLogger) Warningf(f string, a ...any) {
	if b.l != nil {
		b.l.Warn(fmt.Sprintf(f, a...), "lib", "badger")
	}
}

func (badgerLogger) Infof(string, ...any)  {}
func (badgerLogger) Debugf(string, ...any) {}
