package invocation

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/lisabot/lisa/actors/tools"
	"github.com/lisabot/lisa/messages"
	"github.com/lisabot/lisa/messages/roompb"
)

// waitFor bounds every wait of these tests: a condition that does not
// come within it fails the test.
const waitFor = 10 * time.Second

// gate is a tool whose calls block until the test releases them, by
// query, or until their context ends. It reports each start and each
// end, counts the calls running at once, and the calls cancelled.
type gate struct {
	spec     messages.ToolSpec
	started  chan string // the query of each call, as it starts
	finished chan string // the query of each call, as it returns
	mu       sync.Mutex
	release  map[string]chan messages.ToolResult
	ran      []string
	running  atomic.Int32
	most     atomic.Int32 // the most calls running at once
	canceled atomic.Int32
}

func newGate(name string) *gate {
	return &gate{spec: messages.ToolSpec{Name: name, Description: "Test tool " + name + ".", Parameters: json.RawMessage(querySchema)},
		started: make(chan string, 16), finished: make(chan string, 16), release: map[string]chan messages.ToolResult{}}
}

func (g *gate) Spec() messages.ToolSpec { return g.spec }

func (g *gate) ch(q string) chan messages.ToolResult {
	g.mu.Lock()
	defer g.mu.Unlock()
	c, ok := g.release[q]
	if !ok {
		c = make(chan messages.ToolResult, 1)
		g.release[q] = c
	}
	return c
}

func (g *gate) Call(ctx context.Context, args json.RawMessage) messages.ToolResult {
	var a struct{ Query string }
	_ = json.Unmarshal(args, &a)
	g.mu.Lock()
	g.ran = append(g.ran, a.Query)
	g.mu.Unlock()
	n := g.running.Add(1)
	for m := g.most.Load(); n > m && !g.most.CompareAndSwap(m, n); m = g.most.Load() {
	}
	defer func() { g.finished <- a.Query }()
	defer g.running.Add(-1)
	g.started <- a.Query
	select {
	case res := <-g.ch(a.Query):
		return res
	case <-ctx.Done():
		g.canceled.Add(1)
		return *messages.ToolFailure(messages.ToolTimeout, "cancelled", false)
	}
}

// open lets the call for query q return res.
func (g *gate) open(q string, res messages.ToolResult) { g.ch(q) <- res }

// calls lists the queries of the calls that ran, in start order.
func (g *gate) calls() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.ran)
}

// await reads n queries from c, failing the test after waitFor.
func await(t *testing.T, c chan string, n int, what string) []string {
	t.Helper()
	var got []string
	timeout := time.After(waitFor)
	for len(got) < n {
		select {
		case q := <-c:
			got = append(got, q)
		case <-timeout:
			t.Fatalf("%s: %d of %d within %v (%v)", what, len(got), n, waitFor, got)
		}
	}
	return got
}

func page(q string) messages.ToolResult {
	return messages.ToolResult{OK: true, Content: "page " + q, SourceURLs: []string{"https://" + q + ".example/"}}
}

// runAsync runs Run in a goroutine; the result comes on the channel.
type runResult struct {
	ans messages.Answer
	err error
}

func runAsync(ctx context.Context, llm LLM, ts []Tool, lim Limits) chan runResult {
	done := make(chan runResult, 1)
	go func() {
		ans, err := Run(ctx, llm, ts, Prompt{Persona: "Be brief."}, lim)
		done <- runResult{ans, err}
	}()
	return done
}

func awaitRun(t *testing.T, done chan runResult) runResult {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(waitFor):
		t.Fatalf("Run did not return within %v", waitFor)
	}
	return runResult{}
}

// toolContents returns the call ID and content (or failure code) of each
// tool message of req, in order.
func toolContents(t *testing.T, req messages.ChatRequest) []string {
	t.Helper()
	var out []string
	for _, m := range toolMessages(req) {
		p := decodeTool(t, m)
		switch {
		case p.OK && p.Content != nil:
			out = append(out, m.ToolCallID+"="+*p.Content)
		default:
			out = append(out, m.ToolCallID+"!"+p.Code)
		}
	}
	return out
}

func threeFetches() step {
	return calls(call("c1", "fetch", `{"query":"a"}`), call("c2", "fetch", `{"query":"b"}`), call("c3", "fetch", `{"query":"c"}`))
}

