package tools

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/lisabot/lisa/messages"
)

// DefaultCallTimeout bounds the wait for a call that has no deadline.
const DefaultCallTimeout = 5 * time.Minute

// callGrace is how long past a call's deadline the client still waits
// for the pool's answer (which is then a timeout result at the latest).
const callGrace = time.Second

// Client calls a pool from ordinary goroutines, never from inside an
// actor's Receive. It is safe for concurrent use.
type Client struct {
	root *actor.RootContext
	pool *actor.PID

	mu      sync.Mutex
	pending []*install // registrations not yet sent to the pool
}

// NewClient returns a client for the pool at pid. The pool need not be
// running yet.
func NewClient(root *actor.RootContext, pid *actor.PID) *Client {
	return &Client{root: root, pool: pid}
}

// Register makes h the handler of the tool name, with at most
// maxConcurrent calls of it running at once (0: up to the worker count).
// Registrations reach the pool ahead of this client's next call, so a
// client can be set up before the pool is spawned; the pool keeps them
// across its restarts. Registering a name again replaces its handler.
func (c *Client) Register(name string, h Handler, maxConcurrent int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pending = append(c.pending, &install{name: name, reg: registration{handler: h, limit: max(maxConcurrent, 0)}})
}

// flush sends pending registrations. The lock is held while sending, so
// no call of this client can overtake them.
func (c *Client) flush() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range c.pending {
		c.root.Send(c.pool, m)
	}
	c.pending = nil
}

// Call sends call to the pool and waits for its result or for ctx to end.
// The earlier of ctx's deadline and call.Deadline travels with the call
// and bounds it in the worker. Tool failures, a full queue ("busy") and a
// handler panic ("tool_failed") are results; an error means ctx ended (a
// queued call then leaves the queue, a running one sees its context end)
// or the pool did not answer.
func (c *Client) Call(ctx context.Context, call *messages.ToolCall) (*messages.ToolResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	msg := *call // the pool keeps the message; the caller keeps call
	if d, ok := ctx.Deadline(); ok && (msg.Deadline.IsZero() || d.Before(msg.Deadline)) {
		msg.Deadline = d
	}
	timeout := DefaultCallTimeout
	if !msg.Deadline.IsZero() {
		timeout = max(time.Until(msg.Deadline), 0) + callGrace
	}
	c.flush()
	f := c.root.RequestFuture(c.pool, &msg, timeout)
	type outcome struct {
		res any
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := f.Result()
		done <- outcome{res, err}
	}()
	select {
	case o := <-done:
		if o.err != nil {
			return nil, o.err
		}
		res, ok := o.res.(*messages.ToolResult)
		if !ok {
			return nil, fmt.Errorf("tools: unexpected reply %T", o.res)
		}
		return res, nil
	case <-ctx.Done():
		c.root.Send(c.pool, &cancelCall{caller: f.PID()})
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
