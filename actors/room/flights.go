package room

import (
	"context"
	"sync"
	"time"
)

// Flights tracks each room's send in flight across incarnations of the
// room actor, when each room last went quiet, and whether the homeserver
// may have restarted since. A restarted room must not look a reply up (and
// perhaps send it again) while its predecessor's request may still be
// reaching the homeserver: Reconcile waits for that request to end first,
// and trusts a miss only SettleDelay after it ended, or LateStoreWindow
// after it if the homeserver may have restarted meanwhile.
type Flights struct {
	now   func() time.Time
	start time.Time

	mu    sync.Mutex
	m     map[string]chan struct{}
	quiet map[string]time.Time // room -> end of its last send or failed lookup
	sends map[string]span      // room -> its last send in this process
	// linkDown is set from the process's start, and from a failed /sync,
	// until a /sync succeeds; troubleAt is when the link last recovered
	// or failed, or a request found the homeserver unreachable (trouble).
	// A homeserver restart fails the /sync outstanding or a send or
	// lookup it cuts short: while there was no trouble since a moment,
	// the homeserver has not restarted since.
	linkDown  bool
	troubleAt time.Time
	// reactions holds, per room, its wait reactions in flight (only
	// while there are any).
	reactions map[string]*reactionFlights
	// committed is closed when the sync committed its first answer of
	// this process (SyncCommitted).
	committed     chan struct{}
	committedOnce sync.Once
}

// reactionFlights counts a room's wait reactions in flight; done closes
// when the last one ends.
type reactionFlights struct {
	n    int
	done chan struct{}
}

// span is one send: when it began and ended (zero while in flight).
type span struct{ began, ended time.Time }

// NewFlights returns an empty tracker, shared by all rooms of one process;
// now is the clock, and the tracker's creation stands for the process's
// start (requests of earlier processes ended before it).
func NewFlights(now func() time.Time) *Flights {
	t := now()
	return &Flights{now: now, start: t, m: map[string]chan struct{}{},
		quiet: map[string]time.Time{}, sends: map[string]span{},
		linkDown: true, troubleAt: t, reactions: map[string]*reactionFlights{},
		committed: make(chan struct{})}
}

// SyncCommitted records that the sync committed an answer: from the first
// one on, the bot-event ledger knows every reply of Lisa's since the
// cursor this process started from, so a room can tell whether a question
// it queued before was answered meanwhile by a process whose data did not
// survive (a data dir older than the room: a restored backup, a VM
// snapshot rolled back). Wire it to the sync actor's Committed; a tree
// without a sync calls it at once.
func (f *Flights) SyncCommitted() {
	f.committedOnce.Do(func() { close(f.committed) })
}

// Committed reports whether the sync has committed an answer in this
// process (see SyncCommitted).
func (f *Flights) Committed() bool {
	select {
	case <-f.committed:
		return true
	default:
		return false
	}
}

// awaitCommit blocks until the sync has committed an answer in this
// process or ctx ends.
func (f *Flights) awaitCommit(ctx context.Context) error {
	select {
	case <-f.committed:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// SyncOutcome records the outcome of one /sync request; wire it to the
// sync actor's observer.
func (f *Flights) SyncOutcome(ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !ok || f.linkDown {
		f.linkDown, f.troubleAt = !ok, f.now()
	}
}

// trouble records a sign, other than a failed /sync, that the homeserver
// may have restarted just now: a request of Lisa's it refused to take or
// cut short (messages.Error.Unreachable). A /sync is not always
// outstanding — between two, while a batch is committed, a restart can
// pass unseen by it — but the send or lookup it cut saw it.
func (f *Flights) trouble() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.troubleAt = f.now()
}

// begin records a send in room; the returned function ends it and
// returns when the homeserver may store it late from (see
// SendDone.LateStoreFrom).
func (f *Flights) begin(room string) func(ambiguous bool) time.Time {
	ch := make(chan struct{})
	f.mu.Lock()
	f.m[room] = ch
	began := f.now()
	f.sends[room] = span{began: began}
	f.mu.Unlock()
	return func(ambiguous bool) time.Time {
		f.mu.Lock()
		if f.m[room] == ch {
			delete(f.m, room)
		}
		now := f.now()
		f.quiet[room] = now
		f.sends[room] = span{began: began, ended: now}
		var late time.Time
		if ambiguous {
			late = f.lateFromLocked(room)
		}
		f.mu.Unlock()
		close(ch)
		return late
	}
}

// lookupFailed notes that a lookup in room failed: the homeserver may be
// restarting with requests still queued.
func (f *Flights) lookupFailed(room string) {
	f.mu.Lock()
	f.quiet[room] = f.now()
	f.mu.Unlock()
}

// quietSince returns the latest moment this process knows a request of
// room may have been on its way (see ReconcileDone.QuietSince).
func (f *Flights) quietSince(room string) time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	if q := f.quiet[room]; q.After(f.start) {
		return q
	}
	return f.start
}

// lateStoreFrom returns when room's last send in this process ended if
// the homeserver may have restarted since it began, else zero (see
// ReconcileDone.LateStoreFrom).
func (f *Flights) lateStoreFrom(room string) time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lateFromLocked(room)
}

func (f *Flights) lateFromLocked(room string) time.Time {
	s, ok := f.sends[room]
	if !ok || s.ended.IsZero() {
		return time.Time{}
	}
	if f.linkDown || !f.troubleAt.Before(s.began) {
		return s.ended
	}
	return time.Time{}
}

// sentHere reports whether this process began a send in room.
func (f *Flights) sentHere(room string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.sends[room]
	return ok
}

// lastTrouble returns the last moment the homeserver may have restarted
// (see ReconcileDone.TroubleAt): now while the /sync is failing, else
// when it last recovered (its first success in this process included).
func (f *Flights) lastTrouble() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.linkDown {
		return f.now()
	}
	return f.troubleAt
}

// wait blocks until room has no send in flight or ctx ends.
func (f *Flights) wait(ctx context.Context, room string) error {
	f.mu.Lock()
	ch := f.m[room]
	f.mu.Unlock()
	if ch == nil {
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// beginReaction records a wait reaction in flight in room; the returned
// function ends it.
func (f *Flights) beginReaction(room string) func() {
	f.mu.Lock()
	r := f.reactions[room]
	if r == nil {
		r = &reactionFlights{done: make(chan struct{})}
		f.reactions[room] = r
	}
	r.n++
	f.mu.Unlock()
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if r.n--; r.n == 0 {
			delete(f.reactions, room)
			close(r.done)
		}
	}
}

// waitReactions blocks until room has no wait reaction in flight (in this
// incarnation or an earlier one) or ctx ends.
func (f *Flights) waitReactions(ctx context.Context, room string) error {
	f.mu.Lock()
	r := f.reactions[room]
	f.mu.Unlock()
	if r == nil {
		return nil
	}
	select {
	case <-r.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
