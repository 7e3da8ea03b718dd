package daemon

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
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
	"github.com/lisabot/lisa/adapters/status"
	"github.com/lisabot/lisa/budget"
	"github.com/lisabot/lisa/buildinfo"
	"github.com/lisabot/lisa/config"
	"github.com/lisabot/lisa/messages"
	"github.com/lisabot/lisa/messages/roompb"
	"github.com/lisabot/lisa/persistence"
	"github.com/lisabot/lisa/trail"
)

// SnapshotInterval is how many journal events a room writes between
// snapshots (and compactions).
const SnapshotInterval = 50

// Daemon is Lisa's running core: the store and the actor tree.
type Daemon struct {
	store       *persistence.Badger
	sweeper     *persistence.Sweeper // retention (runtime.retention_days)
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
	// met are the daemon's instruments; health reads the LLM's refusal
	// from them.
	met       *metrics.Metrics
	crashable bool
	meter     *budget.Meter
	// syncAgeLimit: without a successful sync for this long, Lisa is
	// degraded.
	syncAgeLimit time.Duration
	// trail is the event trail (lisa shell: why, trail; the status page).
	trail *trail.Trail
	// build is the binary's build info (health, status page).
	build buildinfo.Info
	// txnIDsFrom is from when on replies are covered by the server's
	// memory of transaction IDs (see txnIDsFrom).
	txnIDsFrom time.Time
	// status is the status page, when runtime.status_listen is set.
	status *status.Server
	// names caches room names for the status page.
	names *roomNames
}

// Trail is the daemon's event trail.
func (d *Daemon) Trail() *trail.Trail { return d.trail }

// Store is the daemon's store (bench and demo read the sync cursor).
func (d *Daemon) Store() *persistence.Badger { return d.store }

// System is the daemon's actor system.
func (d *Daemon) System() *app.System { return d.sys }

// toolWorkers is the size of the tool pool: searches, downloads and
// conversions run at most this many at a time.
const toolWorkers = 4

// typingClearTimeout bounds the final "typing off" request.
const typingClearTimeout = 5 * time.Second

// sendTimeout bounds one reply send; a send in doubt reached the
// homeserver by its start plus this, if at all.
const sendTimeout = time.Minute

// Deps are the outside parts a daemon talks to.
// Deps are the outside parts a daemon talks to, and the hooks that test
// and chaos builds arm (see [ArmFunc]); the production binary leaves the
// hooks empty.
type Deps struct {
	// Session is Lisa's Matrix session.
	Session *matrix.Client
	// Invoker builds what answers an invocation, given the tool pool and
	// the metrics.
	Invoker func(tools *tools.Client, met *metrics.Metrics) invocation.Invoker
	// Sender overrides the session as reply sender (failpoints wrap it).
	Sender room.Sender
	// Hooks are called by the sync actor (failpoints).
	Hooks *syncer.Hooks
	// Crashable arms the test-only "crash <room>" admin command.
	Crashable bool
	// Spawn, when set, wraps every actor spawn (chaos fault injection).
	Spawn actor.SpawnMiddleware
	// Fatal is called when part of the actor tree is gone for good; the
	// process should then exit non-zero so its supervisor restarts it.
	Fatal func()
	// HomeserverWasDown: the session check had to wait for the homeserver,
	// which may just have restarted.
	HomeserverWasDown bool
	// OnEncrypted, if set, is told about an allowed room that a sync
	// answer shows encrypted (see matrix.SyncOptions.OnEncrypted).
	OnEncrypted func(room string)
	// Clock, if set, is the clock token budgets read their day from, and
	// the store's retention (test builds move it past midnight); nil is
	// time.Now.
	Clock func() time.Time
	// Build is the binary's build info, shown by `lisa health`, the status
	// page and the lisa_build_info metric.
	Build buildinfo.Info
	// TxnIDs is how the homeserver keeps transaction IDs across its
	// restarts (matrix.TxnIDPolicy; zero: it may forget them).
	TxnIDs matrix.TxnIDs
}

