package syncer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/lisabot/lisa/backoff"
	"github.com/lisabot/lisa/messages"
	"github.com/lisabot/lisa/messages/roompb"
)

// Source performs one classified /sync after prev.
type Source interface {
	Next(ctx context.Context, prev *roompb.SyncCursor) (*messages.SyncBatch, error)
}

// Ledger is the durable intake.
type Ledger interface {
	Cursor() (*roompb.SyncCursor, error)
	CommitSync(cur *roompb.SyncCursor, cands []*roompb.Candidate) ([]*roompb.Candidate, error)
	RecordBotEvent(room, eventID, inReplyTo string) error
}

// Trail records what the sync decided about each event it saw.
type Trail interface {
	Synced(b *messages.SyncBatch, now time.Time)
}

// Clock supplies timers.
type Clock interface {
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

// Config wires the sync actor.
type Config struct {
	Source Source
	Ledger Ledger
	// Rooms is the rooms supervisor, which forwards nudges.
	Rooms *actor.PID
	// Watchdog is how long one request may take before it is abandoned
	// (the long-poll timeout plus a margin).
	Watchdog time.Duration
	// Backoff spaces failed requests (see NewBackoff); its Rand is the
	// only randomness the actor uses.
	Backoff backoff.Policy
	Clock   Clock
	Logger  *slog.Logger
	// Hooks are test-only failpoints; nil in production.
	Hooks *Hooks
	// Trail, if set, is told what each committed answer carried (the
	// event trail, a read model).
	Trail Trail
	// Observer, if set, is told the outcome of every request (metrics, and
	// whether the homeserver may have restarted); a request the watchdog
	// replaced counts as failed.
	Observer func(ok bool)
	// Committed, if set, is called after each answer's own events and
	// candidates are in the ledger, before any room is nudged: from the
	// first call on, the ledger knows every reply of Lisa's since the
	// cursor she started from (see room.Flights.SyncCommitted).
	Committed func()
}

// Hooks lets tests stop the process at exact points of the protocol.
type Hooks struct {
	// AfterCommit runs after candidates and cursor are committed and
	// before any room is nudged.
	AfterCommit func(accepted []*roompb.Candidate)
}

// Props returns the sync actor's props.
func Props(cfg Config, opts ...actor.PropsOption) *actor.Props {
	// Request numbers are shared by all incarnations, so a late result of
	// a previous incarnation's request never matches the current one.
	seq := &atomic.Uint64{}
	return actor.PropsFromProducer(func() actor.Actor { return &syncActor{cfg: cfg, seq: seq} }, opts...)
}

type syncActor struct {
	cfg      Config
	cursor   *roompb.SyncCursor
	ctx      context.Context
	cancel   context.CancelCauseFunc
	seq      *atomic.Uint64
	fetchSeq uint64 // identifies the request in flight
	reqStop  context.CancelFunc
	failures int
	// watchdogStop and retryStop cancel the pending timers.
	watchdogStop, retryStop func() bool
	stopping                bool
}

type (
	fetched struct {
		seq   uint64
		batch *messages.SyncBatch
		err   error
	}
	watchdog struct{ seq uint64 }
	retry    struct{}
)

func (s *syncActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		s.ctx, s.cancel = context.WithCancelCause(context.Background())
		cur, err := s.cfg.Ledger.Cursor()
		if err != nil {
			panic(fmt.Errorf("syncer: read cursor: %w", err))
		}
		s.cursor = cur
		if !cur.GetBaselineDone() {
			s.cfg.Logger.Info("no sync cursor yet: the first sync only records a baseline")
		}
		s.fetch(ctx)
	case *fetched:
		if m.seq != s.fetchSeq || s.stopping {
			return // abandoned by the watchdog, or stopping
		}
		s.reqStop()
		s.watchdogStop()
		if s.cfg.Observer != nil {
			s.cfg.Observer(m.err == nil)
		}
		if m.err != nil {
			s.failed(ctx, m.err)
			return
		}
		s.commit(ctx, m.batch)
		s.failures = 0
		s.fetch(ctx)
	case *watchdog:
		if m.seq == s.fetchSeq && !s.stopping {
			s.cfg.Logger.Warn("sync request made no progress; replacing it", "after_ms", s.cfg.Watchdog.Milliseconds())
			if s.cfg.Observer != nil {
				s.cfg.Observer(false)
			}
			s.reqStop()
			s.failures++
			s.fetch(ctx)
		}
	case *retry:
		if !s.stopping {
			s.fetch(ctx)
		}
	case *actor.Stopping, *actor.Restarting:
		s.stopping = true
		if s.cancel != nil {
			s.cancel(messages.ErrStopping) // not the homeserver's failure
		}
		for _, stop := range []func() bool{s.watchdogStop, s.retryStop} {
			if stop != nil {
				stop()
			}
		}
	}
}

