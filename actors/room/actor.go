package room

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	actorpersist "github.com/asynkron/protoactor-go/persistence"
	"google.golang.org/protobuf/proto"

	"github.com/lisabot/lisa/actors/rooms"
	"github.com/lisabot/lisa/messages"
	"github.com/lisabot/lisa/messages/roompb"
)

// Inbox is the room's view of the sync ledger. The journal behind the
// room's Provider must remove a candidate's inbox entry when it stores the
// InvocationQueued that takes it in, in the same write (as
// persistence.Badger does): the room removes only entries it does not
// queue.
type Inbox interface {
	Inbox(room string) ([]*roompb.Candidate, error)
	RemoveInbox(room, eventID string) error
}

// BotEvents records Lisa's own events for reply detection, and tells
// which questions she answered (the sync records her replies it sees).
type BotEvents interface {
	RecordBotEvent(room, eventID, inReplyTo string) error
	// RepliedTo returns the event Lisa answered invoking with, or "".
	RepliedTo(room, invoking string) (string, error)
}

// Sender delivers replies to the homeserver. Errors should be
// *messages.Error so the room can tell permanent, ambiguous and rate-limited
// failures apart; any other error counts as transient and ambiguous.
type Sender interface {
	// SendReply sends content to room with txnID and returns the event ID.
	SendReply(ctx context.Context, room, txnID string, content []byte) (string, error)
	// FindReply looks for a reply Lisa already sent for invokingEventID
	// (by transaction ID or relation) and returns its event ID. It is the
	// check before a reply is sent again: it must not miss one it can
	// read.
	FindReply(ctx context.Context, room, invokingEventID, txnID string) (string, bool, error)
	// FindReplyToRedact is FindReply for a reply to be redacted: it may
	// stop scanning at the question's time, since a reply it misses only
	// stays standing.
	FindReplyToRedact(ctx context.Context, room, invokingEventID, txnID string) (string, bool, error)
	// React puts the reaction key on eventID and returns the reaction's
	// event ID.
	React(ctx context.Context, room, eventID, key, txnID string) (string, error)
	// FindReactions looks for Lisa's reactions key on eventID and
	// returns their event IDs (none: an empty slice).
	FindReactions(ctx context.Context, room, eventID, key string) ([]string, error)
	// Redact redacts one of Lisa's events.
	Redact(ctx context.Context, room, eventID, txnID string) error
}

// Durable makes the journal safe from power loss. The journal's
// Provider may acknowledge an event before it is synced to disk (every
// acknowledged event survives a process kill, in order). Barrier marks
// the journal as it is now; the function it returns waits until
// everything up to the mark is synced. The room marks when it decides on
// something it does outside the journal that the journal must know of
// after a power failure (a reply, a reaction, a redaction) and waits
// before doing it.
type Durable interface {
	Barrier() func() error
}

// Clock supplies time to the room.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f after d; the returned function cancels it.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

// Observer receives what operators measure. Implementations must be safe
// for concurrent use and must not block.
type Observer interface {
	// Outcome reports a finished invocation: "answered", "error_reply"
	// or "abandoned".
	Outcome(outcome string)
	// Phase reports how long a phase took: "queue" (queued to first
	// attempt) or "send".
	Phase(phase string, d time.Duration)
	// Lookup reports an ended lookup of Lisa's events to redact: its kind
	// (LookupReply, LookupReaction) and result — LookupFound,
	// LookupNone, LookupGivenUp or LookupDropped.
	Lookup(kind, result string)
	// RateLimited reports a send the homeserver refused for its rate
	// limit (429 M_LIMIT_EXCEEDED), with the wait it asked for
	// (retry_after_ms; zero when it named none). The send is tried again
	// after that wait (capped at Policy.SendRetryMax), never dropped.
	RateLimited(wait time.Duration)
}

// Trail records what the room decided about its events. Implementations
// must be safe for concurrent use and must not block.
type Trail interface {
	Journaled(room string, ev proto.Message, now time.Time)
	Attempted(room, eventID string, attempt uint32, st messages.AttemptStats, code string, now time.Time)
	// SendFailed records a failed send of a reply with the wait the
	// homeserver asked for (zero: none named), so `why` shows a reply
	// waiting for a rate limit.
	SendFailed(room, eventID, code string, wait time.Duration, now time.Time)
}

// Results of a lookup of Lisa's events to redact (Observer.Lookup);
// LookupDropped is the fourth.
const (
	LookupFound   = "found"
	LookupNone    = "none"
	LookupGivenUp = "given_up"
)

