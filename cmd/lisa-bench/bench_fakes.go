package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// latencyFakes are the fake homeserver and the fake LLM that the latency
// phase runs Lisa against, in this process or in a child process of
// their own (see fakesProcess), so that their CPU is not Lisa's.
type latencyFakes interface {
	// target is how Lisa reaches the fake homeserver; llmURL the fake LLM.
	target() benchTarget
	llmURL() string
	// roomIDs are the rooms the fake homeserver holds.
	roomIDs() []string
	// invoke posts mention i in room once Lisa's /sync is parked, waits
	// for her reply and then for her to take the reply through /sync.
	invoke(ctx context.Context, room string, i int) (invokeResult, error)
	// counts are the requests the fake homeserver served, per endpoint.
	counts(ctx context.Context) (map[string]int, error)
	// cpu is the CPU time (user + sys) spent by the fakes' process, and
	// false when they run in this process.
	cpu(ctx context.Context) (time.Duration, bool, error)
	// Close stops the fakes (and their process).
	Close()
}

// invokeResult is what the fakes observed of one invocation; times are
// wall-clock Unix nanoseconds, comparable across processes on one
// machine.
type invokeResult struct {
	// At is when the mention became deliverable, Arrived when the reply
	// PUT reached the fake homeserver.
	At      int64 `json:"at"`
	Arrived int64 `json:"arrived"`
	// ReplyID is the event ID of Lisa's reply.
	ReplyID string `json:"reply_id"`
	// Segments split [At, Arrived] (see segmentNames), in nanoseconds;
	// nil when an instant was missing.
	Segments []int64 `json:"segments,omitempty"`
}

// latency is the bot-added latency of the invocation.
func (r invokeResult) latency() time.Duration { return time.Duration(r.Arrived - r.At) }

// localFakes are the fakes in this process.
type localFakes struct {
	stack  *fakeStack
	waiter *arrivals
	trace  *tracer
}

// startLocalFakes starts the fake homeserver with n rooms named by prefix
// and the bench LLM in this process, tracing every request.
func startLocalFakes(n int, prefix string) (*localFakes, error) {
	waiter := newArrivals(nil)
	trace := &tracer{seen: map[string][]tracePoint{}}
	stack, err := startFakeStack(n, prefix, waiter, trace)
	if err != nil {
		return nil, err
	}
	return &localFakes{stack: stack, waiter: waiter, trace: trace}, nil
}

func (f *localFakes) target() benchTarget { return f.stack.target() }
func (f *localFakes) llmURL() string      { return f.stack.llm.URL() }
func (f *localFakes) roomIDs() []string   { return f.stack.rooms }
func (f *localFakes) Close()              { f.stack.Close() }

func (f *localFakes) counts(context.Context) (map[string]int, error) {
	return f.stack.hs.Counts(), nil
}

func (f *localFakes) cpu(context.Context) (time.Duration, bool, error) { return 0, false, nil }

// invoke runs one invocation against the fakes (see latencyFakes).
func (f *localFakes) invoke(ctx context.Context, room string, i int) (invokeResult, error) {
	var res invokeResult
	hs := f.stack.hs
	if err := hs.WaitParked(ctx); err != nil {
		return res, fmt.Errorf("waiting for Lisa's /sync: %w", err)
	}
	_, _ = f.trace.take(room)
	evID, at, err := hs.Post(room, benchHuman, mention(benchBot, i))
	if err != nil {
		return res, err
	}
	var arrived time.Time
	select {
	case arrived = <-f.waiter.expect(evID):
	case <-ctx.Done():
		return res, fmt.Errorf("no reply to invocation %d: %w", i, ctx.Err())
	}
	res.At, res.Arrived = at.UnixNano(), arrived.UnixNano()
	pts, rounds := f.trace.take(room)
	if parts, ok := segments(at, pts, rounds); ok {
		for _, d := range parts {
			res.Segments = append(res.Segments, int64(d))
		}
	}
	evs := hs.Events(room)
	res.ReplyID = evs[len(evs)-1].ID
	// Lisa asks for the next /sync only after committing the response
	// that carried her reply: parked again means she took it through.
	if err := hs.WaitParked(ctx); err != nil {
		return res, fmt.Errorf("Lisa did not sync her reply: %w", err)
	}
	return res, nil
}

// control is the HTTP API a fakes child process serves to the bench.
func (f *localFakes) control() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /invoke", func(w http.ResponseWriter, r *http.Request) {
		i, _ := strconv.Atoi(r.URL.Query().Get("i"))
		ctx, cancel := context.WithTimeout(r.Context(), time.Minute)
		defer cancel()
		res, err := f.invoke(ctx, r.URL.Query().Get("room"), i)
		writeControl(w, res, err)
	})
	mux.HandleFunc("GET /counts", func(w http.ResponseWriter, _ *http.Request) {
		writeControl(w, f.stack.hs.Counts(), nil)
	})
	mux.HandleFunc("GET /cpu", func(w http.ResponseWriter, _ *http.Request) {
		writeControl(w, int64(processCPU()), nil)
	})
	return mux
}

// writeControl answers a control request with v as JSON, or err as a
// 500 with its text.
func writeControl(w http.ResponseWriter, v any, err error) {
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