// TestToolCallsRunSideBySide: the three calls of a turn all start
// before any ends, and their results go back in the calls' order
// although they finish in the reverse order.
func TestToolCallsRunSideBySide(t *testing.T) {
	g := newGate("fetch")
	llm := newFakeLLM(threeFetches(), final("Done", "https://a.example/", "https://b.example/", "https://c.example/"))
	done := runAsync(context.Background(), llm, []Tool{g}, Limits{})
	started := await(t, g.started, 3, "calls started before any was released")
	slices.Sort(started)
	if !slices.Equal(started, []string{"a", "b", "c"}) {
		t.Fatalf("started %v", started)
	}
	for _, q := range []string{"c", "b", "a"} { // the last call finishes first
		g.open(q, page(q))
		if got := await(t, g.finished, 1, "call "+q+" finished"); got[0] != q {
			t.Fatalf("finished %v, want %s", got, q)
		}
	}
	r := awaitRun(t, done)
	if r.err != nil || r.ans.Markdown != "Done" || len(r.ans.SourceURLs) != 3 {
		t.Fatalf("Run = %+v, %v", r.ans, r.err)
	}
	want := []string{"c1=page a", "c2=page b", "c3=page c"}
	if got := toolContents(t, llm.requests()[1]); !slices.Equal(got, want) {
		t.Errorf("tool messages = %v, want %v", got, want)
	}
	if g.most.Load() != 3 {
		t.Errorf("at most %d calls ran at once, want 3", g.most.Load())
	}
}

// TestToolCallsBoundedByMaxParallel: no more than
// MaxParallelToolCalls calls run at once; 1 runs them one after
// another, in the calls' order.
func TestToolCallsBoundedByMaxParallel(t *testing.T) {
	for _, limit := range []int{1, 2} {
		g := newGate("fetch")
		llm := newFakeLLM(threeFetches(), final("Done", "https://a.example/"))
		done := runAsync(context.Background(), llm, []Tool{g}, Limits{MaxParallelToolCalls: limit})
		var order []string
		for range 3 {
			// Release the calls one by one, each as soon as it started.
			q := await(t, g.started, 1, "next call started")[0]
			order = append(order, q)
			g.open(q, page(q))
		}
		r := awaitRun(t, done)
		if r.err != nil || r.ans.Markdown != "Done" {
			t.Fatalf("limit %d: Run = %+v, %v", limit, r.ans, r.err)
		}
		if got := g.most.Load(); got > int32(limit) {
			t.Errorf("limit %d: %d calls ran at once", limit, got)
		}
		if limit == 1 && !slices.Equal(order, []string{"a", "b", "c"}) {
			t.Errorf("sequential calls ran in order %v", order)
		}
		want := []string{"c1=page a", "c2=page b", "c3=page c"}
		if got := toolContents(t, llm.requests()[1]); !slices.Equal(got, want) {
			t.Errorf("limit %d: tool messages = %v", limit, got)
		}
	}
}

// TestToolCallFailureSparesSiblings: one call fails while the other two
// still run; they are not cancelled, and the model gets all three
// results, the two pages used in the answer.
func TestToolCallFailureSparesSiblings(t *testing.T) {
	g := newGate("fetch")
	llm := newFakeLLM(threeFetches(), final("Two of three", "https://a.example/", "https://c.example/"))
	done := runAsync(context.Background(), llm, []Tool{g}, Limits{})
	await(t, g.started, 3, "calls started")
	g.open("b", messages.ToolResult{Code: string(messages.ToolHTTPError), Content: "HTTP 500"})
	await(t, g.finished, 1, "failing call finished")
	g.open("a", page("a"))
	g.open("c", page("c"))
	r := awaitRun(t, done)
	if r.err != nil || !slices.Equal(r.ans.SourceURLs, []string{"https://a.example/", "https://c.example/"}) {
		t.Fatalf("Run = %+v, %v", r.ans, r.err)
	}
	want := []string{"c1=page a", "c2!" + string(messages.ToolHTTPError), "c3=page c"}
	if got := toolContents(t, llm.requests()[1]); !slices.Equal(got, want) {
		t.Errorf("tool messages = %v, want %v", got, want)
	}
	if n := g.canceled.Load(); n != 0 {
		t.Errorf("%d sibling calls cancelled by one failure", n)
	}
}

