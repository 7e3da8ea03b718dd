package rooms

import (
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"

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
	Clock                   Clock
	Logger                  *slog.Logger
}

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
	}
}

func (s *supervisor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		for _, room := range s.cfg.Rooms {
			s.spawn(ctx, room)
		}
	case *messages.Nudge:
		if pid := s.children[string(m.Room)]; pid != nil {
			ctx.Send(pid, m)
		}
	case *messages.AcquireSlot:
		s.acquire(ctx.Send, ctx.Sender(), m.Token)
	case *messages.ReleaseSlot:
		if sender := ctx.Sender(); sender != nil && s.holders[sender.Id] == m.Token {
			s.release(ctx.Send, sender.Id)
		}
	case *messages.Drain:
		s.draining = true
	case *messages.ResetSlots:
		if sender := ctx.Sender(); sender != nil {
			s.forget(ctx.Send, sender.Id)
		}
	case *messages.RoomsStatusRequest:
		st := &messages.RoomsStatus{Running: map[messages.RoomID]bool{}}
		for _, room := range s.cfg.Rooms {
			st.Running[messages.RoomID(room)] = s.children[room] != nil
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
		s.forget(ctx.Send, m.Who.Id)
		for room, pid := range s.children {
			if pid.Equal(m.Who) {
				delete(s.children, room)
				if !s.stopping {
					s.scheduleRespawn(ctx, room)
				}
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
	}
}

func (s *supervisor) spawn(ctx actor.Context, room string) {
	pid, err := ctx.SpawnNamed(s.cfg.RoomProps(room), room)
	if err != nil {
		// The name is still taken by a stopping incarnation; try again.
		s.cfg.Logger.Warn("room spawn failed", "room", messages.RoomID(room), "err", err)
		s.scheduleRespawn(ctx, room)
		return
	}
	s.children[room] = pid
}

func (s *supervisor) scheduleRespawn(ctx actor.Context, room string) {
	n := s.respawns[room]
	if at, ok := s.respawnedAt[room]; ok && s.cfg.Clock.Now().Sub(at) >= s.cfg.RestartWindow {
		n = 0 // it ran well for a whole window: this failure is a new streak
	}
	s.respawns[room] = n + 1
	d := s.cfg.RespawnBase
	for i := 0; i < n && d < s.cfg.RespawnMax; i++ {
		d *= 2
	}
	d = min(d, s.cfg.RespawnMax)
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

// forget drops every slot and request of actor id (it failed or stopped).
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
	if rs.NumberOfFailures(s.cfg.RestartWindow) > s.cfg.MaxRestarts {
		rs.Reset()
		directive = actor.StopDirective
	}
	s.cfg.Logger.Warn("room failed", "actor", messages.ActorLogID(child.Id), "reason", reasonText(reason), "directive", directive.String())
	sys.EventStream.Publish(&actor.SupervisorEvent{Child: child, Reason: reason, Directive: directive})
	// A failed room's slot is free again; its next incarnation asks anew.
	s.forget(sys.Root.Send, child.Id)
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
