package room

import (
	"context"
	"sync"
	"time"
)

// Flights tracks each room's send in flight across incarnations of the
// room actor, and when each room last went quiet. A restarted room must
// not look a reply up (and perhaps send it again) while its predecessor's
// request may still be reaching the homeserver: Reconcile waits for that
// request to end first, and trusts a miss only SettleDelay after it ended.
type Flights struct {
	now   func() time.Time
	start time.Time

	mu    sync.Mutex
	m     map[string]chan struct{}
	quiet map[string]time.Time // room -> end of its last send or failed lookup
}

// NewFlights returns an empty tracker, shared by all rooms of one process;
// now is the clock, and the tracker's creation stands for the process's
// start (requests of earlier processes ended before it).
func NewFlights(now func() time.Time) *Flights {
	return &Flights{now: now, start: now(), m: map[string]chan struct{}{}, quiet: map[string]time.Time{}}
}

// begin records a send in room; the returned function ends it.
func (f *Flights) begin(room string) func() {
	ch := make(chan struct{})
	f.mu.Lock()
	f.m[room] = ch
	f.mu.Unlock()
	return func() {
		f.mu.Lock()
		if f.m[room] == ch {
			delete(f.m, room)
		}
		f.quiet[room] = f.now()
		f.mu.Unlock()
		close(ch)
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
