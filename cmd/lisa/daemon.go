package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/lisabot/lisa/actors/app"
	"github.com/lisabot/lisa/actors/invocation"
	"github.com/lisabot/lisa/actors/room"
	"github.com/lisabot/lisa/actors/syncer"
	"github.com/lisabot/lisa/actors/tools"
	"github.com/lisabot/lisa/adapters/admin"
	"github.com/lisabot/lisa/adapters/matrix"
	"github.com/lisabot/lisa/adapters/metrics"
	"github.com/lisabot/lisa/adapters/render"
	"github.com/lisabot/lisa/adapters/research"
	"github.com/lisabot/lisa/config"
	"github.com/lisabot/lisa/messages"
	"github.com/lisabot/lisa/persistence"
)

// snapshotInterval is how many journal events a room writes between
// snapshots (and compactions).
const snapshotInterval = 50

// daemon is Lisa's running core: the store and the actor tree.
type daemon struct {
	store       *persistence.Badger
	source      *matrix.Source
	sys         *app.System
	log         *slog.Logger
	grace       time.Duration
	rooms       []string
	invocations *sync.WaitGroup
	stopping    *atomic.Bool
	tools       *tools.Client
	admin       *admin.Server
	metrics     *metrics.Server
	crashable   bool
	// syncAgeLimit: without a successful sync for this long, Lisa is
	// degraded.
	syncAgeLimit time.Duration
}

// toolWorkers is the size of the tool pool: searches, downloads and
// conversions run at most this many at a time.
const toolWorkers = 4

// typingClearTimeout bounds the final "typing off" request.
const typingClearTimeout = 5 * time.Second

// sendTimeout bounds one reply send; a send in doubt reached the
// homeserver by its start plus this, if at all.
const sendTimeout = time.Minute

// daemonDeps are the outside parts a daemon talks to.
type daemonDeps struct {
	session *matrix.Client
	// invoker builds what answers an invocation, given the tool pool and
	// the metrics.
	invoker func(tools research.Runner, met *metrics.Metrics) invocation.Invoker
	// sender overrides the session as reply sender (failpoints wrap it).
	sender room.Sender
	hooks  *syncer.Hooks
	// crashable arms the test-only "crash <room>" admin command.
	crashable bool
	// kills are the armed failpoints (tests and chaos campaigns).
	kills kills
	// spawn, when set, wraps every actor spawn (chaos fault injection).
	spawn actor.SpawnMiddleware
	// leakCheck makes `lisa run` report leaked goroutines after a
	// graceful stop (chaos campaigns).
	leakCheck bool
	// fatal is called when part of the actor tree is gone for good; the
	// process should then exit non-zero so its supervisor restarts it.
	fatal func()
	// homeserverWasDown: the session check had to wait for the homeserver,
	// which may just have restarted.
	homeserverWasDown bool
}

