package main

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/goleak"

	"github.com/lisabot/lisa/actors/invocation"
	"github.com/lisabot/lisa/actors/room"
	"github.com/lisabot/lisa/actors/syncer"
	"github.com/lisabot/lisa/adapters/logging"
	"github.com/lisabot/lisa/adapters/matrix"
	"github.com/lisabot/lisa/adapters/metrics"
	"github.com/lisabot/lisa/adapters/research"
	"github.com/lisabot/lisa/chaos"
	"github.com/lisabot/lisa/config"
	"github.com/lisabot/lisa/messages"
	"github.com/lisabot/lisa/messages/roompb"
)

// failpointEnv names the test-only variable that makes the process kill
// itself (SIGKILL) at one point of the reply protocol. Crash tests use it
// to stop Lisa exactly where they mean to; operators never set it.
const failpointEnv = "LISA_TEST_FAILPOINT"

// Failpoints.
const (
	fpAfterSyncCommit = "after-sync-commit" // candidates and cursor committed, no room nudged
	fpBeforeSend      = "before-send"       // ReplyReady persisted, nothing sent
	fpAfterSend       = "after-send"        // homeserver accepted, ReplySent not persisted
	fpAdminCrash      = "admin-crash"       // the admin socket accepts "crash <room>"
)

// runCmd is `lisa run --config FILE`: the daemon, until SIGTERM or SIGINT.
func runCmd(ctx context.Context, c *cli, args []string) int {
	loaded, code, ok := loadConfigFlag(c, "run", args)
	if !ok {
		return code
	}
	res := loaded.Resolved
	log := logging.New(c.stderr, res.Config.Runtime.SlogLevel(), res.Secrets())
	if v, err := checkPandoc(ctx, res.Config); err != nil {
		log.Error("cannot start: pandoc is needed for html_to_markdown", "err", err.Error())
		return exitFailure
	} else {
		log.Info("pandoc found", "version", v)
	}
	m := res.Config.Matrix
	session, waited, err := connect(ctx, m, res.MatrixAccessToken.Reveal(), matrixHTTPClient(res.Config.Runtime), log, time.After)
	if err != nil {
		log.Error("cannot start: Matrix session check failed", "err", err.Error())
		return exitFailure
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var lost atomic.Bool
	deps := daemonDeps{
		fatal:             func() { lost.Store(true); cancel() },
		session:           session,
		homeserverWasDown: waited,
		invoker: func(pool research.Runner, met *metrics.Metrics) invocation.Invoker {
			return newAnswerer(res, session, log, pool, met)
		},
	}
	applyFailpoint(c.getenv, &deps, log)
	if err := applyChaos(c.getenv, &deps, log); err != nil {
		log.Error("cannot start", "err", err.Error())
		return exitFailure
	}
	deps.kills.wire(&deps, log)
	var before goleak.Option
	if deps.leakCheck {
		before = goleak.IgnoreCurrent()
	}
	d, err := startDaemon(res, log, deps)
	if err != nil {
		log.Error("cannot start", "err", err.Error())
		return exitFailure
	}
	log.Info("lisa running", "rooms", len(m.AllowedRoomIDs), "user", m.UserID, "device", m.DeviceID)
	<-ctx.Done()
	log.Info("shutting down", "grace_seconds", res.Config.Runtime.ShutdownGraceSeconds)
	if err := d.stop(context.Background()); err != nil {
		log.Error("shutdown incomplete", "err", err.Error())
		return exitFailure
	}
	if deps.leakCheck {
		reportLeaks(log, before)
	}
	if lost.Load() {
		return exitFailure
	}
	return exitOK
}

// connect restores the Matrix session. While the homeserver is unreachable,
// overloaded or rate limiting, it waits and tries again (until ctx ends):
// a daemon started before its homeserver must not give up. A wrong token,
// user or device is final.
func connect(ctx context.Context, m config.MatrixConfig, token string, hc *http.Client, log *slog.Logger, after func(time.Duration) <-chan time.Time) (_ *matrix.Client, waited bool, _ error) {
	delay := time.Second
	for {
		session, err := matrix.Connect(ctx, m.HomeserverURL, m.UserID, m.DeviceID, token, hc)
		var le *messages.Error
		if err == nil || !errors.As(err, &le) || (le.Code != messages.CodeMatrixUnavailable && le.Code != messages.CodeMatrixRateLimit) {
			return session, waited, err
		}
		waited = true
		wait := delay
		if le.RetryAfter > 0 {
			wait = min(le.RetryAfter, time.Minute)
		}
		log.Warn("homeserver not available yet; retrying the session check", "err", err.Error(), "retry_in_ms", wait.Milliseconds())
		select {
		case <-ctx.Done():
			return nil, waited, err
		case <-after(wait):
		}
		delay = min(2*delay, 30*time.Second)
	}
}

// applyFailpoint arms the test-only failpoint named in the environment.
func applyFailpoint(getenv config.LookupEnv, deps *daemonDeps, log *slog.Logger) {
	fp, _ := getenv(failpointEnv)
	if fp == "" {
		return
	}
	log.Warn("test failpoint armed; this process will kill itself", "failpoint", fp)
	always := func() bool { return true }
	switch fp {
	case fpAfterSyncCommit:
		deps.kills.afterSyncCommit = always
	case fpAdminCrash:
		deps.crashable = true
	case fpBeforeSend:
		deps.kills.beforeSend = always
	case fpAfterSend:
		deps.kills.afterSend = always
	}
}

// applyChaos arms the actor faults and failpoint kills of a chaos plan
// given in the environment (chaos campaigns only).
func applyChaos(getenv config.LookupEnv, deps *daemonDeps, log *slog.Logger) error {
	raw, _ := getenv(chaos.PlanEnv)
	if raw == "" {
		return nil
	}
	plan, err := chaos.ParsePlan(raw)
	if err != nil {
		return err
	}
	log.Warn("chaos plan armed: this process injects faults into itself", "seed", plan.Seed, "rate", plan.Rate, "targets", len(plan.Targets))
	in := chaos.NewInjector(plan, func(f chaos.Fault) {
		log.Warn(chaosFaultMsg, "kind", f.Kind.String(), "actor", messages.ActorLogID(f.Actor), "message", f.Message)
	})
	deps.spawn = in.Spawn()
	deps.leakCheck = true
	for name, slot := range map[string]*func() bool{
		fpAfterSyncCommit: &deps.kills.afterSyncCommit, fpBeforeSend: &deps.kills.beforeSend, fpAfterSend: &deps.kills.afterSend,
	} {
		if d := in.KillDecider(name); d != nil {
			*slot = d
		}
	}
	return nil
}

// chaosFaultMsg and chaosKillMsg are the log messages campaigns count.
const (
	chaosFaultMsg = "chaos fault injected"
	chaosKillMsg  = "failpoint reached: killing this process"
)

// kills are the failpoints of the reply protocol: each, when set, is asked
// whether to SIGKILL the process at that point.
type kills struct {
	afterSyncCommit, beforeSend, afterSend func() bool
}

// wire installs the armed failpoints into deps.
func (k kills) wire(deps *daemonDeps, log *slog.Logger) {
	die := func(point string) {
		log.Warn(chaosKillMsg, "failpoint", point)
		_ = syscall.Kill(syscall.Getpid(), syscall.SIGKILL)
		select {}
	}
	if k.afterSyncCommit != nil {
		deps.hooks = &syncer.Hooks{AfterCommit: func(accepted []*roompb.Candidate) {
			if len(accepted) > 0 && k.afterSyncCommit() {
				die(fpAfterSyncCommit)
			}
		}}
	}
	if k.beforeSend != nil || k.afterSend != nil {
		deps.sender = failpointSender{inner: deps.session, kills: k, die: die}
	}
}

type failpointSender struct {
	inner room.Sender
	kills kills
	die   func(point string)
}

func (f failpointSender) SendReply(ctx context.Context, rm, txn string, content []byte) (string, error) {
	if f.kills.beforeSend != nil && f.kills.beforeSend() {
		f.die(fpBeforeSend)
	}
	id, err := f.inner.SendReply(ctx, rm, txn, content)
	if err == nil && f.kills.afterSend != nil && f.kills.afterSend() {
		f.die(fpAfterSend)
	}
	return id, err
}

func (f failpointSender) FindReply(ctx context.Context, rm, ev, txn string) (string, bool, error) {
	return f.inner.FindReply(ctx, rm, ev, txn)
}

// leakCheckMsg is the log message of the goroutine check after a graceful
// stop; campaigns require leaked=0.
const leakCheckMsg = "goroutine leak check after stop"

// reportLeaks logs the goroutines the daemon left behind after stopping:
// everything not running before it started, except idle keep-alive
// connections of HTTP clients (they close themselves when idle) and
// protoactor's dead-letter throttle timer (it ends after its interval).
func reportLeaks(log *slog.Logger, before goleak.Option) {
	err := goleak.Find(before,
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreAnyFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"),
	)
	if err == nil {
		log.Info(leakCheckMsg, "leaked", 0)
		return
	}
	text := err.Error()
	log.Error(leakCheckMsg, "leaked", max(1, strings.Count(text, "[Goroutine ")), "goroutines", truncate(text, 8000))
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