// Start opens the store and starts the actor tree for res.
func Start(res config.Resolved, log *slog.Logger, deps Deps) (*Daemon, error) {
	cfg := res.Config
	store, clean, provider, err := openStore(cfg, deps.Clock, log)
	if err != nil {
		return nil, err
	}
	txnFrom, err := txnIDsFrom(store, deps.TxnIDs, res.MatrixAccessToken.Reveal(), time.Now())
	if err != nil {
		_ = store.Close()
		return nil, err
	}
	sys := app.NewSystem(log)
	if deps.Spawn != nil {
		sys.UseSpawnMiddleware(deps.Spawn)
	}
	var meter *budget.Meter
	met := newMetrics(sys, store, func() (int64, bool) {
		if meter == nil {
			return 0, false
		}
		rep, err := meter.Report("", 1)
		return rep.Remaining(), err == nil && rep.Budget > 0
	}, deps.Build)
	meter = newMeter(cfg, store, deps.Clock, met, log)
	pool := tools.NewClient(sys.Root, sys.ToolsPID())
	source := newSource(cfg, deps, store, clean, log)
	d := &Daemon{crashable: deps.Crashable, store: store, source: source, sys: sys, log: log, grace: cfg.Runtime.ShutdownGrace(),
		rooms: cfg.Matrix.AllowedRoomIDs, invocations: &sync.WaitGroup{}, stopping: &atomic.Bool{}, tools: pool, met: met,
		syncAgeLimit: 2*cfg.Matrix.SyncTimeout() + 10*time.Second,
		trail:        trail.New(cfg.Runtime.TrailEvents, log),
		names:        &roomNames{}, meter: meter, build: deps.Build, txnIDsFrom: txnFrom}
	if deps.Session != nil {
		d.names.namer = deps.Session
	}
	// The mention's commit is not waited for; the model is asked only once
	// the store is synced (see invocation.WithDurability).
	invoker := invocation.WithTyping(invocation.WithDurability(deps.Invoker(pool, met), store), deps.Session, invocation.TypingLease{
		Timeout: 30 * time.Second, Refresh: 20 * time.Second, ClearTimeout: typingClearTimeout,
		Background: d.invocations, // shutdown waits for typing to be cleared
	}, log)
	// Token budgets are checked before the attempt (no typing, no context
	// fetch when one is spent) and before every LLM request (budget.LLM in
	// the answerer); the usage of each request is recorded as it arrives.
	invoker = budget.Invoker(invoker, meter, personaReply(render.New(), cfg.Persona.BudgetError))
	tree := sys.Tree(d.treeConfig(cfg, deps, provider, invoker, met))
	if _, err := sys.Start(tree); err != nil {
		_ = store.Close()
		return nil, err
	}
	if err := d.serve(cfg, met, res.StatusToken); err != nil {
		stopCtx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		_ = sys.Stop(stopCtx)
		_ = store.Close()
		return nil, err
	}
	d.sweeper = startSweeper(store, deps.Clock, log)
	return d, nil
}

// openStore opens Badger with the retention of runtime.retention_days on
// clock (time.Now when nil), takes the clean-stop mark of the run before
// and builds the journal provider.
func openStore(cfg config.Config, clock func() time.Time, log *slog.Logger) (_ *persistence.Badger, clean bool, _ *persistence.Provider, _ error) {
	store, err := persistence.OpenBadger(cfg.Runtime.DataDir, persistence.BadgerOptions{Logger: log, Now: clock, Retention: cfg.Runtime.Retention()})
	if err != nil {
		return nil, false, nil, err
	}
	// Taken (and removed) before anything runs: if this run crashes, the
	// next start must not find the mark of the run before.
	if clean, err = store.TakeCleanStop(); err != nil {
		_ = store.Close()
		return nil, false, nil, err
	}
	provider, err := persistence.NewProvider(store, SnapshotInterval, log)
	if err != nil {
		_ = store.Close()
		return nil, false, nil, err
	}
	return store, clean, provider, nil
}

// sweepFirst is how long after the start the first retention sweep
// begins: not while Lisa catches up with what she missed.
const sweepFirst = time.Minute