// Config wires a room actor.
type Config struct {
	Policy    Policy
	Provider  actorpersist.Provider
	Inbox     Inbox
	BotEvents BotEvents
	Sender    Sender
	// Durable, if set, is synced before each send (see Durable); nil
	// means the Provider syncs every event before acknowledging it.
	Durable Durable
	// NewInvocation returns the props of the invocation child for one
	// attempt. The child must report a messages.InvocationResult to its
	// parent.
	NewInvocation func(c *roompb.Candidate, attempt uint32, deadline time.Time) *actor.Props
	// ChildOptions are applied to every child's props (mailbox tracking,
	// panic logging).
	ChildOptions []actor.PropsOption
	Clock        Clock
	Logger       *slog.Logger
	// Flights is shared by all rooms and outlives incarnations.
	Flights *Flights
	// SendTimeout bounds one send. Sends are not cancelled when the room
	// restarts: the next incarnation waits for them (see Flights).
	SendTimeout time.Duration
	// Observer, if set, receives outcomes and phase durations (metrics).
	Observer Observer
	// Trail, if set, is told each journal event the room records and
	// each attempt's work (the event trail, a read model).
	Trail Trail
	// Generations hands out instance numbers so that results addressed to
	// a previous incarnation of the actor are recognised and dropped.
	Generations *atomic.Uint64
}

// Props returns the props of a room actor. Its supervisor stops a failing
// invocation child at once: retries are counted durably by the room, not in
// memory by protoactor.
//
// With cfg.Policy.RoomID empty, one Props serves every room: each actor
// takes its room ID from its name (it must be spawned under its parent,
// named by the room ID), so thousands of idle rooms share one Config,
// Props and middleware chain instead of holding a copy each.
func Props(cfg Config, opts ...actor.PropsOption) *actor.Props {
	stopChild := actor.NewOneForOneStrategy(0, 0, func(any) actor.Directive { return actor.StopDirective })
	all := append([]actor.PropsOption{
		actor.WithReceiverMiddleware(actorpersist.Using(cfg.Provider)),
		actor.WithSupervisor(stopChild),
	}, opts...)
	shared := &cfg
	return actor.PropsFromProducer(func() actor.Actor {
		return &roomActor{cfg: shared, room: shared.Policy.RoomID, gen: shared.Generations.Add(1)}
	}, all...)
}

type roomActor struct {
	actorpersist.Mixin
	cfg  *Config // shared by all rooms: read only
	room string
	m    *Machine
	gen  uint64
	// ctx is created when a lookup first needs it and cancelled when the
	// actor stops; idle rooms never pay for one.
	ctx       context.Context
	cancel    context.CancelFunc
	live      bool
	child     *actor.PID
	slotToken uint64
	slotSeq   uint32
	timers    map[uint64]func() bool
	timerSeq  uint64
	// busy is what the room last told its parent with rooms.RoomBusy.
	busy bool
	// unread: entries came with nudges since the room last read its
	// inbox; it reads it once its queue is empty, for any entry a lost
	// nudge left behind.
	unread bool
}

// Messages the actor sends itself; gen ties them to one incarnation.
type (
	inboxLoaded struct {
		gen uint64
		in  InboxLoaded
	}
	effectDone struct {
		gen uint64
		in  Input
	}
	timerFired struct {
		gen, id uint64
		in      Input
	}
)

func (r *roomActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		if r.room == "" {
			r.room = roomFromName(ctx.Self(), ctx.Parent())
		}
		policy := r.cfg.Policy
		policy.RoomID = r.room
		r.m = NewMachine(policy)
	case *roompb.RoomSnapshot:
		r.m.Restore(FromSnapshot(m))
	case *actorpersist.RequestSnapshot:
		r.PersistSnapshot(r.m.Snapshot())
	case *actorpersist.ReplayComplete:
		r.live = true
		// Sent before any AcquireSlot of this incarnation, after any of
		// its predecessor's: rooms drops what the predecessor held.
		ctx.Request(ctx.Parent(), &messages.ResetSlots{})
		r.cfg.Logger.Debug("room recovered", "room", messages.RoomID(r.room), "queue", len(r.m.Queue), "next_index", r.m.NextIndex)
		r.step(ctx, Recovered{})
	case *messages.Nudge:
		switch {
		case !r.live:
			// The inbox is read when the replay completes.
		case len(m.Entries) > 0:
			// The new entries, as committed: no read on the mention's
			// path.
			r.unread = true
			r.step(ctx, r.annotate(m.Entries, !r.cfg.Flights.Committed()))
		default:
			r.perform(ctx, LoadInbox{})
		}
	case *inboxLoaded:
		if m.gen == r.gen {
			r.step(ctx, m.in)
		}
	case *messages.SlotGranted:
		if m.Token == r.slotToken {
			r.step(ctx, SlotGranted{})
		}
	case *messages.InvocationResult:
		if r.child == nil || ctx.Sender() == nil || !ctx.Sender().Equal(r.child) {
			return
		}
		ctx.Stop(r.child) // stop it ourselves: Terminated may overtake results
		r.child = nil
		if r.cfg.Trail != nil {
			code := ""
			if m.Err != nil {
				code = string(m.Err.Code)
			}
			r.cfg.Trail.Attempted(r.room, string(m.EventID), m.Attempt, m.Stats, code, r.cfg.Clock.Now())
		}
		r.step(ctx, InvocationDone{EventID: string(m.EventID), Attempt: m.Attempt, Content: m.Content, Err: m.Err})
	case *actor.Terminated:
		if r.child != nil && m.Who.Equal(r.child) {
			r.child = nil
			head := r.m.Head()
			if head != nil {
				r.step(ctx, InvocationLost{EventID: head.EventID(), Attempt: r.m.attempt})
			}
		}
	case *effectDone:
		if m.gen == r.gen {
			r.step(ctx, m.in)
		}
	case *timerFired:
		if m.gen == r.gen {
			delete(r.timers, m.id)
			r.step(ctx, m.in)
		}
	case *messages.RoomStatusRequest:
		ctx.Respond(r.status())
	case *messages.ResendHeldRequest:
		n := 0
		if r.live {
			n = r.m.Releasable(r.cfg.Clock.Now())
			r.step(ctx, ResendHeld{})
		}
		ctx.Respond(&messages.ResendHeldResult{Room: messages.RoomID(r.room), Released: n, Live: r.live})
	case *actor.Stopping, *actor.Restarting:
		r.live = false
		if r.cancel != nil {
			r.cancel()
		}
		for _, stop := range r.timers {
			stop()
		}
		r.timers = nil
	default:
		if ev, ok := m.(proto.Message); ok && r.Recovering() {
			if err := r.m.Apply(ev); err != nil {
				// A journal the machine cannot replay: the room fails
				// (supervised) rather than run on a state it cannot trust.
				panic(fmt.Errorf("room: replaying %s: %w", ev.ProtoReflect().Descriptor().Name(), err))
			}
		}
	}
}

