package main

import (
	"context"
	"log/slog"
	"sync/atomic"
	"syscall"

	"github.com/lisabot/lisa/actors/invocation"
	"github.com/lisabot/lisa/actors/room"
	"github.com/lisabot/lisa/actors/syncer"
	"github.com/lisabot/lisa/adapters/logging"
	"github.com/lisabot/lisa/adapters/matrix"
	"github.com/lisabot/lisa/adapters/metrics"
	"github.com/lisabot/lisa/adapters/research"
	"github.com/lisabot/lisa/config"
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
	session, err := matrix.Connect(ctx, m.HomeserverURL, m.UserID, m.DeviceID, res.MatrixAccessToken.Reveal(), nil)
	if err != nil {
		log.Error("cannot start: Matrix session check failed", "err", err.Error())
		return exitFailure
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var lost atomic.Bool
	deps := daemonDeps{
		fatal:   func() { lost.Store(true); cancel() },
		session: session,
		invoker: func(pool research.Runner, met *metrics.Metrics) invocation.Invoker {
			return newAnswerer(res, session, log, pool, met)
		},
	}
	applyFailpoint(c.getenv, &deps, log)
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
	if lost.Load() {
		return exitFailure
	}
	return exitOK
}

// applyFailpoint arms the test-only failpoint named in the environment.
func applyFailpoint(getenv config.LookupEnv, deps *daemonDeps, log *slog.Logger) {
	fp, _ := getenv(failpointEnv)
	if fp == "" {
		return
	}
	log.Warn("test failpoint armed; this process will kill itself", "failpoint", fp)
	die := func() { _ = syscall.Kill(syscall.Getpid(), syscall.SIGKILL); select {} }
	switch fp {
	case fpAfterSyncCommit:
		deps.hooks = &syncer.Hooks{AfterCommit: func(accepted []*roompb.Candidate) {
			if len(accepted) > 0 {
				die()
			}
		}}
	case fpAdminCrash:
		deps.crashable = true
	case fpBeforeSend, fpAfterSend:
		deps.sender = failpointSender{inner: deps.session, before: fp == fpBeforeSend, die: die}
	}
}

type failpointSender struct {
	inner  room.Sender
	before bool
	die    func()
}

func (f failpointSender) SendReply(ctx context.Context, rm, txn string, content []byte) (string, error) {
	if f.before {
		f.die()
	}
	id, err := f.inner.SendReply(ctx, rm, txn, content)
	if err == nil {
		f.die()
	}
	return id, err
}

func (f failpointSender) FindReply(ctx context.Context, rm, ev, txn string) (string, bool, error) {
	return f.inner.FindReply(ctx, rm, ev, txn)
}
