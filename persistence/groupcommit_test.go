package persistence

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"google.golang.org/protobuf/proto"

	"github.com/lisabot/lisa/messages/roompb"
)

func openTestDB(t *testing.T) *badger.DB {
	t.Helper()
	db, err := badger.Open(badger.DefaultOptions(t.TempDir()).WithSyncWrites(true).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func set(k, v string) func(*badger.Txn) error {
	return func(txn *badger.Txn) error { return txn.Set([]byte(k), []byte(v)) }
}

func get(t *testing.T, db *badger.DB, k string) (string, bool) {
	t.Helper()
	var out string
	found := false
	err := db.View(func(txn *badger.Txn) error {
		item, err := txn.Get([]byte(k))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		found = true
		b, err := item.ValueCopy(nil)
		out = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out, found
}

// A failing write in a group is reported to its caller only; its partial
// writes are not committed and the other writes of the group are.
func TestGroupCommitIsolatesAFailingWrite(t *testing.T) {
	db := openTestDB(t)
	g := &groupCommit{db: db}
	boom := errors.New("boom")
	ops := []*writeOp{
		{fn: set("a", "1"), done: make(chan error, 1)},
		{fn: func(txn *badger.Txn) error {
			if err := txn.Set([]byte("partial"), []byte("x")); err != nil {
				return err
			}
			return boom
		}, done: make(chan error, 1)},
		{fn: set("b", "2"), done: make(chan error, 1)},
	}
	g.commit(ops)
	if err := <-ops[0].done; err != nil {
		t.Errorf("first write: %v", err)
	}
	if err := <-ops[1].done; !errors.Is(err, boom) {
		t.Errorf("failing write got %v, want its own error", err)
	}
	if err := <-ops[2].done; err != nil {
		t.Errorf("third write: %v", err)
	}
	if v, ok := get(t, db, "a"); !ok || v != "1" {
		t.Error("a lost")
	}
	if v, ok := get(t, db, "b"); !ok || v != "2" {
		t.Error("b lost")
	}
	if _, ok := get(t, db, "partial"); ok {
		t.Error("the failing write's partial write was committed")
	}
}

// Writes in one group see the writes before them, as if run serially.
func TestGroupCommitRunsAGroupSerially(t *testing.T) {
	db := openTestDB(t)
	g := &groupCommit{db: db}
	incr := func(txn *badger.Txn) error {
		n := 0
		if item, err := txn.Get([]byte("n")); err == nil {
			b, _ := item.ValueCopy(nil)
			fmt.Sscanf(string(b), "%d", &n)
		} else if !errors.Is(err, badger.ErrKeyNotFound) {
			return err
		}
		return txn.Set([]byte("n"), fmt.Appendf(nil, "%d", n+1))
	}
	var ops []*writeOp
	for range 10 {
		ops = append(ops, &writeOp{fn: incr, done: make(chan error, 1)})
	}
	g.commit(ops)
	for _, op := range ops {
		if err := <-op.done; err != nil {
			t.Fatal(err)
		}
	}
	if v, _ := get(t, db, "n"); v != "10" {
		t.Fatalf("n = %q, want 10", v)
	}
}

// Many rooms appending at once: every acknowledged event is there after a
// reopen, and a duplicate index is still refused.
func TestConcurrentAppendsAreAllDurable(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenBadger(dir, BadgerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const rooms, events = 32, 20
	var wg sync.WaitGroup
	for r := range rooms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("app/rooms/!r%d:x", r)
			for i := range events {
				if err := s.AppendEvent(name, uint64(i), &roompb.InvocationStarted{EventId: "$e", Attempt: uint32(i)}); err != nil {
					t.Error(err)
					return
				}
			}
			if err := s.AppendEvent(name, 0, &roompb.InvocationStarted{}); !errors.Is(err, ErrConflict) {
				t.Errorf("duplicate index: %v", err)
			}
		}()
	}
	wg.Wait()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendEvent("app/rooms/!r0:x", 99, &roompb.InvocationStarted{}); !errors.Is(err, ErrClosed) {
		t.Errorf("append after close: %v", err)
	}
	s, err = OpenBadger(dir, BadgerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for r := range rooms {
		n := 0
		if err := s.Events(fmt.Sprintf("app/rooms/!r%d:x", r), 0, 0, func(uint64, proto.Message) error { n++; return nil }); err != nil {
			t.Fatal(err)
		}
		if n != events {
			t.Errorf("room %d has %d events, want %d", r, n, events)
		}
	}
}
