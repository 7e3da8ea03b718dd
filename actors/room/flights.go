package room

import (
	"context"
	"sync"
)

// Flights tracks each room's send in flight across incarnations of the
// room actor. A restarted room must not look a reply up (and perhaps send
// it again) while its predecessor's request may still be reaching the
// homeserver: Reconcile waits for that request to end first.
type Flights struct {
	mu sync.Mutex
	m  map[string]chan struct{}
}

// NewFlights returns an empty tracker, shared by all rooms.
func NewFlights() *Flights { return &Flights{m: map[string]chan struct{}{}} }

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
		f.mu.Unlock()
		close(ch)
	}
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