// TestToolCallsCancelledWhenInvocationEnds: when the invocation is
// cancelled, every running call sees its context end, and Run returns
// only once none runs any more; calls still waiting for a slot never
// start.
func TestToolCallsCancelledWhenInvocationEnds(t *testing.T) {
	g := newGate("fetch")
	llm := newFakeLLM(
		calls(call("c1", "fetch", `{"query":"a"}`), call("c2", "fetch", `{"query":"b"}`), call("c3", "fetch", `{"query":"c"}`), call("c4", "fetch", `{"query":"d"}`)),
		final("never asked"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := runAsync(ctx, llm, []Tool{g}, Limits{MaxParallelToolCalls: 3})
	await(t, g.started, 3, "calls started")
	cancel()
	r := awaitRun(t, done)
	if !errors.Is(r.err, context.Canceled) {
		t.Fatalf("Run error = %v, want context.Canceled", r.err)
	}
	// Run has returned: every call that started has ended, cancelled.
	if n, c := g.running.Load(), g.canceled.Load(); n != 0 || c != 3 {
		t.Errorf("after Run: %d calls running, %d cancelled; want 0 and 3", n, c)
	}
	if got := g.calls(); len(got) != 3 {
		t.Errorf("calls that ran = %v: the fourth waited for a slot and must not start", got)
	}
	if n := len(llm.requests()); n != 1 {
		t.Errorf("%d LLM requests, want 1", n)
	}
}

// TestCancelledToolCallsFreeTheirWorkers: the calls of a turn run in
// the real tool pool side by side; when the invocation ends, every
// worker is free again (the pool's status back to idle) and the pool
// serves the next invocation.
func TestCancelledToolCallsFreeTheirWorkers(t *testing.T) {
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	pid := sys.Root.Spawn(tools.Props(4, slog.New(slog.DiscardHandler)))
	t.Cleanup(func() { _ = sys.Root.StopFuture(pid).Wait() })
	pool := tools.NewClient(sys.Root, pid)
	var blocked atomic.Bool
	blocked.Store(true)
	started := make(chan string, 8)
	pool.Register("web_search", poolHandler(func(ctx context.Context, call *messages.ToolCall) *messages.ToolResult {
		started <- string(call.Args)
		if blocked.Load() {
			<-ctx.Done()
			return messages.ToolFailure(messages.ToolTimeout, "cancelled", false)
		}
		return &messages.ToolResult{OK: true, Content: "hits"}
	}), 0)
	sessions := &fakeSessions{specs: []messages.ToolSpec{searchSpec}}
	three := calls(call("c1", "web_search", `{"query":"a"}`), call("c2", "web_search", `{"query":"b"}`), call("c3", "web_search", `{"query":"c"}`))
	a := NewAnswerer(AnswererConfig{Context: fixedContext{}, LLM: newFakeLLM(three, final("never")), Render: textRenderer{},
		Sessions: sessions, Tools: pool})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := a.Invoke(ctx, candidate, 1)
		errc <- err
	}()
	await(t, started, 3, "calls running in the pool")
	waitPool(t, pool, func(st *tools.Status) bool { return st.Busy == 3 })
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Invoke error = %v", err)
		}
	case <-time.After(waitFor):
		t.Fatal("Invoke did not return")
	}
	waitPool(t, pool, func(st *tools.Status) bool { return st.Busy == 0 && st.Queued == 0 && st.Completed == 3 })

	blocked.Store(false)
	a = NewAnswerer(AnswererConfig{Context: fixedContext{}, LLM: newFakeLLM(three, final("Found")), Render: textRenderer{},
		Sessions: sessions, Tools: pool})
	if content, err := a.Invoke(context.Background(), candidate, 1); err != nil || !strings.HasSuffix(string(content), "Found") {
		t.Fatalf("next invocation = %q, %v", content, err)
	}
	waitPool(t, pool, func(st *tools.Status) bool { return st.Busy == 0 && st.Completed == 6 })
}

// poolHandler adapts a function to tools.Handler.
type poolHandler func(ctx context.Context, call *messages.ToolCall) *messages.ToolResult