// step runs one input through the machine: perform the early effects,
// persist each event, apply it, perform the effects, and pump until
// nothing is left to do. Then it tells the parent if the room became busy
// or idle.
func (r *roomActor) step(ctx actor.Context, in Input) {
	if !r.live {
		return
	}
	now := r.cfg.Clock.Now()
	out := r.m.Decide(in, now)
	for {
		for _, eff := range out.Early {
			r.perform(ctx, eff)
		}
		for _, ev := range out.Events {
			r.record(ev, now)
		}
		for _, eff := range out.Effects {
			r.perform(ctx, eff)
		}
		if out = r.m.Pump(now); out.Empty() {
			break
		}
	}
	r.reportBusy(ctx)
}

// record persists one journal event, then applies it. Persist first, then
// apply: a snapshot taken inside PersistReceive must describe the state
// before ev. A storage failure panics inside PersistReceive with a
// *persistence.StorageError; the supervisor restarts the room, which
// replays what was really written.
func (r *roomActor) record(ev proto.Message, now time.Time) {
	r.PersistReceive(ev)
	if _, ok := ev.(*roompb.InvocationStarted); ok && r.cfg.Durable != nil {
		// The reply will wait for the journal to be synced up to here:
		// start that sync now, while the attempt works, not when the
		// answer is ready.
		r.cfg.Durable.Barrier()
	}
	r.observe(ev, now)
	if r.cfg.Trail != nil {
		r.cfg.Trail.Journaled(r.room, ev, now)
	}
	r.logTransition(ev)
	if err := r.m.Apply(ev); err != nil {
		panic(fmt.Errorf("room: applying %s: %w", ev.ProtoReflect().Descriptor().Name(), err))
	}
}

// reportBusy tells the parent (the rooms supervisor) when the room starts
// or stops having work in hand that a graceful shutdown waits for (see
// rooms.RoomBusy). Request, not Send: the supervisor keys it by sender.
func (r *roomActor) reportBusy(ctx actor.Context) {
	if busy := r.m.Busy(); busy != r.busy {
		r.busy = busy
		ctx.Request(ctx.Parent(), &rooms.RoomBusy{Busy: busy})
	}
	if r.unread && !r.busy && len(r.m.Queue) == 0 {
		r.unread = false
		r.loadInbox(ctx)
	}
}

// perform carries out one effect. Nothing here blocks: homeserver IO runs
// in goroutines whose results come back as messages.
func (r *roomActor) perform(ctx actor.Context, eff Effect) {
	switch e := eff.(type) {
	case LoadInbox:
		r.loadInbox(ctx)
	case RemoveInbox:
		if e.Outcome != "" {
			r.cfg.Logger.Info("inbox entry ignored", "room", messages.RoomID(r.room), "event", messages.EventID(e.EventID), "outcome", e.Outcome)
		}
		if err := r.cfg.Inbox.RemoveInbox(r.room, e.EventID); err != nil {
			panic(fmt.Errorf("room: remove inbox entry: %w", err))
		}
	case RequestSlot:
		// Tokens are unique across incarnations, so a grant meant for a
		// previous incarnation is never mistaken for the current one.
		r.slotSeq++
		r.slotToken = r.gen<<32 | uint64(r.slotSeq)
		ctx.Request(ctx.Parent(), &messages.AcquireSlot{Token: r.slotToken})
	case ReleaseSlot:
		ctx.Request(ctx.Parent(), &messages.ReleaseSlot{Token: r.slotToken}) // Request: rooms checks the sender
	case StartInvocation:
		props := r.cfg.NewInvocation(e.Candidate, e.Attempt, e.Deadline).Configure(r.cfg.ChildOptions...)
		child, err := ctx.SpawnNamed(props, fmt.Sprintf("inv-%d", r.m.NextIndex))
		if err != nil {
			panic(fmt.Errorf("room: spawn invocation: %w", err))
		}
		r.child = child
	case SendReply:
		r.sendReply(ctx, e)
	case Reconcile:
		r.reconcile(ctx, e)
	case CheckAnswered:
		r.checkAnswered(ctx, e)
	case RecordBotEvent:
		if err := r.cfg.BotEvents.RecordBotEvent(r.room, e.ReplyEventID, e.InReplyTo); err != nil {
			// Reply detection falls back to asking the homeserver.
			r.cfg.Logger.Warn("recording bot event failed", "room", messages.RoomID(r.room), "code", messages.CodeStorage)
		}
	case Schedule:
		r.schedule(ctx, e)
	case SendReaction:
		r.react(ctx, e)
	case Redact:
		r.redact(ctx, e)
	case FindToRedact:
		r.find(ctx, e)
	case CancelInvocation:
		if r.child != nil {
			ctx.Stop(r.child)
			r.child = nil
		}
	default:
		panic(fmt.Sprintf("room: unknown effect %T", eff))
	}
}

