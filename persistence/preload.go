package persistence

import (
	"context"
	"slices"
	"sync"

	"google.golang.org/protobuf/proto"
)

// PreloadWindow bounds how many journals a preload holds read ahead and
// not yet replayed: enough to keep every replaying room fed, little
// enough to be a few MiB at most.
const PreloadWindow = 256

// Preload reads the journals of names (actor names, in the order their
// actors will replay) ahead in one pass over the store, in the
// background, at most PreloadWindow journals ahead of the replays. An
// actor whose journal was read ahead replays from memory; one that
// replays before the read reached it reads the store itself, as without
// a preload, and the read skips it. Any write through the Provider to a
// journal drops what was read ahead of it, so a replay never sees a stale
// journal. The returned function ends the preload, drops what is left
// and waits for the reader to stop; it may be called more than once. A
// second Preload ends the first. Journals that cannot be scanned in bulk
// (the memory store) are not read ahead.
func (p *Provider) Preload(names []string) (stop func()) {
	p.endPreload()
	scanner, ok := p.j.(journalScanner)
	if !ok || len(names) == 0 {
		return func() {}
	}
	sorted := slices.Clone(names)
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	ctx, cancel := context.WithCancel(context.Background())
	pl := &preload{
		ready: map[string]*rawJournal{}, taken: map[string]*rawJournal{},
		done: make(map[string]bool, len(sorted)), space: make(chan struct{}, PreloadWindow),
		cancel: cancel, finished: make(chan struct{}),
	}
	p.pre.Store(pl)
	go func() {
		defer close(pl.finished)
		err := scanner.scanJournals(ctx, sorted, pl.wanted, func(name string, r *rawJournal) error { return pl.put(ctx, name, r) })
		if err != nil && ctx.Err() == nil {
			// Nothing is lost: the rooms not read ahead read the store
			// themselves, and report what is wrong with it.
			p.log.Warn("journal preload stopped", "err", err)
		}
	}()
	return func() { p.stopPreload(pl) }
}

// endPreload ends the running preload, if any.
func (p *Provider) endPreload() {
	if pl := p.pre.Load(); pl != nil {
		p.stopPreload(pl)
	}
}

// stopPreload ends pl and forgets it.
func (p *Provider) stopPreload(pl *preload) {
	p.pre.CompareAndSwap(pl, nil)
	pl.cancel()
	<-pl.finished
	pl.mu.Lock()
	clear(pl.ready)
	clear(pl.taken)
	pl.mu.Unlock()
}

// preload is one running read-ahead.
type preload struct {
	mu sync.Mutex
	// ready holds journals read ahead; taken those whose snapshot was
	// served and whose events are asked for next.
	ready, taken map[string]*rawJournal
	// done marks journals replayed from the store or written since the
	// preload began: what the reader would get may be stale.
	done map[string]bool
	// space holds a token per journal in ready: the window.
	space    chan struct{}
	cancel   context.CancelFunc
	finished chan struct{}
}

// wanted reports whether the reader should still read name.
func (pl *preload) wanted(name string) bool {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	return !pl.done[name]
}

// put holds r for name's replay, once the window has room, unless the
// journal was replayed or written meanwhile.
func (pl *preload) put(ctx context.Context, name string, r *rawJournal) error {
	select {
	case pl.space <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if pl.done[name] {
		<-pl.space
		return nil
	}
	pl.ready[name] = r
	return nil
}

// take hands out what was read ahead of name for its replay, or nil; it
// moves it to taken for the events that follow. Either way the journal
// is done for the reader.
func (pl *preload) take(name string) *rawJournal {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	pl.done[name] = true
	delete(pl.taken, name)
	r := pl.ready[name]
	if r == nil {
		return nil
	}
	delete(pl.ready, name)
	<-pl.space
	pl.taken[name] = r
	return r
}

// events hands out the events read ahead of name after its snapshot was
// served, if they start at from; or nil.
func (pl *preload) events(name string, from uint64) *rawJournal {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	r := pl.taken[name]
	delete(pl.taken, name)
	if r == nil || r.first != from {
		return nil
	}
	return r
}

// forget drops what was read ahead of name: it is being written.
func (pl *preload) forget(name string) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	pl.done[name] = true
	delete(pl.taken, name)
	if _, ok := pl.ready[name]; ok {
		delete(pl.ready, name)
		<-pl.space
	}
}

// preloadedSnapshot answers GetSnapshot from the preload, if it holds
// name's journal.
func (p *Provider) preloadedSnapshot(name string) (snap any, index int, ok, hit bool) {
	pl := p.pre.Load()
	if pl == nil {
		return nil, 0, false, false
	}
	r := pl.take(name)
	if r == nil {
		return nil, 0, false, false
	}
	if r.snap == nil {
		return nil, 0, false, true
	}
	m, err := r.snapshot(name)
	if err != nil {
		panic(&StorageError{Op: "read snapshot", Name: name, Err: err})
	}
	return m, int(r.snapIdx), true, true
}

// preloadedEvents answers GetEvents from the preload, if it holds name's
// events from start on.
func (p *Provider) preloadedEvents(name string, start int, cb func(any)) bool {
	pl := p.pre.Load()
	if pl == nil {
		return false
	}
	r := pl.events(name, uint64(start))
	if r == nil {
		return false
	}
	if err := r.events(name, func(m proto.Message) { cb(m) }); err != nil {
		panic(&StorageError{Op: "read events", Name: name, Err: err})
	}
	return true
}

// written tells the preload that name's journal is being written.
func (p *Provider) written(name string) {
	if pl := p.pre.Load(); pl != nil {
		pl.forget(name)
	}
}