func (f poolHandler) Call(ctx context.Context, call *messages.ToolCall) *messages.ToolResult {
	return f(ctx, call)
}

// waitPool waits until the pool's status meets cond.
func waitPool(t *testing.T, c *tools.Client, cond func(*tools.Status) bool) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		st, err := c.Status(time.Second)
		if err == nil && cond(st) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pool status %+v, %v: never reached the expected state", st, err)
		}
		time.Sleep(time.Millisecond) // polling the pool's status, not synchronising
	}
}

// TestSameCallSharedOnce: the same tool with the same arguments (in any
// spacing and key order) runs once per invocation — also when two calls
// ask for it at once — and the later call gets the same result, logged
// as shared; a failure that may pass when tried again is not kept.
func TestSameCallSharedOnce(t *testing.T) {
	g := newGate("fetch")
	llm := newFakeLLM(
		calls(call("c1", "fetch", `{"query":"a"}`), call("c2", "fetch", `{ "query" : "a" }`), call("c3", "fetch", `{"query":"z"}`)),
		calls(call("c4", "fetch", `{"query":"a"}`), call("c5", "fetch", `{"query":"z"}`)),
		final("Done", "https://a.example/"))
	var buf strings.Builder
	c := &child{cfg: Config{Logger: slog.New(slog.NewJSONHandler(&buf, nil)), Invoker: InvokerFunc(func(ctx context.Context, _ *roompb.Candidate, _ uint32) ([]byte, error) {
		ans, err := Run(ctx, llm, []Tool{g}, Prompt{}, Limits{})
		return []byte(ans.Markdown), err
	})}, cand: candidate, attempt: 1}
	done := make(chan *messages.InvocationResult, 1)
	go func() { done <- c.run(context.Background()) }()

	// First turn: "a" twice at once and "z"; "a" runs once.
	first := await(t, g.started, 2, "first turn's calls started")
	slices.Sort(first)
	if !slices.Equal(first, []string{"a", "z"}) {
		t.Fatalf("first turn started %v, want a and z once each", first)
	}
	g.open("a", page("a"))
	g.open("z", messages.ToolResult{Code: string(messages.ToolHTTPError), Content: "busy", Retryable: true})
	// Second turn: "a" again is shared; "z" failed retryably, so it runs again.
	if got := await(t, g.started, 1, "second turn's call started"); got[0] != "z" {
		t.Fatalf("second turn started %v, want z", got)
	}
	g.open("z", page("z"))
	var res *messages.InvocationResult
	select {
	case res = <-done:
	case <-time.After(waitFor):
		t.Fatal("invocation did not finish")
	}
	if res.Err != nil || string(res.Content) != "Done" {
		t.Fatalf("result = %q, %v", res.Content, res.Err)
	}
	if got := g.calls(); len(got) != 3 {
		t.Errorf("calls that ran = %v, want a, z, z", got)
	}
	reqs := llm.requests()
	if got, want := toolContents(t, reqs[1]), []string{"c1=page a", "c2=page a", "c3!" + string(messages.ToolHTTPError)}; !slices.Equal(got, want) {
		t.Errorf("first turn's tool messages = %v, want %v", got, want)
	}
	if got, want := toolContents(t, reqs[2])[3:], []string{"c4=page a", "c5=page z"}; !slices.Equal(got, want) {
		t.Errorf("second turn's tool messages = %v, want %v", got, want)
	}
	shared := 0
	var final map[string]any
	for _, r := range logLines(t, buf.String()) {
		switch r["msg"] {
		case "tool call shared the result of an identical call":
			if r["tool"] != "fetch" || r["shared"] != true {
				t.Errorf("shared record = %v", r)
			}
			shared++
		case "invocation attempt finished":
			final = r
		}
	}
	if shared != 2 {
		t.Errorf("%d calls logged as shared, want 2", shared)
	}
	if final == nil || final["tool_calls"] != 5.0 || final["tool_calls_shared"] != 2.0 {
		t.Errorf("final line = %v: every call counts, two of them shared", final)
	}
}

