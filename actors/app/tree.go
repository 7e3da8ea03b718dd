package app

import (
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	actorpersist "github.com/asynkron/protoactor-go/persistence"

	"github.com/lisabot/lisa/actors/invocation"
	"github.com/lisabot/lisa/actors/room"
	"github.com/lisabot/lisa/actors/rooms"
	"github.com/lisabot/lisa/actors/syncer"
	"github.com/lisabot/lisa/actors/tools"
	"github.com/lisabot/lisa/backoff"
	"github.com/lisabot/lisa/messages/roompb"
)

// Trail is the event trail as the sync and the rooms feed it.
type Trail interface {
	room.Trail
	syncer.Trail
}

// Clock is the time source for every actor in the tree.
type Clock interface {
	Now() time.Time
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

// TreeConfig is everything the actor tree needs from the outside: the
// ports it talks through and the limits it enforces. cmd/lisa fills it
// with real adapters, tests with fakes; the tree is built the same way.
type TreeConfig struct {
	// Rooms are the allowed room IDs; each gets a persistent actor.
	Rooms []string
	// MaxConcurrent is runtime.max_concurrent_rooms.
	MaxConcurrent int
	// Policy is the room policy; RoomID is filled in per room.
	Policy room.Policy
	// Provider persists room journals.
	Provider  actorpersist.Provider
	Inbox     room.Inbox
	BotEvents room.BotEvents
	// Durable, if set, makes the rooms' journals durable before each send
	// (see room.Durable).
	Durable room.Durable
	Sender  room.Sender
	Invoker invocation.Invoker
	// InvocationTimeout bounds one attempt.
	InvocationTimeout time.Duration
	// RoomObserver, if set, receives room outcomes and phases (metrics).
	RoomObserver room.Observer
	// Trail, if set, is fed what the sync and the rooms decide about each
	// event (the event trail, a read model).
	Trail Trail
	// ToolWorkers, when positive, adds the tool pool with that many
	// workers.
	ToolWorkers int
	// OnLost is called when a top-level actor stops for good (it kept
	// failing, or was stopped individually).
	OnLost func(child string)
	// Invocations, when set, counts attempts in flight.
	Invocations *sync.WaitGroup
	// SendTimeout bounds one send of a reply.
	SendTimeout time.Duration
	// RoomRestarts within RoomRestartWindow are allowed before a room is
	// stopped and respawned after RespawnBase (doubling up to RespawnMax).
	RoomRestarts      int
	RoomRestartWindow time.Duration
	RespawnBase       time.Duration
	RespawnMax        time.Duration
	// Sync, when set, adds the sync actor (Matrix intake) after rooms.
	Sync *SyncConfig
	// RoomOptions are extra props options for room actors (tests inject
	// faults here).
	RoomOptions []actor.PropsOption
	Clock       Clock
	Logger      *slog.Logger
}

// Tree returns the props of the app actor with the whole tree below it.
func (s *System) Tree(cfg TreeConfig) *actor.Props {
	gens := &atomic.Uint64{}
	flights := room.NewFlights(cfg.Clock.Now)
	invCfg := invocation.Config{Invoker: cfg.Invoker, Timeout: cfg.InvocationTimeout, Logger: cfg.Logger, Running: cfg.Invocations}
	// One Props for every room: each room actor takes its room ID from
	// its name, so idle rooms share one Config, Props and middleware
	// chain (each still has its own machine and policy copy).
	policy := cfg.Policy
	policy.RoomID = ""
	if policy.InvocationTimeout == 0 {
		policy.InvocationTimeout = cfg.InvocationTimeout
	}
	sharedRoomProps := room.Props(room.Config{
		Policy:    policy,
		Provider:  cfg.Provider,
		Inbox:     cfg.Inbox,
		BotEvents: cfg.BotEvents,
		Sender:    cfg.Sender,
		Durable:   cfg.Durable,
		NewInvocation: func(c *roompb.Candidate, attempt uint32, deadline time.Time) *actor.Props {
			return invocation.Props(invCfg, c, attempt, deadline)
		},
		ChildOptions: s.Options(),
		Clock:        cfg.Clock,
		Logger:       cfg.Logger,
		Generations:  gens,
		Flights:      flights,
		Observer:     cfg.RoomObserver,
		Trail:        cfg.Trail,
		SendTimeout:  cfg.SendTimeout,
	}, append(s.Options(), cfg.RoomOptions...)...)
	roomProps := func(string) *actor.Props { return sharedRoomProps }
	var preload func([]string) func()
	if p, ok := cfg.Provider.(rooms.Preloader); ok {
		// The start-up sweep reads the journals ahead in one pass.
		preload = p.Preload
	}
	roomsProps := rooms.Props(rooms.Config{
		Rooms: cfg.Rooms, MaxConcurrent: cfg.MaxConcurrent, RoomProps: roomProps,
		MaxRestarts: cfg.RoomRestarts, RestartWindow: cfg.RoomRestartWindow,
		RespawnBase: cfg.RespawnBase, RespawnMax: cfg.RespawnMax,
		Preload: preload,
		Clock:   cfg.Clock, Logger: cfg.Logger,
	}, s.Options()...)
	children := []Child{{Name: "rooms", Props: roomsProps}}
	if cfg.ToolWorkers > 0 {
		children = append(children, Child{Name: "tools", Props: tools.Props(cfg.ToolWorkers, cfg.Logger, s.Options()...)})
	}
	if cfg.Sync != nil {
		// Every /sync outcome tells the rooms whether the homeserver may
		// have restarted (room.Flights.SyncOutcome).
		observe := flights.SyncOutcome
		if o := cfg.Sync.Observer; o != nil {
			observe = func(ok bool) { o(ok); flights.SyncOutcome(ok) }
		}
		children = append(children, Child{Name: "sync", Props: syncer.Props(syncer.Config{
			Source: cfg.Sync.Source, Ledger: cfg.Sync.Ledger, Rooms: s.RoomsPID(),
			Watchdog: cfg.Sync.Watchdog, Backoff: cfg.Sync.Backoff,
			Clock: cfg.Clock, Logger: cfg.Logger, Hooks: cfg.Sync.Hooks, Observer: observe, Trail: cfg.Trail,
			// From its first commit on, the rooms may trust the ledger's
			// record of Lisa's replies (room.Flights.SyncCommitted).
			Committed: flights.SyncCommitted,
		}, s.Options()...)})
	} else {
		// No sync: the rooms' inboxes are fed directly, with no cursor
		// to catch up from.
		flights.SyncCommitted()
	}
	return Props(children, 5, time.Minute, cfg.OnLost, s.Options()...)
}

// SyncConfig configures the sync actor.
type SyncConfig struct {
	Source   syncer.Source
	Ledger   syncer.Ledger
	Watchdog time.Duration
	// Backoff spaces failed requests (see syncer.NewBackoff).
	Backoff  backoff.Policy
	Hooks    *syncer.Hooks
	Observer func(ok bool)
}

// ToolsPID returns the address of the tool pool.
func (s *System) ToolsPID() *actor.PID {
	return actor.NewPID(s.Actors.Address(), "app/tools")
}

// SyncPID returns the address of the sync actor.
func (s *System) SyncPID() *actor.PID {
	return actor.NewPID(s.Actors.Address(), "app/sync")
}

// RoomsPID returns the address of the rooms supervisor.
func (s *System) RoomsPID() *actor.PID {
	return actor.NewPID(s.Actors.Address(), "app/rooms")
}

// BusyRooms asks the rooms supervisor how many rooms have work in hand
// that a graceful shutdown waits for: a concurrency slot, or a reply being
// sent or looked up (rooms.IdleRequest). It blocks up to timeout; call it
// from outside the actors. An error means the supervisor did not answer
// (it is gone, or too slow).
func (s *System) BusyRooms(timeout time.Duration) (int, error) {
	res, err := s.Root.RequestFuture(s.RoomsPID(), &rooms.IdleRequest{}, timeout).Result()
	if err != nil {
		return 0, err
	}
	idle, ok := res.(*rooms.Idle)
	if !ok {
		return 0, fmt.Errorf("app: rooms answered an idle request with %T", res)
	}
	return idle.Busy, nil
}

// RoomPID returns the address of a room's actor.
func (s *System) RoomPID(roomID string) *actor.PID {
	return actor.NewPID(s.Actors.Address(), RoomActorID(roomID))
}

// RoomActorID is the ID of a room's actor, which is also the name its
// journal is stored under.
func RoomActorID(roomID string) string { return "app/rooms/" + roomID }