// loadInbox reads the room's inbox and hands the candidates to the
// machine as a message. Local disk reads are as fast as the journal write
// the plugin already does synchronously; network IO never runs here.
func (r *roomActor) loadInbox(ctx actor.Context) {
	r.unread = false
	// Asked before the read: entries read after the sync's first commit
	// are checked against a ledger that knows Lisa's replies since the
	// cursor.
	before := !r.cfg.Flights.Committed()
	cands, err := r.cfg.Inbox.Inbox(r.room)
	if err != nil {
		panic(fmt.Errorf("room: read inbox: %w", err))
	}
	if len(cands) > 0 {
		ctx.Send(ctx.Self(), &inboxLoaded{gen: r.gen, in: r.annotate(cands, before)})
	}
}

// annotate turns inbox entries into InboxLoaded, with the replies the
// bot-event ledger knows for them (InboxLoaded.Answered). before says the
// entries were read before the sync's first commit of this process. A
// ledger that cannot be read leaves the entries to CheckAnswered.
func (r *roomActor) annotate(cands []*roompb.Candidate, before bool) InboxLoaded {
	in := InboxLoaded{Candidates: cands, BeforeIntake: before}
	for _, c := range cands {
		if c.GetRedactsEventId() != "" || c.GetReplacesEventId() != "" || isPermissionChange(c) || r.m.Knows(c.GetEventId()) {
			continue
		}
		reply, err := r.cfg.BotEvents.RepliedTo(r.room, c.GetEventId())
		if err != nil {
			r.cfg.Logger.Warn("reading the bot-event ledger failed; the question is checked on the homeserver", "room", messages.RoomID(r.room), "code", messages.CodeStorage)
			in.BeforeIntake = true
			continue
		}
		if reply != "" {
			if in.Answered == nil {
				in.Answered = map[string]string{}
			}
			in.Answered[c.GetEventId()] = reply
			r.cfg.Logger.Warn("a question came back that Lisa had answered: the data dir is older than the room (a restored backup or snapshot?); recorded as answered",
				"room", messages.RoomID(r.room), "event", messages.EventID(c.GetEventId()), "reply", messages.EventID(reply))
		}
	}
	return in
}

// sendReply sends the head's reply in a goroutine; SendDone comes back
// as an effectDone.
func (r *roomActor) sendReply(ctx actor.Context, e SendReply) {
	room, cfg := r.room, r.cfg
	self, sys, gen := ctx.Self(), ctx.ActorSystem(), r.gen
	end := cfg.Flights.begin(room)
	synced := cfg.barrier()
	go func() {
		start := time.Now()
		var id string
		err := cfg.afterSync(synced, func(ctx context.Context) (err error) {
			id, err = cfg.Sender.SendReply(ctx, room, e.TxnID, e.Content)
			return err
		})
		done := SendDone{EventID: e.EventID, ReplyEventID: id}
		if err != nil {
			le := asError(err)
			done.Err, done.Ambiguous, done.RetryAfter = le, le.Ambiguous, le.RetryAfter
			if le.Unreachable {
				cfg.Flights.trouble() // before the flight ends: it counts for this send
			}
			if le.Code == messages.CodeMatrixRateLimit && !errors.Is(le.Err, messages.ErrRateLimitWait) && cfg.Observer != nil {
				cfg.Observer.RateLimited(le.RetryAfter)
			}
			if cfg.Trail != nil {
				cfg.Trail.SendFailed(room, e.EventID, string(le.Code), le.RetryAfter, time.Now())
			}
			cfg.Logger.Info("reply send failed", "room", messages.RoomID(room), "event", messages.EventID(e.EventID),
				"code", le.Code, "ambiguous", le.Ambiguous, "permanent", le.Permanent)
		}
		// The flight ends before the room hears of it, so a lookup
		// never overlaps the send.
		done.LateStoreFrom = end(done.Ambiguous)
		if cfg.Observer != nil {
			cfg.Observer.Phase("send", time.Since(start))
		}
		sys.Root.Send(self, &effectDone{gen: gen, in: done})
	}()
}

