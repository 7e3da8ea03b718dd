package daemon

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/lisabot/lisa/actors/invocation"
	"github.com/lisabot/lisa/actors/tools"
	"github.com/lisabot/lisa/adapters/matrix"
	"github.com/lisabot/lisa/adapters/metrics"
	"github.com/lisabot/lisa/adapters/pandoc"
	"github.com/lisabot/lisa/backoff"
	"github.com/lisabot/lisa/buildinfo"
	"github.com/lisabot/lisa/config"
	"github.com/lisabot/lisa/messages"
)

// ArmFunc lets a test or chaos build change deps before the daemon starts
// (failpoints, fault injection). It may return a function to run after a
// graceful stop (say, a goroutine leak check). The production binary
// passes none.
type ArmFunc func(deps *Deps, log *slog.Logger) (afterStop func(), err error)

// InvokerFactory builds what answers invocations for a session.
type InvokerFactory func(session *matrix.Client) func(pool *tools.Client, met *metrics.Metrics) invocation.Invoker

// RunOptions are what `lisa run` varies between builds.
type RunOptions struct {
	// Invoker builds the answerer; nil means [ProductionInvoker].
	Invoker InvokerFactory
	// Arm, if set, arms test or chaos hooks.
	Arm ArmFunc
	// Build is the binary's build info (the start-up log line, health,
	// the status page, lisa_build_info).
	Build buildinfo.Info
}

// logStoppedStarting is logged when Lisa is stopped before she started.
const logStoppedStarting = "stopped before Lisa started"

// ErrLost is returned by Run when part of the actor tree stopped for good
// and Lisa shut down so that her supervisor restarts her.
var ErrLost = errors.New("an essential actor stopped for good")

// ErrStoreFailed is returned by Run when the store could not sync to disk
// and Lisa stopped so that her supervisor restarts her; she then replays
// what is on disk (see persistence.ErrSyncFailed).
var ErrStoreFailed = errors.New("the store could not sync to disk")

// FailureHold is how long a daemon whose store failed keeps answering
// `lisa health` (status "failed") after its actors stopped, before it
// exits: long enough for a monitor or an operator to see why.
const FailureHold = 5 * time.Second

