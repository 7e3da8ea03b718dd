package tools

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/lisabot/lisa/messages"
)

// Handler runs the calls of one or more tools. It is called on a worker's
// goroutine, at most once at a time per worker, and must honour ctx (which
// ends at the call's deadline or when the caller gives up). Failures are
// results, not panics; a panic is recovered and answered with a
// tool_failed result, and the worker is replaced.
type Handler interface {
	// Call runs call and returns its result.
	Call(ctx context.Context, call *messages.ToolCall) *messages.ToolResult
}

// DefaultQueueLimit bounds the calls waiting for a worker when
// Config.QueueLimit is not positive; later calls are answered at once
// with a "busy" result.
const DefaultQueueLimit = 64

// Config configures a pool.
type Config struct {
	// Workers is the number of workers, named w1..wN (at least one).
	Workers int
	// QueueLimit bounds the calls waiting for a worker; 0 means
	// DefaultQueueLimit.
	QueueLimit int
	// Logger receives worker replacements.
	Logger *slog.Logger
}

// Status is the pool's state for the debug shell and tests.
type Status struct {
	Workers, Busy, Queued int
	// MaxQueued is the longest the queue has been.
	MaxQueued int
	// Completed counts calls a worker finished; Replaced counts workers
	// replaced after a panic; Rejected counts calls answered "busy"
	// because the queue was full.
	Completed, Replaced, Rejected int
}

// StatusRequest asks the pool for its Status.
type StatusRequest struct{}

// Props returns the props of a pool of workers workers with the default
// queue limit.
func Props(workers int, log *slog.Logger, opts ...actor.PropsOption) *actor.Props {
	return NewProps(Config{Workers: workers, Logger: log}, opts...)
}

// NewProps returns the props of a pool configured by cfg. opts apply to
// the pool and to its workers (mailbox tracking, panic logging). The
// registered handlers survive restarts of the pool.
func NewProps(cfg Config, opts ...actor.PropsOption) *actor.Props {
	if cfg.Workers < 1 {
		cfg.Workers = 1
	}
	if cfg.QueueLimit <= 0 {
		cfg.QueueLimit = DefaultQueueLimit
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	handlers := &handlerTable{byName: map[string]registration{}}
	return actor.PropsFromProducer(func() actor.Actor {
		return &pool{cfg: cfg, handlers: handlers, busy: map[string]*entry{}, running: map[string]int{}, workerOpts: opts}
	}, opts...)
}

// registration is one registered tool.
type registration struct {
	handler Handler
	// limit bounds the tool's concurrent calls; 0: the worker count.
	limit int
}

// handlerTable holds the registered tools. It outlives pool incarnations
// (it belongs to the props), and workers read it from their goroutines.
type handlerTable struct {
	mu     sync.RWMutex
	byName map[string]registration
}

func (t *handlerTable) get(name string) (registration, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	r, ok := t.byName[name]
	return r, ok
}

func (t *handlerTable) set(name string, r registration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.byName[name] = r
}

// entry is one accepted call: the call and whom to answer (the caller's
// future).
type entry struct {
	call    *messages.ToolCall
	replyTo *actor.PID
}

type pool struct {
	cfg        Config
	handlers   *handlerTable
	workerOpts []actor.PropsOption // the pool's own options (mailbox tracking, panic logging)
	self       *actor.PID
	workers    []*actor.PID
	idle       []*actor.PID
	busy       map[string]*entry // worker ID -> its call
	running    map[string]int    // tool name -> calls running
	queue      []*entry
	st         Status
	// leaving is set once the pool is stopping or restarting: a worker
	// that fails then is stopped, not restarted (see HandleFailure).
	leaving bool
}

// Messages between the pool, its workers and its clients.
type (
	// install registers a handler (sent by a Client ahead of its calls).
	install struct {
		name string
		reg  registration
	}
	// cancelCall: the caller whose future is caller gave up.
	cancelCall struct{ caller *actor.PID }
	// runCall hands a call to a worker.
	runCall struct{ e *entry }
	// cancelRun tells a worker its call's caller gave up.
	cancelRun struct{ caller *actor.PID }
	// finished: a worker is free again.
	finished struct{ worker *actor.PID }
	// repump: look at the queue again (after a worker was replaced).
	repump struct{}
)

func (p *pool) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		p.self = ctx.Self()
		for i := 1; i <= p.cfg.Workers; i++ {
			props := actor.PropsFromProducer(func() actor.Actor { return &worker{handlers: p.handlers} }, p.workerOpts...)
			pid, err := ctx.SpawnNamed(props, fmt.Sprintf("w%d", i))
			if err != nil {
				panic(fmt.Errorf("tools: spawn worker: %w", err))
			}
			p.workers = append(p.workers, pid)
			p.idle = append(p.idle, pid)
		}
	case *messages.ToolCall:
		p.accept(ctx, m)
	case *install:
		p.handlers.set(m.name, m.reg)
		p.pump(ctx)
	case *cancelCall:
		p.cancel(ctx, m.caller)
	case *finished:
		if e, ok := p.busy[m.worker.Id]; ok {
			p.release(m.worker, e)
		}
		p.pump(ctx)
	case *repump:
		p.pump(ctx)
	case *StatusRequest:
		st := p.st
		st.Workers, st.Busy, st.Queued = len(p.workers), len(p.busy), len(p.queue)
		ctx.Respond(&st)
	case *actor.Stopping, *actor.Restarting:
		p.leaving = true
		// Nobody waits forever: queued calls are answered now, running
		// ones by their workers as they stop.
		for _, e := range p.queue {
			ctx.Send(e.replyTo, timeoutResult())
		}
		p.queue = nil
	}
}

