package persistence

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// Retention: routed markers ('n'), usage records ('u') and budget notices
// ('v') are kept for BadgerOptions.Retention and then swept
// ([Badger.SweepRetention]). Removing a routed marker is safe only because
// the event it names can never be routed again:
//
//   - every marker carries the event's origin_server_ts (markerValue);
//   - a sweep raises the floor (key 'w', be64(Unix ms)) to now minus the
//     retention, in the same transaction that deletes markers, and deletes
//     only markers whose time is below the floor it writes;
//   - CommitSync routes no candidate whose origin_server_ts is below the
//     floor, nor below now minus the retention (routeFloor).
//
// The stored floor only ever rises, so a clock that steps back after a
// sweep does not let an event whose marker is gone through. An event
// without a timestamp counts as older than every floor.
//
// Lisa's replies ('b') and the index of the questions they answer ('a',
// RepliedTo) are never swept: they are what recognises a question answered
// after a backup was taken, however old.

// floorKey holds the retention floor: be64(Unix ms).
var floorKey = []byte{'w'}

// markerLen is the length of a routed marker's value: be64(seq) of the
// inbox entry, then be64(origin_server_ts in Unix ms) of the event. Format
// 2 wrote be64(seq) alone (legacyMarkerLen).
const (
	markerLen       = 16
	legacyMarkerLen = 8
)

// markerValue is the routed marker of the inbox entry seq for an event
// sent at originMs.
func markerValue(seq uint64, originMs int64) []byte {
	b := binary.BigEndian.AppendUint64(make([]byte, 0, markerLen), seq)
	return binary.BigEndian.AppendUint64(b, uint64(max(originMs, 0)))
}

// decodeMarker reads a routed marker. timed is false for a marker of
// format 2 (no time), which a sweep never removes.
func decodeMarker(v []byte) (seq uint64, atMs int64, timed bool, err error) {
	switch len(v) {
	case markerLen:
		return binary.BigEndian.Uint64(v), int64(binary.BigEndian.Uint64(v[8:])), true, nil
	case legacyMarkerLen:
		return binary.BigEndian.Uint64(v), 0, false, nil
	}
	return 0, 0, false, fmt.Errorf("%w: routed marker of %d bytes", ErrCorrupt, len(v))
}

// routeFloor returns the origin_server_ts (Unix ms) below which CommitSync
// routes nothing: the stored floor, or now minus the retention if later.
func (s *Badger) routeFloor(txn *badger.Txn) (int64, error) {
	floor, err := getUint(txn, floorKey)
	if err != nil {
		return 0, err
	}
	f := int64(floor)
	if s.retention > 0 {
		f = max(f, s.now().Add(-s.retention).UnixMilli())
	}
	return f, nil
}

// RetentionFloor returns the stored retention floor: events sent before it
// are never routed, and their markers may be gone. Zero before the first
// sweep.
func (s *Badger) RetentionFloor() (time.Time, error) {
	var floor uint64
	err := s.view(func(txn *badger.Txn) (err error) {
		floor, err = getUint(txn, floorKey)
		return err
	})
	if err != nil || floor == 0 {
		return time.Time{}, err
	}
	return time.UnixMilli(int64(floor)), nil
}

// SweepResult is what one sweep pass did.
type SweepResult struct {
	// Floor is the retention floor after the pass.
	Floor time.Time
	// Markers, Usage and Notices count the routed markers, usage records
	// and budget notices removed.
	Markers, Usage, Notices int
	// Done: the pass reached the end of every keyspace it sweeps; a
	// pass that is not done leaves work for the next.
	Done bool
}

// sweepState is where the scan of routed markers resumes.
type sweepState struct {
	mu   sync.Mutex
	from []byte // next marker key to examine; nil: from the first
}

