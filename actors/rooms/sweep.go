package rooms

import (
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/lisabot/lisa/messages"
)

// SweepRequest asks the supervisor how far the start-up sweep is; it
// answers with *Sweep.
type SweepRequest struct{}

// Sweep answers SweepRequest.
type Sweep struct {
	// Rooms is how many rooms the sweep starts (every allowed room).
	Rooms int
	// Live counts the rooms that replayed their journals and reported
	// live during the sweep, whether the sweep or a nudge started them.
	Live int
	// Done reports that the sweep is over: every room was started and
	// is live or gone.
	Done bool
	// Began and Ended are when the sweep began and ended (zero while it
	// runs), by the supervisor's clock.
	Began, Ended time.Time
}

// Preloader reads journals ahead of the actors that replay them (the
// persistence provider does, for the Badger store); see Config.Preload.
type Preloader interface {
	Preload(actorIDs []string) (stop func())
}

// sweepProgress is what the supervisor records of its start-up sweep.
type sweepProgress struct {
	rooms, live  int
	done         bool
	began, ended time.Time
}

// beginSweep queues every room for its start, in the order of their
// journals in the store (sorted room IDs), announces that order to the
// journal read-ahead and starts the first rooms.
func (s *supervisor) beginSweep(ctx actor.Context) {
	s.queued, s.starting, s.urgent = map[string]bool{}, map[string]bool{}, map[string]bool{}
	s.unstarted = slices.Clone(s.cfg.Rooms)
	slices.Sort(s.unstarted)
	s.unstarted = slices.Compact(s.unstarted)
	if s.unstarted == nil {
		s.unstarted = []string{} // nil means the sweep is over
	}
	for _, room := range s.unstarted {
		s.queued[room] = true
	}
	s.sweep = sweepProgress{rooms: len(s.unstarted), began: s.cfg.Clock.Now()}
	if s.cfg.Preload != nil && len(s.unstarted) > 0 {
		ids := make([]string, len(s.unstarted))
		for i, room := range s.unstarted {
			ids[i] = ctx.Self().Id + "/" + room
		}
		s.stopPreload = s.cfg.Preload(ids)
	}
	s.startMore(ctx)
}

// nudge handles a nudge for a room: a room still waiting for its turn
// starts now, and a room someone talks to holds the sweep until it is
// live, so its replay never queues behind the others'. A live room gets
// the nudge (it drains its inbox); a starting one gets it once live.
func (s *supervisor) nudge(ctx actor.Context, m *messages.Nudge) {
	room := string(m.Room)
	if s.queued[room] {
		// It drains its inbox once it is live: the nudge itself is not
		// passed on.
		delete(s.queued, room)
		if pid := s.spawn(ctx, room); pid != nil && s.starting[pid.Id] {
			s.urgent[pid.Id] = true
		}
		return
	}
	pid := s.children[room]
	if pid == nil {
		return
	}
	if s.starting[pid.Id] {
		s.urgent[pid.Id] = true
	}
	ctx.Send(pid, m)
}

// startMore spawns waiting rooms while fewer than StartConcurrency are
// replaying and no room someone talks to is still starting.
func (s *supervisor) startMore(ctx actor.Context) {
	limit := s.cfg.StartConcurrency
	if limit <= 0 {
		limit = DefaultStartConcurrency
	}
	for len(s.starting) < limit && len(s.urgent) == 0 && len(s.unstarted) > 0 && !s.stopping {
		room := s.unstarted[0]
		s.unstarted = s.unstarted[1:]
		if s.queued[room] {
			delete(s.queued, room)
			s.spawn(ctx, room)
		}
	}
	if s.unstarted != nil && len(s.unstarted) == 0 && len(s.starting) == 0 {
		s.unstarted = nil // the sweep is over
		s.sweep.done, s.sweep.ended = true, s.cfg.Clock.Now()
		s.endPreload()
	}
}

// started notes that actor id is live or gone, and lets the next room
// start.
func (s *supervisor) started(ctx actor.Context, id string, live bool) {
	if !s.starting[id] {
		return
	}
	delete(s.starting, id)
	delete(s.urgent, id)
	if live {
		s.sweep.live++
	}
	s.startMore(ctx)
}

// sweepStatus answers SweepRequest.
func (s *supervisor) sweepStatus() *Sweep {
	return &Sweep{
		Rooms: s.sweep.rooms, Live: s.sweep.live, Done: s.sweep.done,
		Began: s.sweep.began, Ended: s.sweep.ended,
	}
}

// endPreload ends the journal read-ahead, if one runs.
func (s *supervisor) endPreload() {
	if s.stopPreload != nil {
		s.stopPreload()
		s.stopPreload = nil
	}
}
