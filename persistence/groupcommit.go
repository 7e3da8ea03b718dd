package persistence

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// maxGroup bounds how many writes share one transaction.
const maxGroup = 256

// lazySyncDelay bounds how long a lazy write waits for a sync when
// nothing else asks for one.
const lazySyncDelay = 10 * time.Millisecond

// errGroupMember aborts a shared transaction when one of its writes fails.
var errGroupMember = errors.New("persistence: a write in the group failed")

// ErrSyncFailed reports that the store could not sync its files to disk.
// It is permanent: once a sync failed, the page cache may hold commits the
// disk never got, and a later sync that succeeds proves nothing about them
// (on Linux a failed writeback leaves its pages clean, so the next fsync
// reports success). Every waiter, barrier and write after it fails with
// this error; the process must stop and recover from what is on disk.
var ErrSyncFailed = errors.New("persistence: the store could not sync to disk")

// writeOp is one caller's read-modify-write, waiting for its commit (lazy)
// or for the sync after its commit (durable).
type writeOp struct {
	fn   func(txn *badger.Txn) error
	lazy bool
	done chan error
}

// syncWaiter is a caller waiting until every commit up to seq is synced.
type syncWaiter struct {
	seq  uint64
	done chan error
}

// groupCommit serialises every read-modify-write of a Badger store
// through one goroutine, and commits the writes that queued up meanwhile
// in one transaction. Badger runs with SyncWrites off; a second goroutine
// syncs the log after commits, so one sync covers every commit made
// while the previous sync ran, and commits never wait behind a sync.
//
// Two kinds of write share the order:
//   - durable (update): the caller returns once a sync that started after
//     its commit has finished: the write survives power loss.
//   - lazy (updateLazy): the caller returns once the write is committed:
//     visible to every later read, ordered before every later write, and
//     on disk once a sync follows: the next durable write's, a barrier's,
//     or at the latest one lazySyncDelay later.
//
// A sync covers every log that may hold one of the commits before it,
// not only the newest (see logSyncer), so what a power failure can drop
// is commits no finished sync covered, never one a returned barrier or
// durable write covered.
//
// A process that is killed loses nothing either way: commits are in the
// operating system's page cache before any caller returns. Only a power
// or kernel failure can drop unsynced commits; barrier is how a caller
// makes sure none precedes an outside effect (a reply sent to the
// homeserver). The first failed sync fails the store for good (see
// ErrSyncFailed).
//
// Running the writes of a group one after another inside one transaction
// is the same as running them serially (a transaction reads its own
// writes). If any write of a group fails, the transaction is discarded
// and every write of the group runs again alone, so a failing write never
// takes others with it and each caller sees exactly the error it would
// have seen alone.
type groupCommit struct {
	db      *badger.DB
	sync    func() error // logSyncer.sync; tests count, hold and fail syncs
	onFail  func(error)  // called once, with the first sync error
	mu      sync.RWMutex // held for reading while queueing; for writing by stop
	ops     chan *writeOp
	stopped bool
	exited  chan struct{}

	smu       sync.Mutex
	committed uint64 // commit groups done
	synced    uint64 // commit groups covered by a finished sync
	waiters   []syncWaiter
	lazyTimer *time.Timer   // armed: it will ask for a sync (syncSoon)
	lazyDelay time.Duration // how long a lazy write may wait for its sync
	kick      chan struct{} // cap 1: a sync is wanted
	syncDone  chan struct{}
	failed    error         // the first sync error, wrapped in ErrSyncFailed
	failedCh  chan struct{} // closed when failed is set
}

// startGroupCommit starts a groupCommit that syncs with sync and tells
// onFail (if set) about the first sync that fails.
func startGroupCommit(db *badger.DB, sync func() error, onFail func(error)) *groupCommit {
	g := &groupCommit{db: db, sync: sync, onFail: onFail, lazyDelay: lazySyncDelay, ops: make(chan *writeOp, maxGroup), exited: make(chan struct{}),
		kick: make(chan struct{}, 1), syncDone: make(chan struct{}), failedCh: make(chan struct{})}
	go g.syncer()
	go g.run()
	return g
}

// err returns the store's sync failure, or nil.
func (g *groupCommit) err() error {
	g.smu.Lock()
	defer g.smu.Unlock()
	return g.failed
}

// update runs fn in a read-write transaction, possibly shared with other
// writes, and returns once it is synced to disk.
func (g *groupCommit) update(fn func(txn *badger.Txn) error) error {
	return g.queue(&writeOp{fn: fn, done: make(chan error, 1)})
}

// updateLazy runs fn like update but returns once it is committed; it is
// synced soon after, and before any barrier called after it returns.
func (g *groupCommit) updateLazy(fn func(txn *badger.Txn) error) error {
	return g.queue(&writeOp{fn: fn, lazy: true, done: make(chan error, 1)})
}

func (g *groupCommit) queue(op *writeOp) error {
	if err := g.err(); err != nil {
		return err
	}
	g.mu.RLock()
	if g.stopped {
		g.mu.RUnlock()
		return ErrClosed
	}
	g.ops <- op
	g.mu.RUnlock()
	return <-op.done
}

// barrier returns a function that returns once every write acknowledged
// before barrier was called is synced to disk. If those writes are not
// synced yet, barrier starts a sync at once, so that by the time the
// caller waits (a reply's send, after the model answered) it is usually
// done.
func (g *groupCommit) barrier() func() error {
	g.mu.RLock()
	g.smu.Lock()
	seq := g.committed
	behind := g.synced < seq
	failed := g.failed
	g.smu.Unlock()
	if failed != nil {
		g.mu.RUnlock()
		return func() error { return failed }
	}
	if behind && !g.stopped {
		g.wantSync()
	}
	g.mu.RUnlock()
	return func() error { return g.syncedTo(seq) }
}