// startDaemon opens the store and starts the actor tree for res.
func startDaemon(res config.Resolved, log *slog.Logger, deps daemonDeps) (*daemon, error) {
	cfg := res.Config
	store, err := persistence.OpenBadger(cfg.Runtime.DataDir, persistence.BadgerOptions{Logger: log})
	if err != nil {
		return nil, err
	}
	// Taken (and removed) before anything runs: if this run crashes, the
	// next start must not find the mark of the run before.
	clean, err := store.TakeCleanStop()
	if err != nil {
		_ = store.Close()
		return nil, err
	}
	provider, err := persistence.NewProvider(store, snapshotInterval, log)
	if err != nil {
		_ = store.Close()
		return nil, err
	}
	sys := app.NewSystem(log)
	if deps.spawn != nil {
		sys.UseSpawnMiddleware(deps.spawn)
	}
	met := metrics.New(metrics.Sources{
		Actors: func() []metrics.ActorStat {
			var out []metrics.ActorStat
			for _, s := range sys.Registry.Snapshot(sys.Actors) {
				out = append(out, metrics.ActorStat{ID: messages.ActorLogID(s.ID), Mailbox: s.Len, Restarts: s.Restarts})
			}
			return out
		},
		LastSync: func() time.Time {
			if cur, err := store.Cursor(); err == nil && cur.GetUpdatedAtMs() > 0 {
				return time.UnixMilli(cur.GetUpdatedAtMs())
			}
			return time.Time{}
		},
		StoreBytes: store.Size,
	})
	rend := render.New()
	personaReply := func(text string) func(_, eventID string) []byte {
		return func(_, eventID string) []byte {
			b, err := rend.Reply(text, eventID)
			if err != nil { // cannot happen for a validated, non-empty message
				b, _ = json.Marshal(map[string]any{"msgtype": "m.text", "body": text,
					"m.relates_to": map[string]any{"m.in_reply_to": map[string]string{"event_id": eventID}}})
			}
			return b
		}
	}
	errorReply := personaReply(cfg.Persona.GenericError)
	sender := deps.sender
	if sender == nil {
		sender = deps.session
	}
	pool := tools.NewClient(sys.Root, sys.ToolsPID())
	source := matrix.NewSource(deps.session, matrix.SyncOptions{
		Timeout:       cfg.Matrix.SyncTimeout(),
		TimelineLimit: cfg.Matrix.SyncTimelineLimit,
		GapPageLimit:  cfg.Matrix.GapPageLimit,
		Aliases:       cfg.Matrix.MentionAliases,
		AllowedRooms:  cfg.Matrix.AllowedRoomIDs,
	}, store, log, time.Now)
	if cur, err := store.Cursor(); err == nil && cur.GetBaselineDone() && (!clean || deps.homeserverWasDown) {
		// A /sync may have failed in the run that crashed (the homeserver
		// restarting), and that knowledge died with it; or the homeserver
		// was just starting, when Dendrite may skip events in an answer.
		source.VerifyNext()
		msg := "the previous run did not stop cleanly: the first sync answer is checked room by room against the homeserver"
		if clean {
			msg = "the homeserver was not available at start: the first sync answer is checked room by room against it"
		}
		log.Info(msg, "rooms", len(cfg.Matrix.AllowedRoomIDs))
	}
	invocations := &sync.WaitGroup{}
	invoker := invocation.WithTyping(deps.invoker(pool, met), deps.session, invocation.TypingLease{
		Timeout: 30 * time.Second, Refresh: 20 * time.Second, ClearTimeout: typingClearTimeout,
		Background: invocations, // shutdown waits for typing to be cleared
	}, log)
	stopping := &atomic.Bool{}
	tree := sys.Tree(app.TreeConfig{
		OnLost: func(child string) {
			if stopping.Load() {
				return
			}
			log.Error("an essential actor stopped for good; exiting so Lisa can be restarted", "actor", child)
			if deps.fatal != nil {
				deps.fatal()
			}
		},
		Invocations: invocations,
		Rooms:       cfg.Matrix.AllowedRoomIDs, MaxConcurrent: cfg.Runtime.MaxConcurrentRooms,
		Policy: room.Policy{
			MaxAttempts: 3,
			RetryBase:   2 * time.Second, RetryMax: 30 * time.Second,
			SendRetryBase: time.Second, SendRetryMax: time.Minute,
			// Dendrite stores a send whose client gave up seconds
			// later after a restart or under load (see
			// docs/reliability.md): a reply is sent again only after
			// two lookups this far apart both missed it.
			SettleDelay: 5 * time.Second,
			// A send cut short by a homeserver restart can be stored
			// minutes later (Dendrite's queue redelivers it after
			// 5 min 10 s): matrix.late_store_seconds.
			LateStoreWindow: cfg.Matrix.LateStore(),
			RecheckEvery:    15 * time.Second,
			ErrorReply:      errorReply,
			// A flood in one room costs one overload reply per burst;
			// see docs/security.md.
			MaxQueue:      cfg.Runtime.RoomQueueLimit,
			SenderLimit:   cfg.Runtime.SenderRateLimit,
			SenderWindow:  cfg.Runtime.SenderRateWindow(),
			NoticeEvery:   cfg.Runtime.SenderRateWindow(),
			OverloadReply: personaReply(cfg.Persona.OverloadError),
		},
		Provider: provider, Inbox: store, BotEvents: store, Sender: sender,
		Invoker: invoker, InvocationTimeout: cfg.Runtime.InvocationTimeout(),
		ToolWorkers:  toolWorkers,
		SendTimeout:  sendTimeout,
		RoomRestarts: 3, RoomRestartWindow: time.Minute,
		RespawnBase: time.Second, RespawnMax: 5 * time.Minute,
		Sync: &app.SyncConfig{
			Source: source, Ledger: store,
			Watchdog: cfg.Matrix.SyncTimeout() + 60*time.Second,
			Backoff:  syncer.Backoff{Base: time.Second, Max: time.Minute, MaxRetryAfter: time.Minute},
			Jitter:   rand.Float64,
			Hooks:    deps.hooks,
			Observer: met.SyncDone,
		},
		Clock: app.RealClock{}, Logger: log,
		RoomOptions:  crashOptions(deps.crashable),
		RoomObserver: met,
	})
	if _, err := sys.Start(tree); err != nil {
		_ = store.Close()
		return nil, err
	}
	d := &daemon{crashable: deps.crashable, store: store, source: source, sys: sys, log: log, grace: cfg.Runtime.ShutdownGrace(),
		rooms: cfg.Matrix.AllowedRoomIDs, invocations: invocations, stopping: stopping, tools: pool,
		syncAgeLimit: 2*cfg.Matrix.SyncTimeout() + 10*time.Second}
	if cfg.Runtime.MetricsListen != "" {
		if d.metrics, err = metrics.Serve(cfg.Runtime.MetricsListen, met); err != nil {
			stopCtx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			_ = sys.Stop(stopCtx)
			_ = store.Close()
			return nil, err
		}
		log.Info("metrics served", "address", d.metrics.Addr())
	}
	if d.admin, err = admin.Listen(cfg.Runtime.AdminSocket, d, log); err != nil {
		if d.metrics != nil {
			_ = d.metrics.Close()
		}
		stopCtx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		_ = sys.Stop(stopCtx)
		_ = store.Close()
		return nil, err
	}
	return d, nil
}