// accept answers a call that cannot run at once, or queues it.
func (p *pool) accept(ctx actor.Context, call *messages.ToolCall) {
	caller := ctx.Sender()
	if caller == nil {
		p.cfg.Logger.Warn("tool call without a sender dropped", "tool", call.Name)
		return
	}
	switch _, known := p.handlers.get(call.Name); {
	case !known:
		ctx.Respond(messages.ToolFailure(messages.ToolUnknownTool, "There is no such tool.", false))
		return
	case expired(call, time.Now()):
		ctx.Respond(timeoutResult())
		return
	case len(p.queue) >= p.cfg.QueueLimit:
		p.st.Rejected++
		ctx.Respond(messages.ToolFailure(messages.ToolBusy, "the tools are busy; try again later", true))
		return
	}
	p.queue = append(p.queue, &entry{call: call, replyTo: caller})
	p.st.MaxQueued = max(p.st.MaxQueued, len(p.queue))
	p.pump(ctx)
}

// cancel drops the call of caller if it still waits, so the queue length
// stays an honest measure of back-pressure, or tells its worker.
func (p *pool) cancel(ctx actor.Context, caller *actor.PID) {
	for i, e := range p.queue {
		if e.replyTo.Equal(caller) {
			p.queue = append(p.queue[:i:i], p.queue[i+1:]...)
			ctx.Send(caller, timeoutResult())
			return
		}
	}
	for id, e := range p.busy {
		if e.replyTo.Equal(caller) {
			for _, w := range p.workers {
				if w.Id == id {
					ctx.Send(w, &cancelRun{caller: caller})
				}
			}
			return
		}
	}
}

// pump hands queued calls to idle workers in FIFO order, skipping (but
// keeping in place) calls of tools at their concurrency limit, and
// answering calls whose deadline passed while they waited.
func (p *pool) pump(ctx actor.Context) {
	now := time.Now()
	kept := p.queue[:0]
	for _, e := range p.queue {
		switch {
		case expired(e.call, now):
			ctx.Send(e.replyTo, timeoutResult())
		case len(p.idle) == 0 || !p.hasRoom(e.call.Name):
			kept = append(kept, e)
		default:
			w := p.idle[len(p.idle)-1]
			p.idle = p.idle[:len(p.idle)-1]
			p.busy[w.Id] = e
			p.running[e.call.Name]++
			ctx.Send(w, &runCall{e: e})
		}
	}
	clear(p.queue[len(kept):])
	p.queue = kept
}

// hasRoom reports whether another call of the named tool may start.
func (p *pool) hasRoom(name string) bool {
	reg, _ := p.handlers.get(name)
	return reg.limit <= 0 || p.running[name] < reg.limit
}

// release marks w idle after it finished e.
func (p *pool) release(w *actor.PID, e *entry) {
	delete(p.busy, w.Id)
	if p.running[e.call.Name]--; p.running[e.call.Name] <= 0 {
		delete(p.running, e.call.Name)
	}
	p.st.Completed++
	p.idle = append(p.idle, w)
}