// barrier marks the journal as it is now; the function it returns makes
// every event up to the mark durable (see Durable). Its failure is a
// storage error: nothing was sent, so the room may try again.
func (c Config) barrier() func() error {
	if c.Durable == nil {
		return func() error { return nil }
	}
	wait := c.Durable.Barrier()
	return func() error {
		if err := wait(); err != nil {
			return &messages.Error{Code: messages.CodeStorage, Message: "journal not synced before sending", Err: err}
		}
		return nil
	}
}

// afterSync waits for synced (a barrier's wait), then runs send bounded
// by SendTimeout; nothing is sent if the journal could not be synced.
func (c Config) afterSync(synced func() error, send func(context.Context) error) error {
	if err := synced(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.SendTimeout)
	defer cancel()
	return send(ctx)
}

// reconcile looks the head's reply up on the homeserver in a goroutine,
// once no send of the room is in flight; ReconcileDone comes back as an
// effectDone. The lookup ends with this incarnation.
func (r *roomActor) reconcile(ctx actor.Context, e Reconcile) {
	if r.ctx == nil {
		r.ctx, r.cancel = context.WithCancel(context.Background())
	}
	room, cfg, lookupCtx := r.room, r.cfg, r.ctx
	self, sys, gen := ctx.Self(), ctx.ActorSystem(), r.gen
	go func() {
		if err := cfg.Flights.wait(lookupCtx, room); err != nil {
			return // this incarnation is gone
		}
		quiet, lookedAt := cfg.Flights.quietSince(room), cfg.Clock.Now()
		id, found, err := cfg.Sender.FindReply(lookupCtx, room, e.EventID, e.TxnID)
		var le *messages.Error
		if err != nil {
			cfg.Flights.lookupFailed(room)
			if le = asError(err); le.Unreachable {
				cfg.Flights.trouble()
			}
		}
		// Read after the lookup: a restart while it ran counts.
		late, trouble := cfg.Flights.lateStoreFrom(room), cfg.Flights.lastTrouble()
		done := ReconcileDone{EventID: e.EventID, Found: found, ReplyEventID: id, LookedAt: lookedAt, QuietSince: quiet,
			LateStoreFrom: late, TroubleAt: trouble, NoSendHere: !cfg.Flights.sentHere(room)}
		var code messages.Code
		if le != nil {
			done.Err, done.RetryAfter = le, le.RetryAfter
			code = le.Code
		}
		cfg.Logger.Info("reply looked up before sending", "room", messages.RoomID(room), "event", messages.EventID(e.EventID),
			"found", found, "code", code)
		sys.Root.Send(self, &effectDone{gen: gen, in: done})
	}()
}

// checkAnswered looks for an earlier reply of Lisa's to a question queued
// before this process's sync committed its first answer (see
// CheckAnswered): in the bot-event ledger once that commit is made, then
// on the homeserver. AnsweredChecked comes back as an effectDone. The
// check ends with this incarnation.
func (r *roomActor) checkAnswered(ctx actor.Context, e CheckAnswered) {
	if r.ctx == nil {
		r.ctx, r.cancel = context.WithCancel(context.Background())
	}
	room, cfg, lookupCtx := r.room, r.cfg, r.ctx
	self, sys, gen := ctx.Self(), ctx.ActorSystem(), r.gen
	go func() {
		if err := cfg.Flights.awaitCommit(lookupCtx); err != nil {
			return // this incarnation is gone
		}
		done := AnsweredChecked{EventID: e.EventID}
		where := "ledger"
		reply, err := cfg.BotEvents.RepliedTo(room, e.EventID)
		if err != nil || reply == "" {
			// The ledger holds what the sync saw since the cursor; a gap
			// it could not fill, or a failed read, leaves the homeserver.
			where = "homeserver"
			ctx, cancel := context.WithTimeout(lookupCtx, cfg.SendTimeout)
			var found bool
			reply, found, err = cfg.Sender.FindReply(ctx, room, e.EventID, e.TxnID)
			cancel()
			if err != nil {
				le := asError(err)
				done.Err, done.RetryAfter = le, le.RetryAfter
			} else if !found {
				reply = ""
			}
		}
		done.ReplyEventID = reply
		var code messages.Code
		if done.Err != nil {
			code = done.Err.Code
		}
		cfg.Logger.Info("question queued before this start checked for an earlier reply", "room", messages.RoomID(room),
			"event", messages.EventID(e.EventID), "found", reply != "", "where", where, "code", code)
		sys.Root.Send(self, &effectDone{gen: gen, in: done})
	}()
}

// react puts the wait reaction on an invoking message in a goroutine;
// ReactionDone comes back as an effectDone.
func (r *roomActor) react(ctx actor.Context, e SendReaction) {
	room, cfg := r.room, r.cfg
	self, sys, gen := ctx.Self(), ctx.ActorSystem(), r.gen
	synced := cfg.barrier()
	end := cfg.Flights.beginReaction(room)
	go func() {
		defer end() // after the result is on its way: a lookup waits for it
		var id string
		err := cfg.afterSync(synced, func(ctx context.Context) (err error) {
			id, err = cfg.Sender.React(ctx, room, e.EventID, e.Key, e.TxnID)
			return err
		})
		done := ReactionDone{EventID: e.EventID, ReactionEventID: id}
		if err != nil {
			done.Err = asError(err)
			done.RetryAfter = done.Err.RetryAfter
			cfg.Logger.Warn("wait reaction failed", "room", messages.RoomID(room), "event", messages.EventID(e.EventID), "code", done.Err.Code)
		}
		sys.Root.Send(self, &effectDone{gen: gen, in: done})
	}()
}

