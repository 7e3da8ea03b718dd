package observe

import (
	"log/slog"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/lisabot/lisa/messages"
)

// Stats is one actor's counters at a moment.
type Stats struct {
	// ID is the actor's full path, e.g. "app/rooms/!r:hs".
	ID string
	// Len is the number of user messages waiting in the mailbox.
	Len int
	// Posted and Received count user messages since the mailbox was made.
	Posted, Received int64
	// Restarts counts restarts of this actor, including those before the
	// current mailbox (from supervisor events).
	Restarts int64
	// Failures counts panics this actor raised.
	Failures int64
	// Age is how long the current incarnation's mailbox has existed.
	Age time.Duration
}

// Registry tracks every actor whose props use its mailbox producer.
type Registry struct {
	mailboxes sync.Map // id -> *tracked
	mu        sync.Mutex
	restarts  map[string]int64
	failures  map[string]int64
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{restarts: map[string]int64{}, failures: map[string]int64{}}
}

// Mailbox returns a mailbox producer that wraps protoactor's unbounded
// mailbox with counters. (Bounded mailboxes block senders and
// BoundedDropping spins a core; neither is used.)
func (r *Registry) Mailbox() actor.MailboxProducer {
	inner := actor.Unbounded()
	return func() actor.Mailbox { return &tracked{Mailbox: inner(), reg: r} }
}

// Subscribe counts supervisor decisions from sys's event stream. Call once
// per actor system; the returned function unsubscribes.
func (r *Registry) Subscribe(sys *actor.ActorSystem) func() {
	sub := sys.EventStream.Subscribe(func(evt any) {
		se, ok := evt.(*actor.SupervisorEvent)
		if !ok || se.Child == nil {
			return
		}
		r.mu.Lock()
		r.failures[se.Child.Id]++
		if se.Directive == actor.RestartDirective {
			r.restarts[se.Child.Id]++
		}
		r.mu.Unlock()
	})
	return func() { sys.EventStream.Unsubscribe(sub) }
}

// Snapshot returns the counters of every live tracked actor, sorted by ID.
// Actors no longer in sys's process registry are pruned.
func (r *Registry) Snapshot(sys *actor.ActorSystem) []Stats {
	var out []Stats
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mailboxes.Range(func(k, v any) bool {
		id := k.(string)
		if _, ok := sys.ProcessRegistry.GetLocal(id); !ok {
			r.mailboxes.Delete(id)
			return true
		}
		m := v.(*tracked)
		out = append(out, Stats{
			ID:       id,
			Len:      m.UserMessageCount(),
			Posted:   m.posted.Load(),
			Received: m.received.Load(),
			Restarts: r.restarts[id],
			Failures: max(r.failures[id], m.failures.Load()),
			Age:      time.Since(m.since),
		})
		return true
	})
	slices.SortFunc(out, func(a, b Stats) int {
		if a.ID < b.ID {
			return -1
		}
		if a.ID > b.ID {
			return 1
		}
		return 0
	})
	return out
}

// Get returns one actor's counters.
func (r *Registry) Get(sys *actor.ActorSystem, id string) (Stats, bool) {
	for _, s := range r.Snapshot(sys) {
		if s.ID == id {
			return s, true
		}
	}
	return Stats{}, false
}

type tracked struct {
	actor.Mailbox
	reg                        *Registry
	since                      time.Time
	posted, received, failures atomic.Int64

	// protoactor's spawn adds the new process to the registry before it
	// gives the mailbox its dispatcher, and a message posted in between
	// dereferences the missing dispatcher: the process dies. A send to a
	// PID whose actor has stopped resolves its name again and can reach a
	// successor of the same name in exactly that window (a room's effect
	// finishing while the room is spawned again; seen once in a chaos
	// campaign). Messages posted before the handlers are registered wait
	// in pending and follow, in order, once they are.
	ready   atomic.Bool
	mu      sync.Mutex
	pending []pendingMessage
}

// pendingMessage is a message posted before the mailbox could run.
type pendingMessage struct {
	msg    any
	system bool
}

func (m *tracked) RegisterHandlers(inv actor.MessageInvoker, d actor.Dispatcher) {
	// protoactor sets the context's self PID before registering handlers.
	if c, ok := inv.(actor.Context); ok && c.Self() != nil {
		m.since = time.Now()
		m.reg.mailboxes.Store(c.Self().Id, m)
	}
	m.Mailbox.RegisterHandlers(&invoker{MessageInvoker: inv, mb: m}, d)
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, p := range m.pending {
		if p.system {
			m.Mailbox.PostSystemMessage(p.msg)
		} else {
			m.Mailbox.PostUserMessage(p.msg)
		}
	}
	m.pending = nil
	m.ready.Store(true)
}

// held keeps msg for later if the handlers are not registered yet.
func (m *tracked) held(msg any, system bool) bool {
	if m.ready.Load() {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ready.Load() {
		return false
	}
	m.pending = append(m.pending, pendingMessage{msg: msg, system: system})
	return true
}

func (m *tracked) PostUserMessage(msg any) {
	m.posted.Add(1)
	if !m.held(msg, false) {
		m.Mailbox.PostUserMessage(msg)
	}
}

func (m *tracked) PostSystemMessage(msg any) {
	if !m.held(msg, true) {
		m.Mailbox.PostSystemMessage(msg)
	}
}

type invoker struct {
	actor.MessageInvoker
	mb *tracked
}

func (i *invoker) InvokeUserMessage(msg any) {
	i.mb.received.Add(1)
	i.MessageInvoker.InvokeUserMessage(msg)
}

func (i *invoker) EscalateFailure(reason, msg any) {
	i.mb.failures.Add(1)
	i.MessageInvoker.EscalateFailure(reason, msg)
}

// PanicLogger returns a receiver middleware that logs a panic's stack and
// re-panics so supervision proceeds as usual. protoactor itself logs
// failures without a stack.
func PanicLogger(log *slog.Logger) actor.ReceiverMiddleware {
	return func(next actor.ReceiverFunc) actor.ReceiverFunc {
		return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
			defer func() {
				if r := recover(); r != nil {
					log.Error("actor panicked", "actor", messages.ActorLogID(c.Self().Id), "message_type", typeName(env.Message), "panic", panicText(r), "stack", string(debug.Stack()))
					panic(r)
				}
			}()
			next(c, env)
		}
	}
}