// startSweeper starts the retention sweep of store on the wall clock's
// timers, reading the time from clock (time.Now when nil).
func startSweeper(store *persistence.Badger, clock func() time.Time, log *slog.Logger) *persistence.Sweeper {
	if clock == nil {
		clock = time.Now
	}
	return persistence.StartSweeper(store, persistence.SweeperOptions{
		First: sweepFirst, Now: clock, AfterFunc: app.RealClock{}.AfterFunc, Logger: log,
	})
}

// newMetrics returns the metrics, reading actors and the store.
func newMetrics(sys *app.System, store *persistence.Badger, budgetLeft func() (int64, bool), build buildinfo.Info) *metrics.Metrics {
	return metrics.New(metrics.Sources{
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
		StoreBytes:      store.Size,
		BudgetRemaining: budgetLeft,
		Build:           metrics.Build{Version: build.Version, Revision: build.Revision, GoVersion: build.GoVersion},
	})
}

// newSource returns the /sync source. After a crash, or when the
// homeserver was just starting, its first answer is checked room by room.
func newSource(cfg config.Config, deps Deps, store *persistence.Badger, clean bool, log *slog.Logger) *matrix.Source {
	source := matrix.NewSource(deps.Session, matrix.SyncOptions{
		Timeout:       cfg.Matrix.SyncTimeout(),
		TimelineLimit: cfg.Matrix.SyncTimelineLimit,
		GapPageLimit:  cfg.Matrix.GapPageLimit,
		Aliases:       cfg.Matrix.MentionAliases,
		AllowedRooms:  cfg.Matrix.AllowedRoomIDs,
		OnEncrypted:   deps.OnEncrypted,
	}, store, log, time.Now)
	if cur, err := store.Cursor(); err == nil && cur.GetBaselineDone() && (!clean || deps.HomeserverWasDown) {
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
	return source
}

// personaReply returns the exact content of the persona's text as a reply
// to an invoking message: it pings the asker, and only them, and goes into
// the message's thread. It is deterministic. Refused candidates keep no
// body, so their reply quotes nothing.
func personaReply(rend *render.Renderer, text string) func(c *roompb.Candidate) []byte {
	return func(c *roompb.Candidate) []byte {
		b, err := rend.Render(render.Answer{Markdown: text, InReplyTo: render.Invoking{
			EventID: c.GetEventId(), Sender: c.GetSender(), Body: c.GetBody(), ThreadRoot: c.GetThreadRootEventId(),
		}})
		if err != nil { // cannot happen for a validated, non-empty message
			b, _ = json.Marshal(map[string]any{"msgtype": "m.text", "body": text,
				"m.relates_to": map[string]any{"m.in_reply_to": map[string]string{"event_id": c.GetEventId()}}})
		}
		return b
	}
}

// txnIDsFrom records the fingerprint of this process's access token and
// returns from when on the replies made are covered by the server's
// memory of transaction IDs: all of them (zero time) unless the server
// scopes them to the access token and the token differs from the one the
// previous process used (or is not known), then only this process's
// (from now).
func txnIDsFrom(store *persistence.Badger, txn matrix.TxnIDs, token string, now time.Time) (time.Time, error) {
	sum := sha256.Sum256([]byte("lisa access token fingerprint\x00" + token))
	fp := hex.EncodeToString(sum[:16])
	prev, err := store.SwapSessionFingerprint(fp)
	if err != nil {
		return time.Time{}, err
	}
	if txn.PerToken && prev != fp {
		return now, nil
	}
	return time.Time{}, nil
}

// withTxnIDs is p with the server's memory of transaction IDs.
func (d *Daemon) withTxnIDs(p room.Policy, txn matrix.TxnIDs) room.Policy {
	p.TxnIDRetention, p.TxnIDsFrom = txn.Retention, d.txnIDsFrom
	return p
}

// roomPolicy is every room's policy.
func roomPolicy(cfg config.Config) room.Policy {
	rend := render.New()
	return room.Policy{
		MaxAttempts: 3,
		RetryBase:   2 * time.Second, RetryMax: 30 * time.Second,
		SendRetryBase: time.Second, SendRetryMax: time.Minute,
		// Dendrite stores a send whose client gave up seconds later after
		// a restart or under load (see docs/reliability.md): a reply is
		// sent again only after two lookups this far apart both missed it.
		SettleDelay: 5 * time.Second,
		// A send cut short by a homeserver restart can be stored minutes
		// later (Dendrite's queue redelivers it after 5 min 10 s):
		// matrix.late_store_seconds.
		LateStoreWindow: cfg.Matrix.LateStore(),
		RecheckEvery:    15 * time.Second,
		ErrorReply:      personaReply(rend, cfg.Persona.GenericError),
		// A flood in one room costs one overload reply per burst; see
		// docs/security.md.
		MaxQueue:      cfg.Runtime.RoomQueueLimit,
		SenderLimit:   cfg.Runtime.SenderRateLimit,
		SenderWindow:  cfg.Runtime.SenderRateWindow(),
		NoticeEvery:   cfg.Runtime.SenderRateWindow(),
		OverloadReply: personaReply(rend, cfg.Persona.OverloadError),
		// A question pending this long gets a reaction, removed when it
		// is answered: runtime.wait_reaction(_seconds).
		WaitReaction:      cfg.Runtime.WaitReaction,
		WaitReactionAfter: cfg.Runtime.WaitReactionAfter(),
	}
}

// treeConfig is the actor tree of cfg.
func (d *Daemon) treeConfig(cfg config.Config, deps Deps, provider *persistence.Provider, invoker invocation.Invoker, met *metrics.Metrics) app.TreeConfig {
	sender := deps.Sender
	if sender == nil {
		sender = deps.Session
	}
	return app.TreeConfig{
		OnLost: func(child string) {
			if d.stopping.Load() {
				return
			}
			d.log.Error("an essential actor stopped for good; exiting so Lisa can be restarted", "actor", child)
			if deps.Fatal != nil {
				deps.Fatal()
			}
		},
		Invocations: d.invocations,
		Rooms:       cfg.Matrix.AllowedRoomIDs, MaxConcurrent: cfg.Runtime.MaxConcurrentRooms,
		Policy:   d.withTxnIDs(roomPolicy(cfg), deps.TxnIDs),
		Provider: provider, Inbox: d.store, BotEvents: d.store, Sender: sender, Durable: d.store,
		Invoker: invoker, InvocationTimeout: cfg.Runtime.InvocationTimeout(),
		ToolWorkers:  toolWorkers,
		SendTimeout:  sendTimeout,
		RoomRestarts: 3, RoomRestartWindow: time.Minute,
		RespawnBase: time.Second, RespawnMax: 5 * time.Minute,
		Sync: &app.SyncConfig{
			Source: d.source, Ledger: d.store,
			Watchdog: cfg.Matrix.SyncTimeout() + 60*time.Second,
			Backoff:  syncer.NewBackoff(time.Second, time.Minute, time.Minute, rand.Float64),
			Hooks:    deps.Hooks,
			Observer: met.SyncDone,
		},
		Clock: app.RealClock{}, Logger: d.log,
		RoomOptions:  crashOptions(deps.Crashable),
		RoomObserver: met,
		Trail:        d.trail,
	}
}

// serve opens the metrics endpoint and the status page (if configured)
// and the admin socket.
func (d *Daemon) serve(cfg config.Config, met *metrics.Metrics, token config.Secret) error {
	var err error
	if cfg.Runtime.MetricsListen != "" {
		if d.metrics, err = metrics.Serve(cfg.Runtime.MetricsListen, met); err != nil {
			return err
		}
		d.log.Info("metrics served", "address", d.metrics.Addr())
	}
	if cfg.Runtime.StatusListen != "" {
		opts := status.Options{Logger: d.log, OnAuthFailure: met.StatusAuthFailed}
		if !token.IsZero() {
			// A token protects a loopback page too: from other users of
			// this machine (docs/security.md).
			opts.Token = token.Reveal()
		}
		if d.status, err = status.Serve(cfg.Runtime.StatusListen, d.statusPage, opts); err != nil {
			d.closeServers()
			return err
		}
		d.log.Info("status page served", "address", d.status.Addr(), "token_required", opts.Token != "")
	}
	if d.admin, err = admin.Listen(cfg.Runtime.AdminSocket, d, d.log); err != nil {
		d.closeServers()
		return err
	}
	return nil
}

// closeServers closes the metrics endpoint and the status page, if open.
func (d *Daemon) closeServers() {
	if d.metrics != nil {
		_ = d.metrics.Close()
	}
	if d.status != nil {
		_ = d.status.Close()
	}
	if d.names != nil {
		d.names.close()
	}
}

// stop shuts down in order within the grace period: no new intake, no new
// invocations; running invocations and sends get the rest of the grace
// period to finish; then everything left is stopped (cancelled attempts
// clear their typing on the way out) and the store closes. An attempt cut
// short is retried after the next start; a prepared reply is looked up on
// the homeserver and sent only if it is not there.
func (d *Daemon) Stop(ctx context.Context) error {
	// Keep part of the grace period for stopping the actors and closing
	// the store, so the whole shutdown fits in it.
	reserve := min(2*time.Second, d.grace/2)
	deadline := time.Now().Add(d.grace - reserve)
	d.stopping.Store(true)
	if d.admin != nil {
		_ = d.admin.Close()
	}
	d.closeServers()
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
	err := d.stopActors()
	clean := syncErr == nil && d.cleanSync()
	if clean {
		if merr := d.store.MarkCleanStop(); merr != nil {
			clean = false
			if err == nil {
				err = merr
			}
		}
	}
	d.sweeper.Stop()
	if cerr := d.store.Close(); err == nil {
		err = cerr
	}
	d.log.Info("lisa stopped", "clean", clean)
	return err
}

// stopActors stops the actor tree and lets cancelled attempts run their
// clean-up (typing off), briefly.
func (d *Daemon) stopActors() error {
	stopCtx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	err := d.sys.Stop(stopCtx)
	waited := make(chan struct{})
	go func() { d.invocations.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(typingClearTimeout + time.Second):
	}
	return err
}

// stopFailed stops a daemon whose store failed. The actor tree stops at
// once: nothing it would do can be made durable, and nothing is sent
// without that. The admin socket keeps answering (health reports the
// failure) until release is closed; then the store closes. No clean-stop
// mark is written: the next start checks its first sync answer against
// the homeserver, as after a crash.
func (d *Daemon) stopFailed(release <-chan struct{}) error {
	d.stopping.Store(true)
	err := d.stopActors()
	<-release
	if d.admin != nil {
		_ = d.admin.Close()
	}
	d.closeServers()
	d.sweeper.Stop()
	if cerr := d.store.Close(); err == nil {
		err = cerr
	}
	d.log.Info("lisa stopped", "clean", false)
	return err
}

// cleanSync reports whether the next start may trust its first /sync: the
// sync has stopped, no check of an answer is pending, and the last checked
// answer was committed (the sync actor drops an answer that arrives while
// it stops, and a dropped checked answer takes its check with it).
func (d *Daemon) cleanSync() bool {
	return !d.source.VerifyPending() && !d.source.UncommittedCheck()
}

// idle reports whether no room runs an invocation or delivers a reply. It
// asks the rooms supervisor once: the rooms tell it when they start and
// finish such work.
func (d *Daemon) idle() bool {
	busy, err := d.sys.BusyRooms(time.Second)
	return err != nil || busy == 0 // an error: rooms gone, nothing left to wait for
}

// AwaitBaseline waits, at most limit, until Lisa's first sync recorded
// its baseline: messages before it are history and are never answered.
func (d *Daemon) AwaitBaseline(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		cur, err := d.store.Cursor()
		if err != nil {
			return err
		}
		if cur.GetBaselineDone() {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("Lisa's first sync did not complete within %v", limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
