package persistence

import (
	"errors"
	"sync"

	"github.com/dgraph-io/badger/v4"
)

// maxGroup bounds how many writes share one transaction (and one sync).
const maxGroup = 256

// errGroupMember aborts a shared transaction when one of its writes fails.
var errGroupMember = errors.New("persistence: a write in the group failed")

// writeOp is one caller's read-modify-write, waiting for its commit.
type writeOp struct {
	fn   func(txn *badger.Txn) error
	done chan error
}

// groupCommit serialises every read-modify-write of a Badger store
// through one goroutine, and commits the writes that queued up while the
// previous commit was syncing in one transaction: one fsync for many
// rooms instead of one each (Badger syncs once per transaction). Each
// caller still returns only after the transaction holding its write is
// durable, so the guarantees of a synchronous write are unchanged.
//
// Running the writes of a group one after another inside one transaction
// is the same as running them serially (a transaction reads its own
// writes). If any write of a group fails, the transaction is discarded
// and every write of the group runs again alone, so a failing write never
// takes others with it and each caller sees exactly the error it would
// have seen alone.
type groupCommit struct {
	db      *badger.DB
	mu      sync.RWMutex // held for reading while queueing; for writing by stop
	ops     chan *writeOp
	stopped bool
	exited  chan struct{}
}

func newGroupCommit(db *badger.DB) *groupCommit {
	g := &groupCommit{db: db, ops: make(chan *writeOp, maxGroup), exited: make(chan struct{})}
	go g.run()
	return g
}

// update runs fn in a durable read-write transaction, possibly shared
// with other writes.
func (g *groupCommit) update(fn func(txn *badger.Txn) error) error {
	op := &writeOp{fn: fn, done: make(chan error, 1)}
	g.mu.RLock()
	if g.stopped {
		g.mu.RUnlock()
		return ErrClosed
	}
	g.ops <- op
	g.mu.RUnlock()
	return <-op.done
}

// stop lets queued writes finish and ends the goroutine.
func (g *groupCommit) stop() {
	g.mu.Lock()
	if !g.stopped {
		g.stopped = true
		close(g.ops)
	}
	g.mu.Unlock()
	<-g.exited
}

func (g *groupCommit) run() {
	defer close(g.exited)
	group := make([]*writeOp, 0, maxGroup)
	for op := range g.ops {
		group = append(group[:0], op)
	fill:
		for len(group) < maxGroup {
			select {
			case next, ok := <-g.ops:
				if !ok {
					break fill
				}
				group = append(group, next)
			default:
				break fill
			}
		}
		g.commit(group)
	}
}

func (g *groupCommit) commit(group []*writeOp) {
	if len(group) > 1 {
		err := g.db.Update(func(txn *badger.Txn) error {
			for _, op := range group {
				if err := op.fn(txn); err != nil {
					return errGroupMember
				}
			}
			return nil
		})
		if err == nil {
			for _, op := range group {
				op.done <- nil
			}
			return
		}
		// A write failed, or the group was too big for one transaction:
		// run each write alone.
	}
	for _, op := range group {
		op.done <- g.single(op.fn)
	}
}

// single commits fn alone. Badger's optimistic transactions abort when
// another transaction wrote a key this one read; the work is idempotent,
// so retry a few times before giving up.
func (g *groupCommit) single(fn func(txn *badger.Txn) error) error {
	var err error
	for range 5 {
		if err = g.db.Update(fn); !errors.Is(err, badger.ErrConflict) {
			return err
		}
	}
	return err
}