// HandleFailure replaces a worker that failed (its handler panicked: the
// caller already has a tool_failed result) and puts it back to work.
//
// While the pool is stopping or restarting, the worker is stopped instead:
// protoactor's restart would turn a stopping worker back into a running
// one, and the pool would wait for it for ever (see app's HandleFailure).
func (p *pool) HandleFailure(sys *actor.ActorSystem, sup actor.Supervisor, child *actor.PID, _ *actor.RestartStatistics, reason, _ any) {
	if p.leaving {
		sys.EventStream.Publish(&actor.SupervisorEvent{Child: child, Reason: reason, Directive: actor.StopDirective})
		sup.StopChildren(child)
		return
	}
	p.cfg.Logger.Warn("tool worker failed; replacing it", "worker", child.Id, "reason", fmt.Sprint(reason))
	sys.EventStream.Publish(&actor.SupervisorEvent{Child: child, Reason: reason, Directive: actor.RestartDirective})
	p.st.Replaced++
	sup.RestartChildren(child)
	if e, ok := p.busy[child.Id]; ok {
		p.release(child, e)
	}
	// HandleFailure has no actor context: pump on the next message.
	sys.Root.Send(p.self, &repump{})
}

func expired(call *messages.ToolCall, now time.Time) bool {
	return !call.Deadline.IsZero() && !now.Before(call.Deadline)
}

func timeoutResult() *messages.ToolResult {
	return messages.ToolFailure(messages.ToolTimeout, "the tool did not finish in time", false)
}

// worker runs one call at a time in a goroutine it owns, and answers the
// caller itself.
type worker struct {
	handlers *handlerTable
	caller   *actor.PID         // the caller of the running call
	cancel   context.CancelFunc // ends the running call
}

// callDone carries a handler's result back into the worker.
type callDone struct {
	caller   *actor.PID
	res      *messages.ToolResult
	panicked string // the panic value's type, if the handler panicked
}

func (w *worker) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *runCall:
		w.start(ctx, m.e)
	case *cancelRun:
		if w.cancel != nil && m.caller.Equal(w.caller) {
			w.cancel()
		}
	case *callDone:
		w.stop()
		ctx.Send(m.caller, m.res)
		if m.panicked != "" {
			// Let supervision replace this worker.
			panic("tool handler panicked: " + m.panicked)
		}
		ctx.Send(ctx.Parent(), &finished{worker: ctx.Self()})
	case *actor.Stopping:
		// The caller gets an answer now; the handler sees its context
		// end, and its late result goes nowhere.
		if w.caller != nil {
			ctx.Send(w.caller, timeoutResult())
		}
		w.stop()
	case *actor.Restarting:
		w.stop()
	}
}

// start runs e's call on a goroutine; its result comes back as callDone.
func (w *worker) start(ctx actor.Context, e *entry) {
	callCtx, cancel := context.WithCancel(context.Background())
	if !e.call.Deadline.IsZero() {
		callCtx, cancel = context.WithDeadline(context.Background(), e.call.Deadline)
	}
	w.caller, w.cancel = e.replyTo, cancel
	reg, _ := w.handlers.get(e.call.Name)
	self, sys := ctx.Self(), ctx.ActorSystem()
	go func() {
		res, panicked := safeCall(callCtx, reg.handler, e.call)
		sys.Root.Send(self, &callDone{caller: e.replyTo, res: res, panicked: panicked})
	}()
}

func (w *worker) stop() {
	if w.cancel != nil {
		w.cancel()
	}
	w.caller, w.cancel = nil, nil
}

// safeCall runs the handler, turning a panic or a missing result into a
// tool_failed result.
func safeCall(ctx context.Context, h Handler, call *messages.ToolCall) (res *messages.ToolResult, panicked string) {
	defer func() {
		if r := recover(); r != nil {
			res, panicked = messages.ToolFailure(messages.ToolFailed, "the tool failed unexpectedly", false), fmt.Sprintf("%T", r)
		}
	}()
	if h == nil {
		return messages.ToolFailure(messages.ToolUnknownTool, "There is no such tool.", false), ""
	}
	if res = h.Call(ctx, call); res == nil {
		res = messages.ToolFailure(messages.ToolFailed, "the tool failed unexpectedly", false)
	}
	return res, ""
}
