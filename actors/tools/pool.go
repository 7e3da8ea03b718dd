package tools

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// Work is one tool call. It must honour ctx.
type Work func(ctx context.Context) any

// Panicked is the result of a call whose work panicked.
type Panicked struct{ Value string }

type job struct {
	ctx  context.Context
	work Work
	done chan any // buffered(1): receives exactly one result
}

// Status is the pool's state for the debug shell and tests.
type Status struct {
	Workers, Busy, Queued int
	// MaxQueued is the longest the queue has been.
	MaxQueued int
	// Completed counts finished calls; Replaced counts workers replaced
	// after a panic.
	Completed, Replaced int
}

// StatusRequest asks the pool for its Status.
type StatusRequest struct{}

// Props returns the pool's props: workers workers named w1..wN.
func Props(workers int, log *slog.Logger, opts ...actor.PropsOption) *actor.Props {
	if workers < 1 {
		workers = 1
	}
	return actor.PropsFromProducer(func() actor.Actor {
		return &pool{n: workers, log: log, busy: map[string]*job{}, workerOpts: opts}
	}, opts...)
}

type pool struct {
	n          int
	workerOpts []actor.PropsOption // the pool's own options (mailbox tracking, panic logging)
	self       *actor.PID
	log        *slog.Logger
	workers    []*actor.PID
	idle       []*actor.PID
	busy       map[string]*job // worker ID -> its job
	queue      []*job
	st         Status
}

type (
	cancelJob struct{ j *job }
	finished  struct{ worker *actor.PID }
	runJob    struct{ j *job }
	poisonous struct{ value string }
)

func (p *pool) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *repump:
		p.pump(ctx)
	case *actor.Started:
		p.self = ctx.Self()
		for i := 1; i <= p.n; i++ {
			pid, err := ctx.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return &worker{} }, p.workerOpts...), fmt.Sprintf("w%d", i))
			if err != nil {
				panic(fmt.Errorf("tools: spawn worker: %w", err))
			}
			p.workers = append(p.workers, pid)
			p.idle = append(p.idle, pid)
		}
	case *job:
		p.queue = append(p.queue, m)
		p.st.MaxQueued = max(p.st.MaxQueued, len(p.queue))
		p.pump(ctx)
	case *cancelJob:
		// The caller gave up: drop the job if it still waits, so the
		// queue length stays an honest measure of back-pressure.
		for i, q := range p.queue {
			if q == m.j {
				p.queue = append(p.queue[:i:i], p.queue[i+1:]...)
				m.j.done <- context.Canceled
				break
			}
		}
	case *finished:
		delete(p.busy, m.worker.Id)
		p.st.Completed++
		p.idle = append(p.idle, m.worker)
		p.pump(ctx)
	case *StatusRequest:
		st := p.st
		st.Workers, st.Busy, st.Queued = len(p.workers), len(p.busy), len(p.queue)
		ctx.Respond(&st)
	}
}

// pump hands queued jobs to idle workers, dropping jobs whose caller gave
// up while they waited.
func (p *pool) pump(ctx actor.Context) {
	for len(p.queue) > 0 && len(p.idle) > 0 {
		j := p.queue[0]
		p.queue = p.queue[1:]
		if err := j.ctx.Err(); err != nil {
			j.done <- err
			continue
		}
		w := p.idle[len(p.idle)-1]
		p.idle = p.idle[:len(p.idle)-1]
		p.busy[w.Id] = j
		ctx.Send(w, &runJob{j: j})
	}
}

// HandleFailure replaces a worker that failed (its work panicked: the
// caller already has an error result) and puts it back to work.
func (p *pool) HandleFailure(sys *actor.ActorSystem, sup actor.Supervisor, child *actor.PID, _ *actor.RestartStatistics, reason, _ any) {
	p.log.Warn("tool worker failed; replacing it", "worker", child.Id, "reason", fmt.Sprint(reason))
	sys.EventStream.Publish(&actor.SupervisorEvent{Child: child, Reason: reason, Directive: actor.RestartDirective})
	p.st.Replaced++
	sup.RestartChildren(child)
	if _, ok := p.busy[child.Id]; ok {
		delete(p.busy, child.Id)
		p.st.Completed++
		p.idle = append(p.idle, child)
	}
	// HandleFailure has no actor context: pump on the next message.
	sys.Root.Send(p.self, &repump{})
}

type repump struct{}

type worker struct{}

func (w *worker) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *runJob:
		self, parent, sys := ctx.Self(), ctx.Parent(), ctx.ActorSystem()
		go func() {
			var res any
			panicked := ""
			func() {
				defer func() {
					if r := recover(); r != nil {
						panicked = fmt.Sprintf("%T", r)
						res = &Panicked{Value: panicked}
					}
				}()
				res = m.j.work(m.j.ctx)
			}()
			m.j.done <- res
			if panicked != "" {
				// Let supervision replace this worker.
				sys.Root.Send(self, &poisonous{value: panicked})
				return
			}
			sys.Root.Send(parent, &finished{worker: self})
		}()
	case *poisonous:
		panic("tool work panicked: " + m.value)
	}
}

// Client submits work to a pool from ordinary goroutines.
type Client struct {
	root *actor.RootContext
	pool *actor.PID
}

// NewClient returns a client for the pool at pid.
func NewClient(root *actor.RootContext, pid *actor.PID) *Client {
	return &Client{root: root, pool: pid}
}

// Run queues work and waits for its result or for ctx to end. It must not
// be called from inside an actor's Receive.
func (c *Client) Run(ctx context.Context, work func(ctx context.Context) any) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	j := &job{ctx: ctx, work: work, done: make(chan any, 1)}
	c.root.Send(c.pool, j)
	select {
	case res := <-j.done:
		if err, ok := res.(error); ok && (err == context.Canceled || err == context.DeadlineExceeded) {
			return nil, err
		}
		return res, nil
	case <-ctx.Done():
		c.root.Send(c.pool, &cancelJob{j: j})
		return nil, ctx.Err()
	}
}

// Status asks the pool for its state.
func (c *Client) Status(timeout time.Duration) (*Status, error) {
	res, err := c.root.RequestFuture(c.pool, &StatusRequest{}, timeout).Result()
	if err != nil {
		return nil, err
	}
	st, ok := res.(*Status)
	if !ok {
		return nil, fmt.Errorf("tools: unexpected status reply %T", res)
	}
	return st, nil
}
