package invocation

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"

	"github.com/lisabot/lisa/messages"
)

// outcome is what became of one tool call of a turn.
type outcome struct {
	res messages.ToolResult
	// ran: the call ran, or shared the result of an identical call; a
	// call that never started because the invocation ended did neither.
	ran bool
	// shared: the result is that of an identical call of this
	// invocation (same tool, same arguments), which did the work.
	shared bool
}

// flight is one call of an invocation by tool and arguments: its result
// once done is closed. Later identical calls, of the same turn or of a
// later one, wait for it and share its result instead of doing the
// work again.
type flight struct {
	done chan struct{}
	res  messages.ToolResult
	ran  bool
}

// execute runs the calls of one turn side by side, at most
// Limits.MaxParallelToolCalls at once (each still under the tool pool's
// limits), and returns their outcomes in the calls' order whatever the
// order in which they finish. Every call has its own context, derived
// from ctx and so under the invocation's deadline; one call's failure
// (a result) never cancels another. execute returns only when no call
// is running any more: when ctx ends, the calls still running are
// cancelled (their pool workers see their context end and are free
// again) and the calls still waiting never start.
//
// A call with the same tool and arguments as an earlier call of the
// invocation — at the same time or before — does no work: it shares
// the earlier call's result. A failure that may succeed when tried
// again (retryable, or a timeout) is not kept for later turns.
func (r *run) execute(ctx context.Context, calls []messages.ModelToolCall) []outcome {
	if r.flights == nil {
		r.flights = map[string]*flight{}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	out := make([]outcome, len(calls))
	own := make([]*flight, len(calls)) // the flight each call waits for
	slots := make(chan struct{}, max(r.lim.MaxParallelToolCalls, 1))
	var wg sync.WaitGroup
	for i, c := range calls {
		key, keyed := r.callKey(c)
		if f, ok := r.flights[key]; keyed && ok {
			own[i] = f
			out[i].shared = true
			continue
		}
		f := &flight{done: make(chan struct{})}
		own[i] = f
		if keyed {
			r.flights[key] = f
		}
		// Calls take their slots in the calls' order: with one slot they
		// run one after another, as the model listed them.
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			close(f.done) // never started: the invocation ended first
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			defer close(f.done)
			f.res, f.ran = r.reg.call(ctx, c), true
		}()
	}
	wg.Wait()
	r.again(ctx, calls, own)
	for i, f := range own {
		<-f.done // closed: every flight of this turn ended above, earlier ones before
		out[i].res, out[i].ran = f.res, f.ran
		out[i].shared = out[i].shared && f.ran
	}
	for key, f := range r.flights {
		if !f.ran || (!f.res.OK && (f.res.Retryable || f.res.AfterEarlier || f.res.Code == string(messages.ToolTimeout))) {
			delete(r.flights, key)
		}
	}
	return out
}

// again gives the calls of a turn the outcome they would have had one
// after another: a call that failed on state the calls before it may
// change (ToolResult.AfterEarlier: a URL an earlier search makes known)
// runs once more, in order, when a call before it succeeded.
func (r *run) again(ctx context.Context, calls []messages.ModelToolCall, own []*flight) {
	earlierOK := false
	for i, f := range own {
		if i > 0 && own[i-1].ran && own[i-1].res.OK {
			earlierOK = true
		}
		if ctx.Err() != nil {
			return
		}
		if f.ran && !f.res.OK && f.res.AfterEarlier && earlierOK && !slices.Contains(own[:i], f) {
			f.res = r.reg.call(ctx, calls[i])
		}
	}
}

// callKey identifies a call by its tool and its arguments, whatever
// their spacing and key order; ok is false for a call that names no
// offered tool or whose arguments are not one JSON object (it fails at
// once, nothing to share).
func (r *run) callKey(c messages.ModelToolCall) (string, bool) {
	if _, known := r.reg.tools[c.Name]; !known {
		return "", false
	}
	raw := strings.TrimSpace(c.Arguments)
	if raw == "" {
		raw = "{}" // as checkArguments reads it
	}
	var args map[string]any
	if err := json.Unmarshal([]byte(raw), &args); err != nil || args == nil {
		return "", false
	}
	canon, err := json.Marshal(args) // map keys come out sorted
	if err != nil {
		return "", false
	}
	return c.Name + "\x00" + string(canon), true
}