// syncedTo waits until commit group seq is synced.
func (g *groupCommit) syncedTo(seq uint64) error {
	g.mu.RLock()
	g.smu.Lock()
	if g.failed != nil {
		err := g.failed
		g.smu.Unlock()
		g.mu.RUnlock()
		return err
	}
	if g.synced >= seq {
		g.smu.Unlock()
		g.mu.RUnlock()
		return nil
	}
	if g.stopped {
		g.smu.Unlock()
		g.mu.RUnlock()
		return ErrClosed
	}
	w := syncWaiter{seq: seq, done: make(chan error, 1)}
	g.waiters = append(g.waiters, w)
	g.smu.Unlock()
	g.wantSync()
	g.mu.RUnlock() // stop waits for this, then syncs what is left
	return <-w.done
}

// stop lets queued writes finish, syncs, and ends the goroutines.
func (g *groupCommit) stop() {
	g.mu.Lock()
	if !g.stopped {
		g.stopped = true
		close(g.ops)
	}
	g.mu.Unlock()
	<-g.exited
	<-g.syncDone // the last sync covered every commit
	g.smu.Lock()
	if g.lazyTimer != nil {
		g.lazyTimer.Stop()
		g.lazyTimer = nil
	}
	g.smu.Unlock()
}

func (g *groupCommit) run() {
	defer close(g.exited)
	defer close(g.kick) // the syncer syncs what is left, then ends
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
		if err := g.err(); err != nil {
			for _, op := range group {
				op.done <- err
			}
			continue
		}
		g.finish(group, g.commit(group))
	}
}

// finish queues the durable writes of a committed group for the next
// sync, asks for it, and then answers the lazy writes and the failures.
// The sync is asked for before the lazy writers are woken: the goroutine
// woken last runs first on this thread, and a writer waiting for its lazy
// write is on a reply's path, the syncer is not.
func (g *groupCommit) finish(group []*writeOp, errs []error) {
	g.smu.Lock()
	g.committed++
	seq := g.committed
	durable, lazy := false, false
	for i, op := range group {
		switch {
		case errs[i] != nil:
		case op.lazy:
			lazy = true
		default:
			g.waiters = append(g.waiters, syncWaiter{seq: seq, done: op.done})
			durable = true
		}
	}
	g.smu.Unlock()
	if durable {
		g.wantSync()
	} else if lazy {
		g.syncSoon()
	}
	for i, op := range group {
		switch {
		case errs[i] != nil:
			op.done <- errs[i]
		case op.lazy:
			op.done <- nil
		}
	}
}

// syncSoon makes sure a sync starts within lazyDelay, unless a durable
// write or a barrier asks for one earlier.
func (g *groupCommit) syncSoon() {
	g.smu.Lock()
	defer g.smu.Unlock()
	if g.lazyTimer != nil {
		return
	}
	g.lazyTimer = time.AfterFunc(g.lazyDelay, func() {
		g.smu.Lock()
		g.lazyTimer = nil
		g.smu.Unlock()
		g.mu.RLock()
		if !g.stopped {
			g.wantSync()
		}
		g.mu.RUnlock()
	})
}

func (g *groupCommit) wantSync() {
	select {
	case g.kick <- struct{}{}:
	default:
	}
}

// syncer syncs the log whenever commits are ahead of the last sync and
// releases the writes and barriers the sync covers. The first failed sync
// fails the store for good (see ErrSyncFailed): every waiter now and later
// gets the error, and no sync is tried again.
func (g *groupCommit) syncer() {
	defer close(g.syncDone)
	for range g.kick {
		g.syncOnce()
	}
	g.syncOnce() // writes committed before stop
}

func (g *groupCommit) syncOnce() {
	g.smu.Lock()
	if g.failed != nil {
		g.failWaiters()
		g.smu.Unlock()
		return
	}
	target := g.committed
	if target <= g.synced {
		g.smu.Unlock()
		return
	}
	g.smu.Unlock()
	err := g.sync()
	g.smu.Lock()
	if err != nil {
		g.failed = fmt.Errorf("%w: %w", ErrSyncFailed, err)
		close(g.failedCh)
		g.failWaiters()
		g.smu.Unlock()
		if g.onFail != nil {
			g.onFail(g.failed)
		}
		return
	}
	g.synced = target
	kept := g.waiters[:0]
	for _, w := range g.waiters {
		if w.seq <= target {
			w.done <- nil
			continue
		}
		kept = append(kept, w)
	}
	clear(g.waiters[len(kept):])
	g.waiters = kept
	g.smu.Unlock()
}

// failWaiters fails every waiter with the store's failure; smu is held.
func (g *groupCommit) failWaiters() {
	for _, w := range g.waiters {
		w.done <- g.failed
	}
	clear(g.waiters)
	g.waiters = g.waiters[:0]
}

// commit runs the group's writes, in one transaction when it can, and
// returns each write's error.
func (g *groupCommit) commit(group []*writeOp) []error {
	errs := make([]error, len(group))
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
			return errs
		}
		// A write failed, or the group was too big for one transaction:
		// run each write alone.
	}
	for i, op := range group {
		errs[i] = g.single(op.fn)
	}
	return errs
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