// Run is `lisa run` after its configuration is loaded: it checks the
// HTML-to-Markdown converter (refusing to start without a usable pandoc
// when web.converter = "pandoc"), restores the Matrix session (waiting
// while the homeserver is not up
// yet), starts the daemon and stops it gracefully when ctx ends. Errors
// have been logged when it returns them.
//
// A stop (ctx ending) before she started is a clean stop, not a failure:
// nothing ran, and the checks it cut short (pandoc's, the session's) said
// nothing about pandoc or the homeserver.
func Run(ctx context.Context, res config.Resolved, log *slog.Logger, opts RunOptions) error {
	parent := ctx
	log.Info("lisa starting", opts.Build.LogAttrs()...)
	if v, err := CheckConverter(ctx, res.Config); err != nil {
		if ctx.Err() != nil {
			log.Info(logStoppedStarting, "step", "converter check")
			return nil
		}
		log.Error("cannot start: html_to_markdown has no converter", "err", err.Error())
		return err
	} else {
		log.Info("html_to_markdown converter ready", "converter", v)
	}
	m := res.Config.Matrix
	session, waited, err := connect(ctx, m, res.MatrixAccessToken.Reveal(), MatrixHTTPClient(res.Config.Runtime), log, time.After)
	if err != nil {
		if ctx.Err() != nil {
			log.Info(logStoppedStarting, "step", "Matrix session check")
			return nil
		}
		log.Error("cannot start: Matrix session check failed", "err", err.Error())
		return err
	}
	// Whether a reply in doubt may be sent again at once with its
	// transaction ID, or is held for matrix.late_store_seconds.
	ident := session.Identify(ctx, 5*time.Second)
	txnIDs := matrix.TxnIDPolicy(m.TxnIDsSurviveRestart, ident)
	log.Info("homeserver identified", "name", ident.Name, "version", ident.Version, "from", ident.From,
		"txn_ids_survive_restart", txnIDs.Retention > 0, "reason", txnIDs.Reason)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if opts.Invoker == nil {
		opts.Invoker = ProductionInvoker(res, log)
	}
	var lost atomic.Bool
	enc := newEncryptedRooms(log)
	deps := Deps{
		Fatal:             func() { lost.Store(true); cancel() },
		Session:           session,
		HomeserverWasDown: waited,
		Invoker:           opts.Invoker(session),
		OnEncrypted:       func(room string) { enc.Mark(room, "sync") },
		Build:             opts.Build,
		TxnIDs:            txnIDs,
	}
	var afterStop func()
	if opts.Arm != nil {
		if afterStop, err = opts.Arm(&deps, log); err != nil {
			log.Error("cannot start", "err", err.Error())
			return err
		}
	}
	d, err := Start(res, log, deps)
	if err != nil {
		log.Error("cannot start", "err", err.Error())
		return err
	}
	log.Info("lisa running", "rooms", len(m.AllowedRoomIDs), "user", m.UserID, "device", m.DeviceID)
	encryptionChecked := watchEncryption(ctx, d, enc, session, m.AllowedRoomIDs)
	select {
	case <-ctx.Done():
	case <-d.store.Failed():
		// Nothing is sent on a write that may not be on disk (every
		// barrier fails now); stop, and let the supervisor start Lisa
		// again from what is on disk.
		log.Error("stopping: the store could not sync to disk; nothing more is sent, and Lisa exits so that she is restarted and replays what is on disk",
			"code", "store_sync_failed", "err", d.store.Err().Error(), "health_seconds", FailureHold.Seconds())
		cancel()
		encryptionChecked()
		if err := d.stopFailed(hold(parent, FailureHold)); err != nil {
			log.Error("shutdown incomplete", "err", err.Error())
		}
		// afterStop (a test build's leak check after a graceful stop) is
		// not run: a failed store may leave Badger's flush goroutine
		// retrying until the process exits.
		return ErrStoreFailed
	}
	encryptionChecked()
	log.Info("shutting down", "grace_seconds", res.Config.Runtime.ShutdownGraceSeconds)
	if err := d.Stop(context.Background()); err != nil {
		log.Error("shutdown incomplete", "err", err.Error())
		return err
	}
	if afterStop != nil {
		afterStop()
	}
	if lost.Load() {
		return ErrLost
	}
	return nil
}

// hold returns a channel that is closed after d or when ctx ends, whichever
// comes first.
func hold(ctx context.Context, d time.Duration) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
	}()
	return ch
}

// CheckPandoc verifies that the pandoc executable is present and new enough
// for --sandbox, whatever web.converter says; [CheckConverter] checks the
// converter Lisa will use.
func CheckPandoc(ctx context.Context, cfg config.Config) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return pandoc.New(pandoc.Config{Timeout: cfg.Web.PandocTimeout()}).Check(ctx)
}

// connect restores the Matrix session. While the homeserver is unreachable,
// overloaded or rate limiting, it waits and tries again (until ctx ends):
// a daemon started before its homeserver must not give up. A wrong token,
// user or device is final.
func connect(ctx context.Context, m config.MatrixConfig, token string, hc *http.Client, log *slog.Logger, after func(time.Duration) <-chan time.Time) (_ *matrix.Client, waited bool, _ error) {
	pause := backoff.Policy{Base: time.Second, Max: 30 * time.Second, MaxRetryAfter: time.Minute}
	for failures := 1; ; failures++ {
		session, err := matrix.Connect(ctx, m.HomeserverURL, m.UserID, m.DeviceID, token, hc)
		var le *messages.Error
		if err == nil || !errors.As(err, &le) || (le.Code != messages.CodeMatrixUnavailable && le.Code != messages.CodeMatrixRateLimit) {
			return session, waited, err
		}
		waited = true
		wait := pause.Delay(failures, le.RetryAfter)
		log.Warn("homeserver not available yet; retrying the session check", "err", err.Error(), "retry_in_ms", wait.Milliseconds())
		select {
		case <-ctx.Done():
			return nil, waited, err
		case <-after(wait):
		}
	}
}
