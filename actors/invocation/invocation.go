package invocation

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/lisabot/lisa/messages"
	"github.com/lisabot/lisa/messages/roompb"
)

// Invoker produces the exact reply content for one candidate. Returning a
// *messages.Error classifies the failure; any other error counts as a
// transient internal failure.
type Invoker interface {
	Invoke(ctx context.Context, c *roompb.Candidate, attempt uint32) ([]byte, error)
}

// InvokerFunc adapts a function to Invoker.
type InvokerFunc func(ctx context.Context, c *roompb.Candidate, attempt uint32) ([]byte, error)

// Invoke implements Invoker.
func (f InvokerFunc) Invoke(ctx context.Context, c *roompb.Candidate, attempt uint32) ([]byte, error) {
	return f(ctx, c, attempt)
}

// Config is what every invocation child shares.
type Config struct {
	Invoker Invoker
	// Timeout bounds one attempt (runtime.invocation_timeout_seconds).
	Timeout time.Duration
	Logger  *slog.Logger
	// Running counts attempts in flight (including their typing clean-up),
	// so shutdown can wait for them. Optional.
	Running *sync.WaitGroup
}

// Props returns the props of a child running attempt for c. The child
// reports exactly one messages.InvocationResult to its parent, unless it
// is stopped first.
// The attempt ends at deadline (the invocation's, across attempts) or
// after cfg.Timeout, whichever is first; a zero deadline means only the
// latter.
func Props(cfg Config, c *roompb.Candidate, attempt uint32, deadline time.Time, opts ...actor.PropsOption) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor {
		return &child{cfg: cfg, cand: c, attempt: attempt, deadline: deadline}
	}, opts...)
}

type child struct {
	cfg      Config
	cand     *roompb.Candidate
	attempt  uint32
	deadline time.Time
	cancel   context.CancelFunc
}

type done struct{ res *messages.InvocationResult }

func (a *child) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		if a.cancel != nil {
			return
		}
		end := time.Now().Add(a.cfg.Timeout)
		if !a.deadline.IsZero() && a.deadline.Before(end) {
			end = a.deadline
		}
		runCtx, cancel := context.WithDeadline(context.Background(), end)
		a.cancel = cancel
		self, sys := ctx.Self(), ctx.ActorSystem()
		if a.cfg.Running != nil {
			a.cfg.Running.Add(1)
		}
		go func() {
			if a.cfg.Running != nil {
				defer a.cfg.Running.Done()
			}
			res := a.run(runCtx)
			sys.Root.Send(self, &done{res: res})
		}()
	case *done:
		ctx.Request(ctx.Parent(), m.res) // Request: the room checks the sender
	case *actor.Stopping, *actor.Restarting:
		if a.cancel != nil {
			a.cancel()
		}
	}
}

// run performs the attempt; a panic in the invoker becomes a failure
// result instead of crashing the process. Its final log line counts the
// attempt's LLM requests (iterations), its tool calls in all, failed and
// by outcome, its fallback, and the tokens when the server reported
// them; tool failures and fallbacks are also logged as they happen.
func (a *child) run(ctx context.Context) (res *messages.InvocationResult) {
	res = &messages.InvocationResult{EventID: messages.EventID(a.cand.GetEventId()), Attempt: a.attempt}
	start := time.Now()
	var log *slog.Logger
	if a.cfg.Logger != nil {
		log = a.cfg.Logger.With("room", messages.RoomID(a.cand.GetRoomId()), "event", messages.EventID(a.cand.GetEventId()), "attempt", a.attempt)
	}
	ctx, stats := withAttempt(ctx, log)
	defer func() {
		if r := recover(); r != nil {
			if log != nil {
				log.Error("invoker panicked", "panic_type", fmt.Sprintf("%T", r), "stack", string(debug.Stack()))
			}
			res.Content = nil
			res.Err = &messages.Error{Code: messages.CodeInvocationPanic, Message: fmt.Sprintf("invoker panicked (%T)", r)}
		}
		res.Stats = stats.counts()
		if log != nil {
			attrs := append([]any{"code", messages.ErrorCode(errOrNil(res.Err)), "duration_ms", time.Since(start).Milliseconds()}, stats.logAttrs()...)
			log.Info("invocation attempt finished", attrs...)
		}
	}()
	content, err := a.cfg.Invoker.Invoke(ctx, a.cand, a.attempt)
	switch {
	case err == nil && len(content) == 0:
		res.Err = &messages.Error{Code: messages.CodeInternal, Message: "invoker returned no content"}
	case err == nil:
		res.Content = content
	default:
		res.Err = classify(ctx, err)
	}
	return res
}

func classify(ctx context.Context, err error) *messages.Error {
	var le *messages.Error
	if errors.As(err, &le) {
		return le
	}
	if ctx.Err() == context.DeadlineExceeded {
		return &messages.Error{Code: messages.CodeDeadline, Message: "invocation timed out", Err: err}
	}
	return &messages.Error{Code: messages.ErrorCode(err), Message: "invocation failed", Err: err}
}

func errOrNil(e *messages.Error) error {
	if e == nil {
		return nil
	}
	return e
}