// find looks for Lisa's events to redact (see FindToRedact) in a
// goroutine, once no wait reaction of the room is on its way (a reaction
// still in flight could be missed); FindDone comes back as an effectDone.
// The lookup ends with this incarnation.
func (r *roomActor) find(ctx actor.Context, e FindToRedact) {
	if r.ctx == nil {
		r.ctx, r.cancel = context.WithCancel(context.Background())
	}
	room, cfg, lookupCtx := r.room, r.cfg, r.ctx
	self, sys, gen := ctx.Self(), ctx.ActorSystem(), r.gen
	go func() {
		if err := cfg.Flights.waitReactions(lookupCtx, room); err != nil {
			return // this incarnation is gone
		}
		ctx, cancel := context.WithTimeout(lookupCtx, cfg.SendTimeout)
		defer cancel()
		var found []string
		var err error
		switch e.Kind {
		case LookupReply:
			var id string
			var ok bool
			if id, ok, err = cfg.Sender.FindReplyToRedact(ctx, room, e.EventID, e.TxnID); ok {
				found = []string{id}
			}
		case LookupReaction:
			found, err = cfg.Sender.FindReactions(ctx, room, e.EventID, e.Key)
		}
		done := FindDone{EventID: e.EventID, Kind: e.Kind, Found: found}
		var code messages.Code
		if err != nil {
			le := asError(err)
			done.Err, done.RetryAfter, code = le, le.RetryAfter, le.Code
		}
		cfg.Logger.Info("looked for an event of Lisa's to redact", "room", messages.RoomID(room), "event", messages.EventID(e.EventID),
			"kind", e.Kind, "found", len(found), "code", code)
		sys.Root.Send(self, &effectDone{gen: gen, in: done})
	}()
}

// redact redacts one of Lisa's events in a goroutine; RedactDone comes
// back as an effectDone.
func (r *roomActor) redact(ctx actor.Context, e Redact) {
	room, cfg := r.room, r.cfg
	self, sys, gen := ctx.Self(), ctx.ActorSystem(), r.gen
	synced := cfg.barrier()
	go func() {
		err := cfg.afterSync(synced, func(ctx context.Context) error {
			return cfg.Sender.Redact(ctx, room, e.EventID, e.TxnID)
		})
		done := RedactDone{EventID: e.EventID}
		if err != nil {
			le := asError(err)
			done.Err, done.RetryAfter = le, le.RetryAfter
			cfg.Logger.Warn("redaction failed", "room", messages.RoomID(room), "event", messages.EventID(e.EventID),
				"code", le.Code, "permanent", le.Permanent)
		}
		sys.Root.Send(self, &effectDone{gen: gen, in: done})
	}()
}

// schedule delivers e.Input to this incarnation after e.After.
func (r *roomActor) schedule(ctx actor.Context, e Schedule) {
	self, sys, gen := ctx.Self(), ctx.ActorSystem(), r.gen
	r.timerSeq++
	id := r.timerSeq
	if r.timers == nil {
		r.timers = map[uint64]func() bool{}
	}
	r.timers[id] = r.cfg.Clock.AfterFunc(e.After, func() {
		sys.Root.Send(self, &timerFired{gen: gen, id: id, in: e.Input})
	})
}

// roomFromName returns the room ID an actor spawned under parent with the
// room ID as its name serves. Anything else is a wiring bug that would
// make the room read another room's inbox: it panics.
func roomFromName(self, parent *actor.PID) string {
	if self == nil || parent == nil {
		panic("room: a room actor needs a parent (it takes its room ID from its name)")
	}
	id, ok := strings.CutPrefix(self.Id, parent.Id+"/")
	// Room IDs start with "!"; since room version 12 they need not name a
	// server.
	if !ok || !strings.HasPrefix(id, "!") {
		panic(fmt.Sprintf("room: actor %q is not named by a Matrix room ID under %q", self.Id, parent.Id))
	}
	return id
}

func asError(err error) *messages.Error {
	var le *messages.Error
	if errors.As(err, &le) {
		return le
	}
	return &messages.Error{Code: messages.CodeInternal, Message: "send failed", Ambiguous: true, Err: err}
}