// TestTypingCoversParallelCalls: Lisa shows as typing while the calls of
// a turn run side by side, and stops only after the invocation ends.
func TestTypingCoversParallelCalls(t *testing.T) {
	g := newGate("fetch")
	llm := newFakeLLM(threeFetches(), final("Done", "https://a.example/"))
	typer := &recTyper{}
	inv := WithTyping(InvokerFunc(func(ctx context.Context, _ *roompb.Candidate, _ uint32) ([]byte, error) {
		ans, err := Run(ctx, llm, []Tool{g}, Prompt{}, Limits{})
		return []byte(ans.Markdown), err
	}), typer, TypingLease{Timeout: time.Minute, Refresh: time.Minute, ClearTimeout: time.Second}, slog.New(slog.DiscardHandler))
	done := make(chan error, 1)
	go func() {
		_, err := inv.Invoke(context.Background(), candidate, 1)
		done <- err
	}()
	await(t, g.started, 3, "calls started")
	if got := typer.snapshot(); slices.Contains(got, false) {
		t.Errorf("typing while three calls run = %v: cleared too early", got)
	}
	for _, q := range []string{"a", "b", "c"} {
		g.open(q, page(q))
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(waitFor):
		t.Fatal("invocation did not finish")
	}
	if got := typer.snapshot(); len(got) < 2 || !got[0] || got[len(got)-1] || slices.Index(got, false) != len(got)-1 {
		t.Errorf("typing over the invocation = %v, want on first and cleared only at the end", got)
	}
}

// TestCallAfterEarlierRunsAgain: a call that failed on state an earlier
// call of its turn changes (a fetch of a URL the search beside it makes
// known) runs once more after the others, so the turn has the outcome
// one call after another would have had; a call before the one that
// changes the state keeps its failure; and such a failure is never
// shared with a later turn.
func TestCallAfterEarlierRunsAgain(t *testing.T) {
	var learned atomic.Bool
	fetched := make(chan struct{}, 8)
	search := newTool("search", func(json.RawMessage) messages.ToolResult {
		<-fetched // the fetch beside it has failed by now
		learned.Store(true)
		return messages.ToolResult{OK: true, Content: "hits", SourceURLs: []string{"https://a.example/"}}
	})
	fetch := newTool("fetch", func(json.RawMessage) messages.ToolResult {
		if !learned.Load() {
			defer func() { fetched <- struct{}{} }()
			return messages.ToolResult{Code: "unknown_url", Content: "not known", AfterEarlier: true}
		}
		return messages.ToolResult{OK: true, Content: "page", SourceURLs: []string{"https://a.example/"}}
	})
	llm := newFakeLLM(
		calls(call("c1", "search", `{"query":"q"}`), call("c2", "fetch", `{"query":"https://a.example/"}`)),
		final("Done", "https://a.example/"))
	if _, err := Run(context.Background(), llm, asTools([]*fakeTool{search, fetch}), Prompt{}, Limits{}); err != nil {
		t.Fatal(err)
	}
	if got, want := toolContents(t, llm.requests()[1]), []string{"c1=hits", "c2=page"}; !slices.Equal(got, want) {
		t.Errorf("tool messages = %v, want %v", got, want)
	}
	if n := len(fetch.calls()); n != 2 {
		t.Errorf("fetch ran %d times, want 2 (once more after the search)", n)
	}

	// The fetch first: one after another it would fail too, and does;
	// the same fetch in the next turn runs again instead of sharing it.
	learned.Store(false)
	fetch.args, search.args = nil, nil
	llm = newFakeLLM(
		calls(call("c1", "fetch", `{"query":"https://a.example/"}`), call("c2", "search", `{"query":"q"}`)),
		calls(call("c3", "fetch", `{"query":"https://a.example/"}`)),
		final("Done", "https://a.example/"))
	if _, err := Run(context.Background(), llm, asTools([]*fakeTool{search, fetch}), Prompt{}, Limits{}); err != nil {
		t.Fatal(err)
	}
	reqs := llm.requests()
	if got, want := toolContents(t, reqs[1]), []string{"c1!unknown_url", "c2=hits"}; !slices.Equal(got, want) {
		t.Errorf("first turn = %v, want %v", got, want)
	}
	if got := toolContents(t, reqs[2]); len(got) != 3 || got[2] != "c3=page" {
		t.Errorf("second turn = %v: the fetch must run again, not share the failure", got)
	}
}
