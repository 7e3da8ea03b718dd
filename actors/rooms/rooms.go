package rooms

import (
	"log/slog"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/lisabot/lisa/backoff"
	"github.com/lisabot/lisa/messages"
)

// Clock supplies the time and timers for respawn backoff.
type Clock interface {
	Now() time.Time
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

// Config wires the rooms supervisor.
type Config struct {
	// Rooms are the allowed room IDs.
	Rooms []string
	// MaxConcurrent is runtime.max_concurrent_rooms.
	MaxConcurrent int
	// RoomProps returns the props of one room's actor.
	RoomProps func(roomID string) *actor.Props
	// MaxRestarts restarts within RestartWindow are allowed before a room
	// is stopped and respawned after a backoff.
	MaxRestarts   int
	RestartWindow time.Duration
	// RespawnBase doubles per consecutive respawn, capped at RespawnMax.
	// A respawned room that then runs for RestartWindow without being
	// stopped again starts over at RespawnBase.
	RespawnBase, RespawnMax time.Duration
	// StartConcurrency bounds how many rooms replay their journals at
	// once when the supervisor starts; the others wait their turn, and a
	// nudge for a waiting room starts it at once and holds the sweep
	// until that room is live. Zero or less means
	// DefaultStartConcurrency.
	StartConcurrency int
	// Preload, if set, is told the actor IDs of the rooms the start-up
	// sweep will start, in the order it starts them, when the supervisor
	// starts; it may read their journals ahead (see
	// persistence.Provider.Preload). The function it returns ends that
	// work and is called when the supervisor stops.
	Preload func(actorIDs []string) (stop func())
	Clock   Clock
	Logger  *slog.Logger
}

// DefaultStartConcurrency is the default StartConcurrency. A replay reads
// a local store and decodes: it is CPU work, so a few rooms per core keep
// every core busy across the hand-offs between a room going live and the
// next one starting, and no more compete with a room someone is talking
// to.
const DefaultStartConcurrency = 8

// Props returns the supervisor's props.
func Props(cfg Config, opts ...actor.PropsOption) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return newSupervisor(cfg) }, opts...)
}

type supervisor struct {
	cfg      Config
	children map[string]*actor.PID // room ID -> PID, absent while waiting to respawn
	respawns map[string]int        // consecutive respawns per room
	// respawnedAt is when each room was last respawned.
	respawnedAt map[string]time.Time
	timers      map[string]func() bool
	stopping    bool
	draining    bool

	holders map[string]uint64 // actor ID -> token
	waiting []waiter
	maxHeld int
	// busy holds the actor IDs of the rooms that reported RoomBusy.
	busy map[string]bool

	// Start-up sweep: rooms not spawned yet, in order, and the rooms
	// spawned by the sweep or a nudge that have not reported live yet
	// (by actor ID). urgent holds the starting rooms someone talks to:
	// while any is starting, the sweep starts no other room.
	unstarted []string
	queued    map[string]bool
	starting  map[string]bool
	urgent    map[string]bool
	sweep     sweepProgress
	// stopPreload ends the journal read-ahead, if any.
	stopPreload func()
}

type waiter struct {
	pid   *actor.PID
	token uint64
}

type respawn struct{ room string }

func newSupervisor(cfg Config) *supervisor {
	return &supervisor{
		cfg:      cfg,
		children: map[string]*actor.PID{},
		respawns: map[string]int{},
		timers:   map[string]func() bool{},

		respawnedAt: map[string]time.Time{},
		holders:     map[string]uint64{},
		busy:        map[string]bool{},
	}
}

func (s *supervisor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		s.beginSweep(ctx)
	case *messages.Nudge:
		s.nudge(ctx, m)
	case *SweepRequest:
		ctx.Respond(s.sweepStatus())
	case *messages.AcquireSlot:
		s.acquire(ctx.Send, ctx.Sender(), m.Token)
	case *messages.ReleaseSlot:
		if sender := ctx.Sender(); sender != nil && s.holders[sender.Id] == m.Token {
			s.release(ctx.Send, sender.Id)
		}
	case *messages.Drain:
		s.draining = true
	case *messages.ResetSlots:
		// A room sends it once its journal is replayed: it is live.
		if sender := ctx.Sender(); sender != nil {
			s.drop(ctx.Send, sender.Id)
			s.started(ctx, sender.Id, true)
		}
	case *RoomBusy:
		s.roomBusy(ctx, m)
	case *IdleRequest:
		ctx.Respond(s.idle())
	case *messages.RoomsStatusRequest:
		st := &messages.RoomsStatus{Running: map[messages.RoomID]bool{}}
		for _, room := range s.cfg.Rooms {
			// A room waiting for its turn to start has not failed.
			st.Running[messages.RoomID(room)] = s.children[room] != nil || s.queued[room]
		}
		ctx.Respond(st)
	case *messages.SlotStatusRequest:
		st := &messages.SlotStatus{Limit: s.cfg.MaxConcurrent, MaxHeld: s.maxHeld}
		for id := range s.holders {
			st.Holders = append(st.Holders, id)
		}
		for _, w := range s.waiting {
			st.Waiting = append(st.Waiting, w.pid.Id)
		}
		ctx.Respond(st)
	case *actor.Terminated:
		s.drop(ctx.Send, m.Who.Id)
		s.started(ctx, m.Who.Id, false)
		// A child's name is its room ID: one lookup, not a scan of
		// every child (stopping 10,000 rooms would be quadratic).
		room, ok := strings.CutPrefix(m.Who.Id, ctx.Self().Id+"/")
		if pid := s.children[room]; ok && pid != nil && pid.Equal(m.Who) {
			delete(s.children, room)
			if !s.stopping {
				s.scheduleRespawn(ctx, room)
			}
		}
	case *respawn:
		delete(s.timers, m.room)
		if !s.stopping && s.children[m.room] == nil {
			s.respawnedAt[m.room] = s.cfg.Clock.Now()
			s.spawn(ctx, m.room)
		}
	case *actor.Stopping:
		s.stopping = true
		for _, stop := range s.timers {
			stop()
		}
		s.endPreload()
	case *actor.Restarting:
		s.endPreload()
	}
}