func (r *roomActor) status() *messages.RoomStatus {
	st := &messages.RoomStatus{
		Room:      messages.RoomID(r.room),
		Phase:     r.m.Phase(),
		SlotHeld:  r.m.SlotHeld(),
		NextIndex: r.m.NextIndex,
		Answered:  r.m.Answered,
		Abandoned: r.m.Abandoned,
		Failed:    r.m.FailedAttempts,
		Digest:    Digest(&r.m.State),
	}
	st.LastReplyAtMs = r.m.LastReplyAtMs
	for _, inv := range r.m.Queue {
		st.Queue = append(st.Queue, messages.EventID(inv.EventID()))
		st.Invocations = append(st.Invocations, messages.InvocationStatus{
			EventID: messages.EventID(inv.EventID()), Attempts: inv.Attempts, Ready: inv.Ready,
			QueuedAtMs: inv.QueuedAtMs, ReadyAtMs: inv.ReadyAtMs, LastCode: inv.LastCode,
		})
	}
	if h := r.m.Head(); h != nil {
		st.Attempts = h.Attempts
	}
	for _, inv := range r.m.Held {
		st.Held = append(st.Held, messages.HeldStatus{
			EventID: messages.EventID(inv.EventID()), ForbiddenAtMs: inv.ForbiddenAtMs, ErrorReply: inv.IsError,
		})
	}
	return st
}

// Digest renders the durable state deterministically (without bodies) so
// two states can be compared as text.
func Digest(s *State) string {
	var b strings.Builder
	fmt.Fprintf(&b, "next=%d answered=%d failed=%d abandoned=%d duplicates=%d", s.NextIndex, s.Answered, s.FailedAttempts, s.Abandoned, s.Duplicates)
	if s.Refused > 0 || s.NoticeAtMs > 0 {
		fmt.Fprintf(&b, " refused=%d notice_at_ms=%d", s.Refused, s.NoticeAtMs)
	}
	if s.Edited > 0 || s.Redacted > 0 || len(s.PendingRedactions) > 0 {
		fmt.Fprintf(&b, " edited=%d redacted=%d to_redact=%s", s.Edited, s.Redacted, strings.Join(s.PendingRedactions, ","))
	}
	for _, l := range s.Lookups {
		fmt.Fprintf(&b, " to_find=%s:%s", l.Kind, l.EventID)
	}
	b.WriteByte('\n')
	for _, inv := range s.Queue {
		fmt.Fprintf(&b, "queue %s attempts=%d ready=%v error=%v txn=%s code=%s content=%d held_until_ms=%d",
			inv.EventID(), inv.Attempts, inv.Ready, inv.IsError, inv.TxnID, inv.LastCode, len(inv.Content), inv.HeldUntilMs)
		if inv.Notice {
			b.WriteString(" notice")
		}
		if inv.ReactionEventID != "" || inv.Redacted || inv.Candidate.GetEditEventId() != "" {
			fmt.Fprintf(&b, " reaction=%s redacted=%v edit=%s", inv.ReactionEventID, inv.Redacted, inv.Candidate.GetEditEventId())
		}
		if inv.ReactionRequested {
			b.WriteString(" reaction_requested")
		}
		if inv.ForbiddenAtMs != 0 || inv.Recheck {
			fmt.Fprintf(&b, " forbidden_at_ms=%d recheck=%v", inv.ForbiddenAtMs, inv.Recheck)
		}
		b.WriteByte('\n')
	}
	for _, inv := range s.Held {
		fmt.Fprintf(&b, "held %s error=%v txn=%s content=%d forbidden_at_ms=%d\n",
			inv.EventID(), inv.IsError, inv.TxnID, len(inv.Content), inv.ForbiddenAtMs)
	}
	fmt.Fprintf(&b, "recent %s\n", strings.Join(s.Recent, ","))
	if slices.ContainsFunc(s.RecentReplies, func(r string) bool { return r != "" }) {
		fmt.Fprintf(&b, "replies %s\n", strings.Join(s.RecentReplies, ","))
	}
	return b.String()
}

// observe reports an event's meaning to the observer before it is applied.
func (r *roomActor) observe(ev proto.Message, now time.Time) {
	if r.cfg.Observer == nil {
		return
	}
	switch e := ev.(type) {
	case *roompb.InvocationStarted:
		if e.GetAttempt() == 1 {
			if inv, err := r.m.find(e.GetEventId()); err == nil && inv.QueuedAtMs > 0 {
				r.cfg.Observer.Phase("queue", now.Sub(time.UnixMilli(inv.QueuedAtMs)))
			}
		}
	case *roompb.ReplySent:
		outcome := "answered"
		if inv, err := r.m.find(e.GetEventId()); err == nil && inv.IsError {
			outcome = "error_reply"
		}
		r.cfg.Observer.Outcome(outcome)
	case *roompb.ReplyAbandoned, *roompb.HeldDropped:
		r.cfg.Observer.Outcome("abandoned")
	case *roompb.InvocationDropped:
		if e.GetCode() != "" {
			r.cfg.Observer.Outcome(e.GetCode())
		}
	case *roompb.ReplyForbidden:
		r.cfg.Observer.Outcome("held")
	case *roompb.LookupDone:
		r.cfg.Observer.Lookup(e.GetKind(), lookupResult(e))
	}
}

// lookupResult names how a lookup ended, for Observer.Lookup.
func lookupResult(e *roompb.LookupDone) string {
	switch {
	case e.GetCode() == LookupDropped:
		return LookupDropped
	case e.GetCode() != "":
		return LookupGivenUp
	case len(e.GetFoundEventIds()) > 0:
		return LookupFound
	default:
		return LookupNone
	}
}