// SweepRetention makes one bounded pass of the retention sweep at now: it
// raises the retention floor to now minus the retention, and removes up
// to limit routed markers of events sent before the floor, having
// examined at most limit markers (the scan resumes where the last pass
// ended), and up to limit usage records and budget notices of days more
// than a day before the floor's (a day of slack for the persona's time
// zone). Floor and removals are one atomic write. With no retention
// configured it does nothing.
func (s *Badger) SweepRetention(now time.Time, limit int) (SweepResult, error) {
	if s.retention <= 0 {
		return SweepResult{Done: true}, nil
	}
	if limit <= 0 {
		return SweepResult{}, errors.New("persistence: sweep limit must be positive")
	}
	s.sweep.mu.Lock()
	defer s.sweep.mu.Unlock()
	floor := now.Add(-s.retention).UnixMilli()
	var (
		res                       SweepResult
		markers, usage, notices   [][]byte
		next                      []byte
		markersDone, daysDone     bool
		usageDone, noticesDone    bool
		stored                    uint64
		removed                   int
		prefixN, prefixU, prefixV = []byte{'n', sep}, []byte{'u', sep}, []byte{'v', sep}
	)
	err := s.view(func(txn *badger.Txn) error {
		var err error
		if stored, err = getUint(txn, floorKey); err != nil {
			return err
		}
		floor = max(floor, int64(stored))
		markers, next, markersDone, err = oldMarkers(txn, prefixN, s.sweep.from, floor, limit)
		if err != nil {
			return err
		}
		cutDay := time.UnixMilli(floor).UTC().AddDate(0, 0, -1).Format(time.DateOnly)
		if usage, usageDone, err = oldDays(txn, prefixU, cutDay, limit); err != nil {
			return err
		}
		notices, noticesDone, err = oldDays(txn, prefixV, cutDay, limit)
		return err
	})
	if err != nil {
		return res, err
	}
	daysDone = usageDone && noticesDone
	if int64(stored) != floor || len(markers)+len(usage)+len(notices) > 0 {
		err = s.updateLazy(func(txn *badger.Txn) error {
			removed = 0
			// The floor first: a CommitSync sharing this transaction
			// after it refuses what the deletions would let through.
			if err := txn.Set(floorKey, binary.BigEndian.AppendUint64(nil, uint64(floor))); err != nil {
				return err
			}
			for _, k := range markers {
				item, err := txn.Get(k)
				if errors.Is(err, badger.ErrKeyNotFound) {
					continue
				} else if err != nil {
					return err
				}
				var (
					old bool
					seq uint64
				)
				if err := item.Value(func(v []byte) error {
					var at int64
					var timed bool
					var err error
					seq, at, timed, err = decodeMarker(v)
					old = timed && at < floor
					return err
				}); err != nil {
					return err
				}
				if old {
					// A marker whose entry is still in the inbox stays:
					// the room has not taken the event in, and removing
					// the entry needs the marker (removeInbox).
					if room, _, ok := bytes.Cut(k[2:], []byte{sep}); ok {
						if _, err := txn.Get(indexedKey('i', string(room), seq)); err == nil {
							old = false
						} else if !errors.Is(err, badger.ErrKeyNotFound) {
							return err
						}
					}
				}
				if old {
					if err := txn.Delete(k); err != nil {
						return err
					}
					removed++
				}
			}
			for _, k := range append(usage, notices...) {
				if err := txn.Delete(k); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return res, err
		}
	}
	s.sweep.from = next
	res.Floor = time.UnixMilli(floor)
	res.Markers, res.Usage, res.Notices = removed, len(usage), len(notices)
	res.Done = markersDone && daysDone
	return res, nil
}

// oldMarkers examines up to limit routed markers from the key from (the
// first if nil) and returns those with a time before floor, the key to
// resume at, and whether the scan reached the last marker.
func oldMarkers(txn *badger.Txn, prefix, from []byte, floor int64, limit int) (old [][]byte, next []byte, done bool, err error) {
	it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix, PrefetchValues: false})
	defer it.Close()
	start := prefix
	if from != nil {
		start = from
	}
	seen := 0
	for it.Seek(start); it.ValidForPrefix(prefix); it.Next() {
		item := it.Item()
		if seen == limit {
			return old, item.KeyCopy(nil), false, nil
		}
		seen++
		var at int64
		var timed bool
		if err := item.Value(func(v []byte) (err error) {
			_, at, timed, err = decodeMarker(v)
			return err
		}); err != nil {
			return nil, nil, false, err
		}
		if timed && at < floor {
			old = append(old, item.KeyCopy(nil))
		}
	}
	return old, nil, true, nil
}