// fetch starts one request in a goroutine; the result comes back as a
// message.
func (s *syncActor) fetch(ctx actor.Context) {
	seq := s.seq.Add(1)
	s.fetchSeq = seq
	reqCtx, stop := context.WithCancel(s.ctx)
	s.reqStop = stop
	self, sys := ctx.Self(), ctx.ActorSystem()
	prev := s.cursor
	go func() {
		batch, err := s.cfg.Source.Next(reqCtx, prev)
		sys.Root.Send(self, &fetched{seq: seq, batch: batch, err: err})
	}()
	s.watchdogStop = s.cfg.Clock.AfterFunc(s.cfg.Watchdog, func() {
		sys.Root.Send(self, &watchdog{seq: seq})
	})
}

func (s *syncActor) commit(ctx actor.Context, b *messages.SyncBatch) {
	for _, own := range b.OwnEvents {
		if err := s.cfg.Ledger.RecordBotEvent(string(own.Room), string(own.EventID), string(own.InReplyTo)); err != nil {
			panic(fmt.Errorf("syncer: record own event: %w", err))
		}
	}
	baseline := !s.cursor.GetBaselineDone()
	cands := b.Candidates
	if baseline {
		cands = nil // history is never answered
	}
	accepted, err := s.cfg.Ledger.CommitSync(b.Cursor, cands)
	if err != nil {
		// Nothing was committed; the restarted actor repeats the request
		// from the old cursor.
		panic(fmt.Errorf("syncer: commit: %w", err))
	}
	s.cursor = b.Cursor
	if s.cfg.Committed != nil {
		s.cfg.Committed()
	}
	if baseline {
		s.cfg.Logger.Info("sync baseline recorded; earlier messages will not be answered", "ignored_events", b.Rejected["baseline"])
	}
	for _, room := range b.GapRooms {
		s.cfg.Logger.Warn("matrix_timeline_gap: some events of a busy room were not recovered", "room", room)
	}
	if s.cfg.Trail != nil {
		s.cfg.Trail.Synced(b, time.UnixMilli(b.Cursor.GetUpdatedAtMs()))
	}
	if s.cfg.Hooks != nil && s.cfg.Hooks.AfterCommit != nil {
		s.cfg.Hooks.AfterCommit(accepted)
	}
	// One nudge per room, carrying the room's new entries in commit order.
	var nudges []*messages.Nudge
	for _, c := range accepted {
		room := messages.RoomID(c.GetRoomId())
		i := slices.IndexFunc(nudges, func(n *messages.Nudge) bool { return n.Room == room })
		if i < 0 {
			i = len(nudges)
			nudges = append(nudges, &messages.Nudge{Room: room})
		}
		nudges[i].Entries = append(nudges[i].Entries, c)
	}
	for _, n := range nudges {
		ctx.Send(s.cfg.Rooms, n)
	}
	for _, c := range accepted {
		msg := "invocation accepted"
		if t := c.GetTrigger(); t == messages.TriggerPowerLevels || t == messages.TriggerMembership {
			msg = "room permission change routed" // releases replies held after M_FORBIDDEN
		}
		s.cfg.Logger.Info(msg, "room", messages.RoomID(c.GetRoomId()), "event", messages.EventID(c.GetEventId()), "trigger", c.GetTrigger())
	}
}

func (s *syncActor) failed(ctx actor.Context, err error) {
	var le *messages.Error
	if !errors.As(err, &le) {
		le = &messages.Error{Code: messages.CodeInternal, Message: "sync failed"}
	}
	if le.Code == messages.CodeCursorRejected {
		// Do not guess across an uncertain gap: start over with a
		// baseline, which answers nothing from before it.
		s.cfg.Logger.Error("homeserver rejected the sync cursor; taking a new baseline (messages in the gap will not be answered)", "code", le.Code)
		s.cursor = &roompb.SyncCursor{}
		s.fetch(ctx)
		return
	}
	s.failures++
	d := retryDelay(s.cfg.Backoff, s.failures, le)
	s.cfg.Logger.Warn("sync failed; backing off", "code", le.Code, "failures", s.failures, "delay_ms", d.Milliseconds())
	self, sys := ctx.Self(), ctx.ActorSystem()
	s.retryStop = s.cfg.Clock.AfterFunc(d, func() { sys.Root.Send(self, &retry{}) })
}