// logTransition logs a journal event as a state transition: its kind, the
// hashed room and event IDs, attempt and code — never content.
func (r *roomActor) logTransition(ev proto.Message) {
	attrs := []any{"room", messages.RoomID(r.room), "transition", string(ev.ProtoReflect().Descriptor().Name())}
	switch e := ev.(type) {
	case *roompb.InvocationQueued:
		attrs = append(attrs, "event", messages.EventID(e.GetCandidate().GetEventId()), "trigger", e.GetCandidate().GetTrigger())
	case *roompb.InvocationStarted:
		attrs = append(attrs, "event", messages.EventID(e.GetEventId()), "attempt", e.GetAttempt())
	case *roompb.InvocationFailed:
		attrs = append(attrs, "event", messages.EventID(e.GetEventId()), "attempt", e.GetAttempt(), "code", e.GetCode(), "permanent", e.GetPermanent())
	case *roompb.ReplyReady:
		attrs = append(attrs, "event", messages.EventID(e.GetEventId()), "error_reply", e.GetIsError(), "bytes", len(e.GetContent()))
	case *roompb.ReplySent:
		attrs = append(attrs, "event", messages.EventID(e.GetEventId()), "reply", messages.EventID(e.GetReplyEventId()), "reconciled", e.GetReconciled())
	case *roompb.ReplyAbandoned:
		// A reply the homeserver refused for good is never silent.
		attrs = append(attrs, "event", messages.EventID(e.GetEventId()), "code", e.GetCode())
		r.cfg.Logger.Error("reply abandoned: the homeserver refused it for good", attrs...)
		return
	case *roompb.ReplyForbidden:
		// Never silent: the operator has a room to fix.
		attrs = append(attrs, "event", messages.EventID(e.GetEventId()), "code", e.GetCode(), "held", len(r.m.Held)+1, "bound", HeldLimit)
		r.cfg.Logger.Error("reply held: the homeserver refused it (M_FORBIDDEN); it is sent once Lisa may post in the room "+
			"(a change of its power levels or of Lisa's membership) or the operator runs resend in lisa shell", attrs...)
		return
	case *roompb.HeldReleased:
		var ids []any
		for _, id := range e.GetEventIds() {
			ids = append(ids, messages.EventID(id))
		}
		attrs = append(attrs, "events", ids, "reason", e.GetReason(), "cause", messages.EventID(e.GetCauseEventId()))
		r.cfg.Logger.Warn("held replies released: each is looked up, then sent once", attrs...)
		return
	case *roompb.HeldDropped:
		attrs = append(attrs, "event", messages.EventID(e.GetEventId()), "reason", e.GetReason(), "bound", HeldLimit, "ttl", HeldTTL.String())
		r.cfg.Logger.Error("held reply dropped: it will not be sent", attrs...)
		return
	case *roompb.InvocationEdited:
		attrs = append(attrs, "event", messages.EventID(e.GetEventId()), "edit", messages.EventID(e.GetEditEventId()))
	case *roompb.InvocationRedacted:
		attrs = append(attrs, "event", messages.EventID(e.GetEventId()), "redaction", messages.EventID(e.GetRedactionEventId()),
			"reply", messages.EventID(e.GetReplyEventId()), "reply_may_exist", e.GetReplyMayExist(), "find_reply", e.GetFindReply())
	case *roompb.ReactionSent:
		attrs = append(attrs, "event", messages.EventID(e.GetEventId()), "reaction", messages.EventID(e.GetReactionEventId()))
	case *roompb.Redacted:
		attrs = append(attrs, "event", messages.EventID(e.GetEventId()), "code", e.GetCode())
	case *roompb.InvocationDropped:
		attrs = append(attrs, "event", messages.EventID(e.GetEventId()))
		if e.GetCode() != "" {
			attrs = append(attrs, "code", e.GetCode())
		}
	case *roompb.ReactionRequested:
		attrs = append(attrs, "event", messages.EventID(e.GetEventId()))
	case *roompb.LookupDone:
		attrs = append(attrs, "event", messages.EventID(e.GetEventId()), "kind", e.GetKind(), "found", len(e.GetFoundEventIds()), "code", e.GetCode())
		switch e.GetCode() {
		case "":
		case LookupDropped:
			// Whatever it was to find stays unredacted: never silent.
			r.cfg.Logger.Warn("lookup of an event of Lisa's to redact dropped: the room owes too many", append(attrs, "bound", LookupLimit)...)
			return
		default:
			r.cfg.Logger.Warn("lookup of an event of Lisa's to redact given up", attrs...)
			return
		}
	case *roompb.InvocationDuplicate:
		attrs = append(attrs, "event", messages.EventID(e.GetEventId()))
	case *roompb.InvocationRefused:
		// Never silent: the refusal is logged at WARN with its reason and
		// the hashed sender, whether or not it got a notice.
		attrs = append(attrs, "event", messages.EventID(e.GetCandidate().GetEventId()), "sender", messages.Hash(e.GetCandidate().GetSender()),
			"reason", e.GetReason(), "notice", len(e.GetNoticeContent()) > 0)
		r.cfg.Logger.Warn("invocation refused: room overloaded", attrs...)
		return
	}
	r.cfg.Logger.Info("invocation transition", attrs...)
}