// oldDays returns up to limit keys under prefix (usage records or budget
// notices, whose keys start with the day) of days before cutDay, and
// whether no older key is left after them.
func oldDays(txn *badger.Txn, prefix []byte, cutDay string, limit int) (old [][]byte, done bool, err error) {
	it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix, PrefetchValues: false})
	defer it.Close()
	for it.Rewind(); it.ValidForPrefix(prefix); it.Next() {
		k := it.Item().Key()
		day, _, _ := bytes.Cut(k[len(prefix):], []byte{sep})
		if string(day) >= cutDay {
			return old, true, nil
		}
		if len(old) == limit {
			return old, false, nil
		}
		old = append(old, it.Item().KeyCopy(nil))
	}
	return old, true, nil
}

// Sweeper runs the retention sweep of a store in the background, off the
// hot path: one bounded pass every Every, and passes Pause apart while a
// sweep has more to do.
type Sweeper struct {
	store *Badger
	o     SweeperOptions

	mu      sync.Mutex
	stopped bool
	cancel  func() bool
	total   SweepResult    // removals of the sweep under way
	running sync.WaitGroup // the pass under way, which Stop waits for
}

// SweeperOptions configure a [Sweeper].
type SweeperOptions struct {
	// First is the time before the first pass.
	First time.Duration
	// Every is the time between two complete sweeps.
	Every time.Duration
	// Pause is the time between two passes of one sweep.
	Pause time.Duration
	// Limit bounds the keys one pass examines and removes per keyspace.
	Limit int
	// Now is the clock; AfterFunc runs f after d and returns a function
	// that cancels it (both injected: tests drive them).
	Now       func() time.Time
	AfterFunc func(d time.Duration, f func()) (stop func() bool)
	// Logger receives one line per complete sweep (what it removed) and
	// failures. Nil discards them.
	Logger *slog.Logger
}

// Sweep defaults.
const (
	// DefaultSweepEvery is the time between two complete sweeps.
	DefaultSweepEvery = time.Hour
	// DefaultSweepPause is the time between two passes of one sweep.
	DefaultSweepPause = time.Second
	// DefaultSweepLimit bounds one pass: about a millisecond of work.
	DefaultSweepLimit = 1000
)

// StartSweeper starts sweeping store: the first pass runs First from now
// (in the clock's goroutine), then as SweeperOptions say. Stop it before
// closing the store.
func StartSweeper(store *Badger, o SweeperOptions) *Sweeper {
	if o.Every <= 0 {
		o.Every = DefaultSweepEvery
	}
	if o.Pause <= 0 {
		o.Pause = DefaultSweepPause
	}
	if o.Limit <= 0 {
		o.Limit = DefaultSweepLimit
	}
	w := &Sweeper{store: store, o: o}
	w.schedule(o.First)
	return w
}

// schedule arms the next pass after d unless the sweeper is stopped.
func (w *Sweeper) schedule(d time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.stopped {
		w.cancel = w.o.AfterFunc(d, w.pass)
	}
}

// pass runs one pass and arms the next.
func (w *Sweeper) pass() {
	w.mu.Lock()
	if w.stopped {
		w.mu.Unlock()
		return
	}
	w.running.Add(1)
	w.mu.Unlock()
	defer w.running.Done()
	res, err := w.store.SweepRetention(w.o.Now(), w.o.Limit)
	if err != nil {
		if w.o.Logger != nil && !errors.Is(err, ErrClosed) {
			w.o.Logger.Warn("retention sweep failed; trying again later", "code", "retention_sweep_failed", "err", err.Error())
		}
		w.schedule(w.o.Every)
		return
	}
	w.mu.Lock()
	w.total.Markers += res.Markers
	w.total.Usage += res.Usage
	w.total.Notices += res.Notices
	total := w.total
	if res.Done {
		w.total = SweepResult{}
	}
	w.mu.Unlock()
	if !res.Done {
		w.schedule(w.o.Pause)
		return
	}
	if w.o.Logger != nil {
		w.o.Logger.Info("retention sweep done", "code", "retention_sweep",
			"routed_markers_removed", total.Markers, "usage_records_removed", total.Usage,
			"budget_notices_removed", total.Notices, "floor_ms", res.Floor.UnixMilli())
	}
	w.schedule(w.o.Every)
}

// Stop cancels the next pass and waits for a pass under way to end. A nil
// Sweeper is stopped already.
func (w *Sweeper) Stop() {
	if w == nil {
		return
	}
	w.mu.Lock()
	w.stopped = true
	if w.cancel != nil {
		w.cancel()
	}
	w.mu.Unlock()
	w.running.Wait()
}
