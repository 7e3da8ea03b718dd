package chaos

import (
	"context"
	"log/slog"
	"strings"
	"syscall"

	"go.uber.org/goleak"

	"github.com/lisabot/lisa/actors/room"
	"github.com/lisabot/lisa/actors/syncer"
	"github.com/lisabot/lisa/daemon"
	"github.com/lisabot/lisa/messages"
	"github.com/lisabot/lisa/messages/roompb"
)

// FailpointEnv names the variable that makes a test build of Lisa kill
// itself (SIGKILL) at one point of the reply protocol. Crash tests use it
// to stop Lisa exactly where they mean to. The production binary does not
// read it: only builds that pass [Arm] to the daemon do.
const FailpointEnv = "LISA_TEST_FAILPOINT"

// Failpoints of the reply protocol.
const (
	FailAfterSyncCommit = "after-sync-commit" // candidates and cursor committed, no room nudged
	FailBeforeSend      = "before-send"       // ReplyReady persisted, nothing sent
	FailAfterSend       = "after-send"        // homeserver accepted, ReplySent not persisted
	FailAdminCrash      = "admin-crash"       // the admin socket accepts "crash <room>"
)

// Arm returns the daemon hook of test and chaos builds: it arms the
// failpoint named by FailpointEnv and the chaos plan in PlanEnv (actor
// faults, failpoint kills and a goroutine leak check after a graceful
// stop), as getenv reports them.
func Arm(getenv func(string) (string, bool)) daemon.ArmFunc {
	return func(deps *daemon.Deps, log *slog.Logger) (func(), error) {
		var k kills
		armFailpoint(getenv, deps, &k, log)
		armClock(getenv, deps)
		leakCheck, err := armPlan(getenv, deps, &k, log)
		if err != nil {
			return nil, err
		}
		k.wire(deps, log)
		if !leakCheck {
			return nil, nil
		}
		before := goleak.IgnoreCurrent()
		return func() { reportLeaks(log, before) }, nil
	}
}

// armFailpoint arms the failpoint named in the environment.
func armFailpoint(getenv func(string) (string, bool), deps *daemon.Deps, k *kills, log *slog.Logger) {
	fp, _ := getenv(FailpointEnv)
	if fp == "" {
		return
	}
	log.Warn("test failpoint armed; this process will kill itself", "failpoint", fp)
	always := func() bool { return true }
	switch fp {
	case FailAfterSyncCommit:
		k.afterSyncCommit = always
	case FailAdminCrash:
		deps.Crashable = true
	case FailBeforeSend:
		k.beforeSend = always
	case FailAfterSend:
		k.afterSend = always
	}
}

// armPlan arms the actor faults and failpoint kills of a chaos plan given
// in the environment; it reports whether a plan was armed.
func armPlan(getenv func(string) (string, bool), deps *daemon.Deps, k *kills, log *slog.Logger) (bool, error) {
	raw, _ := getenv(PlanEnv)
	if raw == "" {
		return false, nil
	}
	plan, err := ParsePlan(raw)
	if err != nil {
		return false, err
	}
	log.Warn("chaos plan armed: this process injects faults into itself", "seed", plan.Seed, "rate", plan.Rate, "targets", len(plan.Targets))
	in := NewInjector(plan, func(f Fault) {
		log.Warn(logFault, "kind", f.Kind.String(), "actor", messages.ActorLogID(f.Actor), "message", f.Message)
	})
	deps.Spawn = in.Spawn()
	for name, slot := range map[string]*func() bool{
		FailAfterSyncCommit: &k.afterSyncCommit, FailBeforeSend: &k.beforeSend, FailAfterSend: &k.afterSend,
	} {
		if d := in.KillDecider(name); d != nil {
			*slot = d
		}
	}
	return true, nil
}

// kills are the failpoints of the reply protocol: each, when set, is asked
// whether to SIGKILL the process at that point.
type kills struct {
	afterSyncCommit, beforeSend, afterSend func() bool
}

// wire installs the armed failpoints into deps.
func (k kills) wire(deps *daemon.Deps, log *slog.Logger) {
	die := func(point string) {
		log.Warn(logKill, "failpoint", point)
		_ = syscall.Kill(syscall.Getpid(), syscall.SIGKILL)
		select {}
	}
	if k.afterSyncCommit != nil {
		deps.Hooks = &syncer.Hooks{AfterCommit: func(accepted []*roompb.Candidate) {
			if len(accepted) > 0 && k.afterSyncCommit() {
				die(FailAfterSyncCommit)
			}
		}}
	}
	if k.beforeSend != nil || k.afterSend != nil {
		deps.Sender = failpointSender{inner: deps.Session, kills: k, die: die}
	}
}

type failpointSender struct {
	inner room.Sender
	kills kills
	die   func(point string)
}

func (f failpointSender) SendReply(ctx context.Context, rm, txn string, content []byte) (string, error) {
	if f.kills.beforeSend != nil && f.kills.beforeSend() {
		f.die(FailBeforeSend)
	}
	id, err := f.inner.SendReply(ctx, rm, txn, content)
	if err == nil && f.kills.afterSend != nil && f.kills.afterSend() {
		f.die(FailAfterSend)
	}
	return id, err
}

func (f failpointSender) FindReply(ctx context.Context, rm, ev, txn string) (string, bool, error) {
	return f.inner.FindReply(ctx, rm, ev, txn)
}

func (f failpointSender) FindReplyToRedact(ctx context.Context, rm, ev, txn string) (string, bool, error) {
	return f.inner.FindReplyToRedact(ctx, rm, ev, txn)
}

func (f failpointSender) React(ctx context.Context, rm, ev, key, txn string) (string, error) {
	return f.inner.React(ctx, rm, ev, key, txn)
}

func (f failpointSender) FindReactions(ctx context.Context, rm, ev, key string) ([]string, error) {
	return f.inner.FindReactions(ctx, rm, ev, key)
}

func (f failpointSender) Redact(ctx context.Context, rm, ev, txn string) error {
	return f.inner.Redact(ctx, rm, ev, txn)
}

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
		log.Info(logLeakCheck, "leaked", 0)
		return
	}
	text := err.Error()
	if len(text) > 8000 {
		text = text[:8000] + "…"
	}
	log.Error(logLeakCheck, "leaked", max(1, strings.Count(err.Error(), "[Goroutine ")), "goroutines", text)
}
