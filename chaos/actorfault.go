package chaos

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"reflect"
	"strings"
	"sync"

	"github.com/asynkron/protoactor-go/actor"
)

// Kind is one kind of actor fault.
type Kind uint8

// Actor fault kinds.
const (
	// NoFault lets the message through.
	NoFault Kind = iota
	// PanicBeforeSend panics at the actor's next send, before it leaves.
	PanicBeforeSend
	// PanicAfterSend panics right after the actor's next send left.
	PanicAfterSend
	// StopAfterSend stops the actor after its next send (the current
	// Receive finishes first).
	StopAfterSend
	// PanicOnReceive panics before the actor sees the message.
	PanicOnReceive
)

var kindNames = map[Kind]string{
	NoFault: "none", PanicBeforeSend: "panic-before-send", PanicAfterSend: "panic-after-send",
	StopAfterSend: "stop-after-send", PanicOnReceive: "panic-on-receive",
}

// AllKinds are the actor fault kinds random faults are drawn from by
// default.
var AllKinds = []Kind{PanicBeforeSend, PanicAfterSend, StopAfterSend, PanicOnReceive}

// String returns the kind's name as used in logs and reports.
func (k Kind) String() string {
	if n, ok := kindNames[k]; ok {
		return n
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// MarshalText encodes the kind by name.
func (k Kind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText decodes a kind name.
func (k *Kind) UnmarshalText(b []byte) error {
	for kind, name := range kindNames {
		if name == string(b) {
			*k = kind
			return nil
		}
	}
	return fmt.Errorf("chaos: unknown actor fault kind %q", b)
}

// Target is a fault aimed at one place: actors whose ID contains Actor,
// receiving messages whose Go type (as printed by %T, e.g.
// "*messages.Nudge") contains Message. Empty fields match anything.
type Target struct {
	Actor   string `json:"actor,omitempty"`
	Message string `json:"message,omitempty"`
	Kind    Kind   `json:"kind"`
	// Rate is the probability per matching message; 0 means every one.
	Rate float64 `json:"rate,omitempty"`
}

// ActorPlan says which actor faults to inject. Decisions are a pure
// function of the seed, the actor ID, the message type and how many such
// messages that actor received before, so a seed replays the same faults
// for the same message sequence whatever the interleaving of other
// actors.
type ActorPlan struct {
	Seed uint64 `json:"seed"`
	// Rate is the probability that a message an actor receives triggers
	// a random fault of one of Kinds.
	Rate  float64 `json:"rate,omitempty"`
	Kinds []Kind  `json:"kinds,omitempty"`
	// Actors, when set, restricts random faults to actors whose ID
	// contains one of these strings.
	Actors []string `json:"actors,omitempty"`
	// Targets are checked before random faults.
	Targets []Target `json:"targets,omitempty"`
	// Kills gives, per failpoint name ("after-sync-commit", "before-send",
	// "after-send"), the probability that the process SIGKILLs itself
	// when it passes that point.
	Kills map[string]float64 `json:"kills,omitempty"`
}

// PlanEnv names the environment variable through which `lisa run` receives
// a JSON ActorPlan. It is for chaos campaigns only; operators never set it.
const PlanEnv = "LISA_CHAOS_PLAN"

// ParsePlan decodes and checks a JSON plan.
func ParsePlan(s string) (ActorPlan, error) {
	var p ActorPlan
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return ActorPlan{}, fmt.Errorf("chaos: bad plan: %w", err)
	}
	if p.Rate < 0 || p.Rate > 1 {
		return ActorPlan{}, fmt.Errorf("chaos: rate %v is not a probability", p.Rate)
	}
	for name, r := range p.Kills {
		if r < 0 || r > 1 {
			return ActorPlan{}, fmt.Errorf("chaos: kill rate %v for %q is not a probability", r, name)
		}
	}
	for _, t := range p.Targets {
		if t.Kind == NoFault || t.Rate < 0 || t.Rate > 1 {
			return ActorPlan{}, fmt.Errorf("chaos: bad target %+v", t)
		}
	}
	return p, nil
}

// Encode returns the plan as JSON for PlanEnv.
func (p ActorPlan) Encode() string {
	b, _ := json.Marshal(p)
	return string(b)
}

// Fault is one injected actor fault.
type Fault struct {
	Kind    Kind
	Actor   string
	Message string
}

// Injector applies an ActorPlan to an actor system.
type Injector struct {
	plan    ActorPlan
	onFault func(Fault)

	mu     sync.Mutex
	counts map[string]uint64 // actor ID + message type -> messages seen
	armed  map[string]armed  // actor ID -> send fault waiting for its send
}

type armed struct {
	kind Kind
	msg  string
}

// NewInjector returns an injector for plan; onFault (which may be nil)
// hears of every fault just before it happens.
func NewInjector(plan ActorPlan, onFault func(Fault)) *Injector {
	if len(plan.Kinds) == 0 {
		plan.Kinds = AllKinds
	}
	if onFault == nil {
		onFault = func(Fault) {}
	}
	return &Injector{plan: plan, onFault: onFault, counts: map[string]uint64{}, armed: map[string]armed{}}
}

// chaosPanic is the value injected panics carry.
type chaosPanic struct{ what string }

func (c chaosPanic) Error() string { return "chaos: injected " + c.what }

// eligible reports whether faults may hit msg: protoactor's own lifecycle
// and system messages are left alone (a panic on Started only loops
// until the supervisor gives up, which tests protoactor, not Lisa).
func eligible(msg any) bool {
	t := reflect.TypeOf(msg)
	if t == nil {
		return false
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return !strings.HasPrefix(t.PkgPath(), "github.com/asynkron/protoactor-go")
}

// decide returns the fault for the n-th message of type msg received by
// actor id.
func (in *Injector) decide(id, msg string) Kind {
	in.mu.Lock()
	key := id + "\x00" + msg
	n := in.counts[key]
	in.counts[key] = n + 1
	in.mu.Unlock()
	for i, t := range in.plan.Targets {
		if !strings.Contains(id, t.Actor) || !strings.Contains(msg, t.Message) {
			continue
		}
		if t.Rate == 0 || unit(in.plan.Seed, id, msg, n, uint64(i)+1) < t.Rate {
			return t.Kind
		}
	}
	if in.plan.Rate == 0 || !in.random(id) {
		return NoFault
	}
	u := unit(in.plan.Seed, id, msg, n, 0)
	if u >= in.plan.Rate {
		return NoFault
	}
	// Reuse the draw: below Rate it is uniform in [0, Rate).
	return in.plan.Kinds[int(u/in.plan.Rate*float64(len(in.plan.Kinds)))%len(in.plan.Kinds)]
}

func (in *Injector) random(id string) bool {
	if len(in.plan.Actors) == 0 {
		return true
	}
	for _, a := range in.plan.Actors {
		if strings.Contains(id, a) {
			return true
		}
	}
	return false
}

// unit hashes its inputs to a number in [0, 1).
func unit(seed uint64, id, msg string, n, salt uint64) float64 {
	h := fnv.New64a()
	var b [8]byte
	for _, v := range []uint64{seed, n, salt} {
		for i := range b {
			b[i] = byte(v >> (8 * i))
		}
		_, _ = h.Write(b[:])
	}
	_, _ = h.Write([]byte(id))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(msg))
	return float64(mix(h.Sum64())>>11) / (1 << 53)
}

// mix is splitmix64's finaliser: it spreads FNV's weak low bits.
func mix(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// Receiver decides per received message: it panics for PanicOnReceive and
// arms a send fault for the send kinds. A send fault that the handler
// never reaches (it sent nothing) is dropped without being counted.
func (in *Injector) Receiver() actor.ReceiverMiddleware {
	return func(next actor.ReceiverFunc) actor.ReceiverFunc {
		return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
			self := c.Self()
			if self == nil || !eligible(env.Message) {
				next(c, env)
				return
			}
			msg := fmt.Sprintf("%T", env.Message)
			switch k := in.decide(self.Id, msg); k {
			case NoFault:
			case PanicOnReceive:
				in.onFault(Fault{Kind: k, Actor: self.Id, Message: msg})
				panic(chaosPanic{k.String()})
			default:
				in.mu.Lock()
				in.armed[self.Id] = armed{kind: k, msg: msg}
				in.mu.Unlock()
			}
			defer in.disarm(self.Id)
			next(c, env)
		}
	}
}

func (in *Injector) disarm(id string) {
	in.mu.Lock()
	delete(in.armed, id)
	in.mu.Unlock()
}

func (in *Injector) take(id string) (armed, bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	a, ok := in.armed[id]
	if ok {
		delete(in.armed, id)
	}
	return a, ok
}

// Sender fires the send fault armed for the sending actor, if any.
func (in *Injector) Sender() actor.SenderMiddleware {
	return func(next actor.SenderFunc) actor.SenderFunc {
		return func(c actor.SenderContext, target *actor.PID, env *actor.MessageEnvelope) {
			self := c.Self()
			var a armed
			var ok bool
			if self != nil {
				a, ok = in.take(self.Id)
			}
			if !ok {
				next(c, target, env)
				return
			}
			f := Fault{Kind: a.kind, Actor: self.Id, Message: a.msg}
			if a.kind == PanicBeforeSend {
				in.onFault(f)
				panic(chaosPanic{a.kind.String()})
			}
			next(c, target, env)
			in.onFault(f)
			switch a.kind {
			case PanicAfterSend:
				panic(chaosPanic{a.kind.String()})
			case StopAfterSend:
				if ctx, ok := c.(actor.Context); ok {
					ctx.Stop(self)
				}
			}
		}
	}
}

// Spawn returns spawn middleware that gives every actor spawned through
// it, and every descendant of those, the injector's sender and receiver
// middleware. Root it with RootContext.WithSpawnMiddleware.
func (in *Injector) Spawn() actor.SpawnMiddleware {
	var self actor.SpawnMiddleware
	recv, send := in.Receiver(), in.Sender()
	self = func(next actor.SpawnFunc) actor.SpawnFunc {
		return func(sys *actor.ActorSystem, id string, p *actor.Props, parent actor.SpawnerContext) (*actor.PID, error) {
			return next(sys, id, p.Clone(actor.WithReceiverMiddleware(recv), actor.WithSenderMiddleware(send),
				actor.WithSpawnMiddleware(self)), parent)
		}
	}
	return self
}

// KillDecider returns, for failpoint name, a function that reports whether
// the process should kill itself now; nil when the plan never kills there.
// Decisions are drawn from the seed and how often the point was passed.
func (in *Injector) KillDecider(name string) func() bool {
	rate := in.plan.Kills[name]
	if rate <= 0 {
		return nil
	}
	var mu sync.Mutex
	var n uint64
	return func() bool {
		mu.Lock()
		i := n
		n++
		mu.Unlock()
		return unit(in.plan.Seed, "failpoint", name, i, 0) < rate
	}
}
