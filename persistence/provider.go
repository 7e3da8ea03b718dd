package persistence

import (
	"fmt"
	"log/slog"
	"sync/atomic"

	actorpersist "github.com/asynkron/protoactor-go/persistence"
	"google.golang.org/protobuf/proto"

	"github.com/lisabot/lisa/messages"
)

// StorageError is the panic value Provider raises when the Journal fails.
// protoactor's ProviderState interface has no error returns, so a failure
// must unwind the actor; its supervisor restarts it and the restarted actor
// replays the journal, which holds only what was really written.
type StorageError struct {
	Op   string
	Name string
	Err  error
}

// Error implements error.
func (e *StorageError) Error() string {
	return fmt.Sprintf("persistence: %s %s: %v", e.Op, messages.ActorLogID(e.Name), e.Err)
}

// Unwrap returns the cause.
func (e *StorageError) Unwrap() error { return e.Err }

// Provider adapts a Journal to protoactor's persistence plugin. It is both
// the plugin's Provider and its ProviderState, and it compacts the journal
// after every snapshot: events and snapshots before the new snapshot are
// deleted.
type Provider struct {
	j        Journal
	interval int
	log      *slog.Logger
	// pre is the running read-ahead of journals (see Preload), or nil.
	pre atomic.Pointer[preload]
}

var (
	_ actorpersist.Provider      = (*Provider)(nil)
	_ actorpersist.ProviderState = (*Provider)(nil)
)

// NewProvider returns a Provider that asks for a snapshot every
// snapshotInterval events. The interval must be positive (protoactor
// divides by it).
func NewProvider(j Journal, snapshotInterval int, log *slog.Logger) (*Provider, error) {
	if snapshotInterval <= 0 {
		return nil, fmt.Errorf("persistence: snapshot interval must be positive, got %d", snapshotInterval)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Provider{j: j, interval: snapshotInterval, log: log}, nil
}

// GetState implements actorpersist.Provider.
func (p *Provider) GetState() actorpersist.ProviderState { return p }

// Restart implements actorpersist.ProviderState; there is nothing to reset.
func (p *Provider) Restart() {}

// GetSnapshotInterval implements actorpersist.ProviderState.
func (p *Provider) GetSnapshotInterval() int { return p.interval }

// GetSnapshot implements actorpersist.SnapshotStore.
func (p *Provider) GetSnapshot(name string) (any, int, bool) {
	if snap, idx, ok, hit := p.preloadedSnapshot(name); hit {
		return snap, idx, ok
	}
	snap, idx, ok, err := p.j.LatestSnapshot(name)
	if err != nil {
		panic(&StorageError{Op: "read snapshot", Name: name, Err: err})
	}
	if !ok {
		return nil, 0, false
	}
	return snap, int(idx), true
}

// PersistSnapshot implements actorpersist.SnapshotStore, then compacts:
// in the same write when the journal is a SnapshotCompactor, else after
// it.
func (p *Provider) PersistSnapshot(name string, index int, snap proto.Message) {
	p.written(name)
	if c, ok := p.j.(SnapshotCompactor); ok && index >= 0 {
		if err := c.SaveSnapshotCompacting(name, uint64(index), snap); err != nil {
			panic(&StorageError{Op: "write snapshot", Name: name, Err: err})
		}
		return
	}
	if err := p.j.SaveSnapshot(name, uint64(index), snap); err != nil {
		panic(&StorageError{Op: "write snapshot", Name: name, Err: err})
	}
	if index == 0 {
		return
	}
	// The snapshot is durable, so everything before it is redundant. A
	// failed compaction leaves harmless garbage for the next one.
	if err := p.j.DeleteEvents(name, uint64(index-1)); err != nil {
		p.log.Warn("journal compaction failed", "actor", messages.ActorLogID(name), "err", err)
		return
	}
	if err := p.j.DeleteSnapshots(name, uint64(index-1)); err != nil {
		p.log.Warn("snapshot compaction failed", "actor", messages.ActorLogID(name), "err", err)
	}
}

// DeleteSnapshots implements actorpersist.SnapshotStore.
func (p *Provider) DeleteSnapshots(name string, inclusiveTo int) {
	if inclusiveTo < 0 {
		return
	}
	p.written(name)
	if err := p.j.DeleteSnapshots(name, uint64(inclusiveTo)); err != nil {
		panic(&StorageError{Op: "delete snapshots", Name: name, Err: err})
	}
}

// GetEvents implements actorpersist.EventStore. end == 0 means no bound.
func (p *Provider) GetEvents(name string, start, end int, cb func(any)) {
	if start < 0 || end < 0 {
		panic(&StorageError{Op: "read events", Name: name, Err: fmt.Errorf("negative range %d..%d", start, end)})
	}
	if end == 0 && p.preloadedEvents(name, start, cb) {
		return
	}
	err := p.j.Events(name, uint64(start), uint64(end), func(_ uint64, ev proto.Message) error {
		cb(ev)
		return nil
	})
	if err != nil {
		panic(&StorageError{Op: "read events", Name: name, Err: err})
	}
}

// PersistEvent implements actorpersist.EventStore.
func (p *Provider) PersistEvent(name string, index int, ev proto.Message) {
	if index < 0 {
		panic(&StorageError{Op: "write event", Name: name, Err: fmt.Errorf("negative index %d", index)})
	}
	p.written(name)
	if err := p.j.AppendEvent(name, uint64(index), ev); err != nil {
		panic(&StorageError{Op: "write event", Name: name, Err: err})
	}
}

// DeleteEvents implements actorpersist.EventStore.
func (p *Provider) DeleteEvents(name string, inclusiveTo int) {
	if inclusiveTo < 0 {
		return
	}
	p.written(name)
	if err := p.j.DeleteEvents(name, uint64(inclusiveTo)); err != nil {
		panic(&StorageError{Op: "delete events", Name: name, Err: err})
	}
}