// stop shuts down in order within the grace period: no new intake, no new
// invocations; running invocations and sends get the rest of the grace
// period to finish; then everything left is stopped (cancelled attempts
// clear their typing on the way out) and the store closes. An attempt cut
// short is retried after the next start; a prepared reply is looked up on
// the homeserver and sent only if it is not there.
func (d *daemon) stop(ctx context.Context) error {
	// Keep part of the grace period for stopping the actors and closing
	// the store, so the whole shutdown fits in it.
	reserve := min(2*time.Second, d.grace/2)
	deadline := time.Now().Add(d.grace - reserve)
	d.stopping.Store(true)
	if d.admin != nil {
		_ = d.admin.Close()
	}
	if d.metrics != nil {
		_ = d.metrics.Close()
	}
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	stopSync := d.sys.Root.StopFuture(d.sys.SyncPID())
	d.sys.Root.Send(d.sys.RoomsPID(), &messages.Drain{})
	syncErr := stopSync.Wait()
	for !d.idle() {
		select {
		case <-ctx.Done():
			d.log.Warn("shutdown grace period over; cancelling remaining work")
		case <-time.After(50 * time.Millisecond):
			continue
		}
		break
	}
	stopCtx, cancelStop := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancelStop()
	err := d.sys.Stop(stopCtx)
	// Let cancelled attempts run their clean-up (typing off), briefly.
	waited := make(chan struct{})
	go func() { d.invocations.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(typingClearTimeout + time.Second):
	}
	clean := syncErr == nil && d.cleanSync()
	if clean {
		if merr := d.store.MarkCleanStop(); merr != nil {
			clean = false
			if err == nil {
				err = merr
			}
		}
	}
	if cerr := d.store.Close(); err == nil {
		err = cerr
	}
	d.log.Info("lisa stopped", "clean", clean)
	return err
}

// cleanSync reports whether the next start may trust its first /sync: the
// sync has stopped, no check of an answer is pending, and the last checked
// answer was committed (the sync actor drops an answer that arrives while
// it stops, and a dropped checked answer takes its check with it).
func (d *daemon) cleanSync() bool {
	return !d.source.VerifyPending() && !d.source.UncommittedCheck()
}

// idle reports whether no room runs an invocation or delivers a reply.
func (d *daemon) idle() bool {
	res, err := d.sys.Root.RequestFuture(d.sys.RoomsPID(), &messages.SlotStatusRequest{}, time.Second).Result()
	if st, ok := res.(*messages.SlotStatus); err != nil || !ok || len(st.Holders) > 0 {
		return err != nil // rooms gone: nothing left to wait for
	}
	for _, room := range d.rooms {
		res, err := d.sys.Root.RequestFuture(d.sys.RoomPID(room), &messages.RoomStatusRequest{}, time.Second).Result()
		st, ok := res.(*messages.RoomStatus)
		if err == nil && ok && (st.Phase == "running" || st.Phase == "sending" || st.Phase == "reconciling") {
			return false
		}
	}
	return true
}