// spawn starts a room's actor and returns its PID, or nil when the spawn
// failed and was rescheduled. During the start-up sweep the room counts
// as starting until it reports live.
func (s *supervisor) spawn(ctx actor.Context, room string) *actor.PID {
	pid, err := ctx.SpawnNamed(s.cfg.RoomProps(room), room)
	if err != nil {
		// The name is still taken by a stopping incarnation; try again.
		s.cfg.Logger.Warn("room spawn failed", "room", messages.RoomID(room), "err", err)
		s.scheduleRespawn(ctx, room)
		return nil
	}
	s.children[room] = pid
	if s.unstarted != nil {
		s.starting[pid.Id] = true
	}
	return pid
}

func (s *supervisor) scheduleRespawn(ctx actor.Context, room string) {
	n := s.respawns[room]
	if at, ok := s.respawnedAt[room]; ok && s.cfg.Clock.Now().Sub(at) >= s.cfg.RestartWindow {
		n = 0 // it ran well for a whole window: this failure is a new streak
	}
	s.respawns[room] = n + 1
	d := backoff.Doubled(s.cfg.RespawnBase, s.cfg.RespawnMax, n+1)
	self, sys := ctx.Self(), ctx.ActorSystem()
	s.cfg.Logger.Warn("room stopped; respawning later", "room", messages.RoomID(room), "delay_ms", d.Milliseconds(), "respawns", n+1)
	s.timers[room] = s.cfg.Clock.AfterFunc(d, func() { sys.Root.Send(self, &respawn{room: room}) })
}

type sendFunc func(pid *actor.PID, msg any)

// acquire grants a slot now or queues the request. A room asks again
// only after a restart, so a repeated request from the same actor replaces
// its old one.
func (s *supervisor) acquire(send sendFunc, pid *actor.PID, token uint64) {
	if pid == nil {
		return
	}
	s.forget(send, pid.Id)
	if len(s.holders) < s.cfg.MaxConcurrent && !s.draining {
		s.grant(send, pid, token)
		return
	}
	s.waiting = append(s.waiting, waiter{pid: pid, token: token})
}

func (s *supervisor) grant(send sendFunc, pid *actor.PID, token uint64) {
	s.holders[pid.Id] = token
	s.maxHeld = max(s.maxHeld, len(s.holders))
	send(pid, &messages.SlotGranted{Token: token})
}

func (s *supervisor) release(send sendFunc, id string) {
	delete(s.holders, id)
	for len(s.waiting) > 0 && len(s.holders) < s.cfg.MaxConcurrent && !s.draining {
		w := s.waiting[0]
		s.waiting = s.waiting[1:]
		s.grant(send, w.pid, w.token)
	}
}

// drop forgets everything about actor id: it failed, stopped or is a new
// incarnation that holds nothing and is not busy.
func (s *supervisor) drop(send sendFunc, id string) {
	delete(s.busy, id)
	s.forget(send, id)
}

// forget drops every slot and request of actor id.
func (s *supervisor) forget(send sendFunc, id string) {
	kept := s.waiting[:0]
	for _, w := range s.waiting {
		if w.pid.Id != id {
			kept = append(kept, w)
		}
	}
	s.waiting = kept
	if _, ok := s.holders[id]; ok {
		s.release(send, id)
	}
}

// HandleFailure makes the supervisor its children's strategy. It runs on
// the supervisor's own goroutine.
func (s *supervisor) HandleFailure(sys *actor.ActorSystem, sup actor.Supervisor, child *actor.PID, rs *actor.RestartStatistics, reason, _ any) {
	directive := actor.RestartDirective
	rs.Fail()
	// While rooms is stopping, a failed room is stopped: a restart would
	// turn a stopping room back into a running one, and rooms would wait
	// for it for ever (see app's HandleFailure).
	if s.stopping || rs.NumberOfFailures(s.cfg.RestartWindow) > s.cfg.MaxRestarts {
		rs.Reset()
		directive = actor.StopDirective
	}
	s.cfg.Logger.Warn("room failed", "actor", messages.ActorLogID(child.Id), "reason", reasonText(reason), "directive", directive.String())
	sys.EventStream.Publish(&actor.SupervisorEvent{Child: child, Reason: reason, Directive: directive})
	// A failed room's slot is free again; its next incarnation asks anew.
	s.drop(sys.Root.Send, child.Id)
	if directive == actor.StopDirective {
		sup.StopChildren(child)
		return
	}
	sup.RestartChildren(child)
}

func reasonText(r any) string {
	if err, ok := r.(error); ok {
		return err.Error()
	}
	if s, ok := r.(string); ok {
		return s
	}
	return "panic"
}
