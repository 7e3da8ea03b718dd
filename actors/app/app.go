package app

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/lisabot/lisa/actors/observe"
)

// Child is one top-level actor under app.
type Child struct {
	Name  string
	Props *actor.Props
}

// Props returns the app supervisor's props. It spawns children in order on
// start; a failing child is restarted up to maxRestarts times per window,
// then stopped. A child that stops while app is not stopping is reported
// to onLost: Lisa without intake or rooms must not pretend to run. A child
// that fails while app is stopping is stopped, never restarted (see
// HandleFailure).
func Props(children []Child, maxRestarts int, window time.Duration, onLost func(child string), opts ...actor.PropsOption) *actor.Props {
	strategy := actor.NewOneForOneStrategy(maxRestarts, window, actor.DefaultDecider)
	return actor.PropsFromProducer(func() actor.Actor {
		return &appActor{children: children, onLost: onLost, strategy: strategy}
	}, opts...)
}

type appActor struct {
	children []Child
	onLost   func(string)
	strategy actor.SupervisorStrategy
	stopping bool
}

// HandleFailure makes app its children's strategy (protoactor asks the
// actor before its props' supervisor). While app is stopping, a failed
// child is stopped: protoactor's restart sets the child's state to
// restarting even when it was already stopping, so a child that panicked
// while waiting for its own children to stop would come back to life and
// app would wait for it for ever (seen in a chaos campaign: an injected
// panic in rooms during SIGTERM, a 10 s "future: timeout" and exit 1).
// Otherwise the one-for-one strategy of Props decides. It runs on app's
// own goroutine.
func (a *appActor) HandleFailure(sys *actor.ActorSystem, sup actor.Supervisor, child *actor.PID, rs *actor.RestartStatistics, reason, msg any) {
	if a.stopping {
		sys.EventStream.Publish(&actor.SupervisorEvent{Child: child, Reason: reason, Directive: actor.StopDirective})
		sup.StopChildren(child)
		return
	}
	a.strategy.HandleFailure(sys, sup, child, rs, reason, msg)
}

func (a *appActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		for _, c := range a.children {
			if _, err := ctx.SpawnNamed(c.Props, c.Name); err != nil {
				panic(fmt.Errorf("app: spawn %s: %w", c.Name, err))
			}
		}
	case *actor.Stopping:
		a.stopping = true
	case *actor.Terminated:
		if !a.stopping && a.onLost != nil {
			a.onLost(strings.TrimPrefix(m.Who.Id, ctx.Self().Id+"/"))
		}
	}
}

// System is a running actor system with observation attached.
type System struct {
	Actors   *actor.ActorSystem
	Root     *actor.RootContext
	Registry *observe.Registry
	log      *slog.Logger
	unsub    func()
	app      *actor.PID
}

// NewSystem creates an actor system whose protoactor logging goes to log
// at Warn and above (its Info chatter is dropped).
func NewSystem(log *slog.Logger) *System {
	protoLog := slog.New(minLevel{h: log.With("lib", "protoactor").Handler(), min: slog.LevelWarn})
	sys := actor.NewActorSystem(
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return protoLog }),
		actor.WithDeadLetterRequestLogging(false),
	)
	reg := observe.NewRegistry()
	return &System{
		Actors:   sys,
		Root:     actor.NewRootContext(sys, nil),
		Registry: reg,
		log:      log,
		unsub:    reg.Subscribe(sys),
	}
}

// Options returns the props options every Lisa actor gets: the tracking
// mailbox and the panic-stack logger.
func (s *System) Options() []actor.PropsOption {
	return []actor.PropsOption{
		actor.WithMailbox(s.Registry.Mailbox()),
		actor.WithReceiverMiddleware(observe.PanicLogger(s.log)),
	}
}

// UseSpawnMiddleware makes every actor spawned from now on, and all its
// descendants, pass through m (chaos campaigns inject faults this way).
// Call it before Start.
func (s *System) UseSpawnMiddleware(m actor.SpawnMiddleware) {
	s.Root = s.Root.WithSpawnMiddleware(m)
}

// Start spawns the app actor named "app".
func (s *System) Start(props *actor.Props) (*actor.PID, error) {
	pid, err := s.Root.SpawnNamed(props, "app")
	if err != nil {
		return nil, err
	}
	s.app = pid
	return pid, nil
}

// Stop stops the app actor and waits until the whole tree is gone or ctx
// ends. (protoactor's Shutdown alone does not stop actors.)
func (s *System) Stop(ctx context.Context) error {
	defer s.unsub()
	if s.app == nil {
		s.Actors.Shutdown()
		return nil
	}
	done := make(chan error, 1)
	go func() { done <- s.Root.StopFuture(s.app).Wait() }()
	select {
	case err := <-done:
		s.Actors.Shutdown()
		return err
	case <-ctx.Done():
		return fmt.Errorf("app: actors did not stop in time: %w", ctx.Err())
	}
}

// RealClock is the wall clock.
type RealClock struct{}

// Now returns the current time.
func (RealClock) Now() time.Time { return time.Now() }

// AfterFunc runs f after d.
func (RealClock) AfterFunc(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }

// minLevel drops records below min.
type minLevel struct {
	h   slog.Handler
	min slog.Level
}

func (m minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= m.min && m.h.Enabled(ctx, l)
}
func (m minLevel) Handle(ctx context.Context, r slog.Record) error { return m.h.Handle(ctx, r) }
func (m minLevel) WithAttrs(a []slog.Attr) slog.Handler {
	return minLevel{h: m.h.WithAttrs(a), min: m.min}
}
func (m minLevel) WithGroup(g string) slog.Handler { return minLevel{h: m.h.WithGroup(g), min: m.min} }
