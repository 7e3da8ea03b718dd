package invocation

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/lisabot/lisa/actors/tools"
	"github.com/lisabot/lisa/messages"
	"github.com/lisabot/lisa/messages/roompb"
)

// fixedContext returns one block, or an error.
type fixedContext struct {
	block string
	err   error
}

func (f fixedContext) Build(context.Context, *roompb.Candidate) (string, error) {
	return f.block, f.err
}

// textRenderer renders a reply as plain text; markdown "UNRENDERABLE"
// fails.
type textRenderer struct{}

func (textRenderer) Render(r messages.Reply) (messages.Rendered, error) {
	if r.Markdown == "UNRENDERABLE" {
		return messages.Rendered{}, errors.New("nothing to show")
	}
	var b strings.Builder
	b.WriteString(string(r.InReplyTo.EventID) + " " + string(r.InReplyTo.Sender) + ": " + r.Markdown)
	for _, s := range r.Sources {
		b.WriteString(" [" + s.Title + " " + s.URL + "]")
	}
	return messages.Rendered{Content: []byte(b.String())}, nil
}

// fakeSessions records the sessions opened and closed.
type fakeSessions struct {
	mu      sync.Mutex
	specs   []messages.ToolSpec
	openErr error
	opened  [][]string
	open    map[string]bool
	closed  []string
}

func (f *fakeSessions) Specs() []messages.ToolSpec { return f.specs }

func (f *fakeSessions) Open(known ...string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.openErr != nil {
		return "", f.openErr
	}
	id := "ses_" + string(rune('a'+len(f.opened)))
	f.opened = append(f.opened, known)
	if f.open == nil {
		f.open = map[string]bool{}
	}
	f.open[id] = true
	return id, nil
}

func (f *fakeSessions) Close(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.open, id)
	f.closed = append(f.closed, id)
}

// fakeRunner answers every call with fn and records it.
type fakeRunner struct {
	mu    sync.Mutex
	calls []messages.ToolCall
	fn    func(call *messages.ToolCall) (*messages.ToolResult, error)
}

func (f *fakeRunner) Call(_ context.Context, call *messages.ToolCall) (*messages.ToolResult, error) {
	f.mu.Lock()
	f.calls = append(f.calls, *call)
	f.mu.Unlock()
	return f.fn(call)
}

var searchSpec = messages.ToolSpec{Name: "web_search", Description: "Search.", Parameters: json.RawMessage(querySchema)}

var candidate = &roompb.Candidate{RoomId: "!r:hs", EventId: "$e", Sender: "@u:hs", Body: "@lisa see https://a.example/x"}

// TestAnswererSessionTools: each invocation opens its own session with
// the conversation's texts, its tool calls reach the runner as typed
// calls naming that session and carrying the deadline, and the session
// is closed at the end.
func TestAnswererSessionTools(t *testing.T) {
	sessions := &fakeSessions{specs: []messages.ToolSpec{searchSpec}}
	runner := &fakeRunner{fn: func(call *messages.ToolCall) (*messages.ToolResult, error) {
		return &messages.ToolResult{OK: true, Code: "ok", Content: "hits for " + call.Session, SourceURLs: []string{"https://a.example/x"},
			SourceTitles: map[string]string{"https://a.example/x": "A"}}, nil
	}}
	llm := newFakeLLM(calls(call("c1", "web_search", `{"query":"q"}`)), final("Found it", "https://a.example/x"))
	a := NewAnswerer(AnswererConfig{Context: fixedContext{block: "<room_context/>"}, LLM: llm, Render: textRenderer{},
		Sessions: sessions, Tools: runner, Persona: "kind"})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	deadline, _ := ctx.Deadline()
	content, err := a.Invoke(ctx, candidate, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(content); got != "$e @u:hs: Found it [A https://a.example/x]" {
		t.Fatalf("reply = %q", got)
	}
	if len(sessions.opened) != 1 || !slices.Equal(sessions.opened[0], []string{candidate.Body, "<room_context/>"}) {
		t.Fatalf("sessions opened with %q", sessions.opened)
	}
	if !slices.Equal(sessions.closed, []string{"ses_a"}) || len(sessions.open) != 0 {
		t.Fatalf("sessions closed %q, still open %v", sessions.closed, sessions.open)
	}
	if len(runner.calls) != 1 {
		t.Fatalf("runner calls = %+v", runner.calls)
	}
	if c := runner.calls[0]; c.Name != "web_search" || string(c.Args) != `{"query":"q"}` || c.Session != "ses_a" || !c.Deadline.Equal(deadline) {
		t.Fatalf("tool call = %+v", c)
	}
	reqs := llm.requests()
	if len(reqs[0].Tools) != 1 || reqs[0].Tools[0].Name != "web_search" {
		t.Fatalf("tools offered = %+v", reqs[0].Tools)
	}
	if p := decodeTool(t, toolMessages(reqs[1])[0]); !p.OK || *p.Content != "hits for ses_a" {
		t.Fatalf("tool payload = %+v", p)
	}
}

// TestAnswererToolFailuresAreResults: a runner that returns no result
// (the pool refused, or the caller's time ran out) or a nil result becomes
// a bounded tool error the model sees; the invocation goes on.
func TestAnswererToolFailuresAreResults(t *testing.T) {
	for _, c := range []struct {
		name string
		res  *messages.ToolResult
		err  error
		code string
	}{
		{"deadline", nil, context.DeadlineExceeded, string(messages.ToolTimeout)},
		{"no result", nil, nil, string(messages.ToolFailed)},
		{"busy", messages.ToolFailure(messages.ToolBusy, "busy", true), nil, string(messages.ToolBusy)},
	} {
		t.Run(c.name, func(t *testing.T) {
			sessions := &fakeSessions{specs: []messages.ToolSpec{searchSpec}}
			runner := &fakeRunner{fn: func(*messages.ToolCall) (*messages.ToolResult, error) { return c.res, c.err }}
			llm := newFakeLLM(calls(call("c1", "web_search", `{"query":"q"}`)), final("Could not search."))
			a := NewAnswerer(AnswererConfig{Context: fixedContext{block: "ctx"}, LLM: llm, Render: textRenderer{}, Sessions: sessions, Tools: runner})
			content, err := a.Invoke(context.Background(), candidate, 1)
			if err != nil || !strings.HasSuffix(string(content), "Could not search.") {
				t.Fatalf("reply = %q, %v", content, err)
			}
			p := decodeTool(t, toolMessages(llm.requests()[1])[0])
			if p.OK || p.Code != c.code || p.Retryable == nil {
				t.Fatalf("tool payload = %+v, want code %s", p, c.code)
			}
			if len(sessions.closed) != 1 {
				t.Fatal("session not closed")
			}
		})
	}
}

// TestAnswererFailures: context, session and LLM failures are returned
// for the invocation layer to retry; a session opened is always closed;
// fallbacks and unrenderable answers become the persona's texts.
func TestAnswererFailures(t *testing.T) {
	boom := &messages.Error{Code: messages.CodeLLMUnavailable, Message: "down"}
	t.Run("context", func(t *testing.T) {
		llm := newFakeLLM()
		a := NewAnswerer(AnswererConfig{Context: fixedContext{err: boom}, LLM: llm, Render: textRenderer{}})
		if _, err := a.Invoke(context.Background(), candidate, 1); !errors.Is(err, boom) || len(llm.requests()) != 0 {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("no session", func(t *testing.T) {
		llm := newFakeLLM()
		a := NewAnswerer(AnswererConfig{Context: fixedContext{}, LLM: llm, Render: textRenderer{},
			Sessions: &fakeSessions{openErr: errors.New("full")}, Tools: &fakeRunner{}})
		_, err := a.Invoke(context.Background(), candidate, 1)
		if messages.ErrorCode(err) != messages.CodeInternal || len(llm.requests()) != 0 {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("llm", func(t *testing.T) {
		sessions := &fakeSessions{specs: []messages.ToolSpec{searchSpec}}
		a := NewAnswerer(AnswererConfig{Context: fixedContext{}, LLM: newFakeLLM(fail(boom)), Render: textRenderer{},
			Sessions: sessions, Tools: &fakeRunner{}})
		if _, err := a.Invoke(context.Background(), candidate, 1); !errors.Is(err, boom) {
			t.Fatalf("err = %v", err)
		}
		if len(sessions.closed) != 1 || len(sessions.open) != 0 {
			t.Fatal("session not closed after an LLM failure")
		}
	})
	for _, c := range []struct {
		name  string
		steps []step
		lim   Limits
		want  string
	}{
		// No answer at all, even after the repair: the persona's error.
		{"generic", []step{text(""), text(`{"markdown": "cut off`)}, Limits{}, "$e @u:hs: GENERIC"},
		// Prose, even after the repair, is the answer (issue #30).
		{"prose twice is the answer", []step{text("prose"), text("more prose")}, Limits{}, "$e @u:hs: more prose"},
		{"overload", []step{calls(call("1", "nope", "{}"))}, Limits{MaxIterations: 1}, "$e @u:hs: OVERLOAD"},
		{"unrenderable", []step{final("UNRENDERABLE")}, Limits{}, "$e @u:hs: GENERIC"},
		{"fallback drops sources", []step{calls(call("1", "web_search", `{"query":"q"}`)), text(""), text("")}, Limits{}, "$e @u:hs: GENERIC"},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := NewAnswerer(AnswererConfig{Context: fixedContext{}, LLM: newFakeLLM(c.steps...), Render: textRenderer{}, Limits: c.lim,
				Sessions: &fakeSessions{specs: []messages.ToolSpec{searchSpec}},
				Tools: &fakeRunner{fn: func(*messages.ToolCall) (*messages.ToolResult, error) {
					return &messages.ToolResult{OK: true, Content: "c", SourceURLs: []string{"https://a.example/"}}, nil
				}},
				GenericError: "GENERIC", OverloadError: "OVERLOAD"})
			content, err := a.Invoke(context.Background(), candidate, 1)
			if err != nil || string(content) != c.want {
				t.Fatalf("reply = %q, %v; want %q", content, err, c.want)
			}
		})
	}
	t.Run("persona error unrenderable", func(t *testing.T) {
		a := NewAnswerer(AnswererConfig{Context: fixedContext{}, LLM: newFakeLLM(final("UNRENDERABLE")), Render: textRenderer{}, GenericError: "UNRENDERABLE"})
		_, err := a.Invoke(context.Background(), candidate, 1)
		var le *messages.Error
		if !errors.As(err, &le) || !le.Permanent || le.Code != messages.CodeInternal {
			t.Fatalf("err = %v", err)
		}
	})
}

// panicky is a tool handler that panics on every call.
type panicky struct{}

func (panicky) Call(context.Context, *messages.ToolCall) *messages.ToolResult { panic("tool bug") }

// TestAnswererSurvivesPanickingTool: a tool handler that panics in the
// tool pool gives the model a tool_failed result; the invocation answers
// and the pool keeps working with a replaced worker.
func TestAnswererSurvivesPanickingTool(t *testing.T) {
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	pid := sys.Root.Spawn(tools.Props(1, slog.New(slog.DiscardHandler)))
	t.Cleanup(func() { _ = sys.Root.StopFuture(pid).Wait() })
	pool := tools.NewClient(sys.Root, pid)
	pool.Register("web_search", panicky{}, 0)

	for i := range 2 {
		llm := newFakeLLM(calls(call("c1", "web_search", `{"query":"q"}`)), final("Search is broken."))
		a := NewAnswerer(AnswererConfig{Context: fixedContext{}, LLM: llm, Render: textRenderer{},
			Sessions: &fakeSessions{specs: []messages.ToolSpec{searchSpec}}, Tools: pool})
		content, err := a.Invoke(context.Background(), candidate, 1)
		if err != nil || !strings.HasSuffix(string(content), "Search is broken.") {
			t.Fatalf("invocation %d: reply = %q, %v", i, content, err)
		}
		p := decodeTool(t, toolMessages(llm.requests()[1])[0])
		if p.OK || p.Code != CodeToolFailed || p.Retryable == nil || *p.Retryable {
			t.Fatalf("invocation %d: tool payload = %+v", i, p)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := pool.Status(time.Second)
		if err == nil && st.Replaced == 2 && st.Busy == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pool status %+v, %v: want two replaced workers", st, err)
		}
		time.Sleep(time.Millisecond)
	}
}

// recordingRenderer records the replies it renders.
type recordingRenderer struct {
	mu      sync.Mutex
	replies []messages.Reply
}

func (r *recordingRenderer) Render(reply messages.Reply) (messages.Rendered, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.replies = append(r.replies, reply)
	if reply.Markdown == "UNRENDERABLE" {
		return messages.Rendered{}, errors.New("nothing to show")
	}
	return messages.Rendered{Content: []byte(reply.Markdown), LinksUnverified: strings.Count(reply.Markdown, "](")}, nil
}

// TestAnswererRepliesInThread: the reply to a candidate in a thread names
// the thread root, for the answer and for the persona's error alike; a
// main-timeline candidate names none.
func TestAnswererRepliesInThread(t *testing.T) {
	inThread := &roompb.Candidate{RoomId: "!r:hs", EventId: "$e", Sender: "@u:hs", Body: "@lisa hi", ThreadRootEventId: "$root"}
	for _, c := range []struct {
		name string
		cand *roompb.Candidate
		step step
		want messages.EventID
	}{
		{"answer in thread", inThread, final("Hello."), "$root"},
		{"persona error in thread", inThread, final("UNRENDERABLE"), "$root"},
		{"main timeline", candidate, final("Hello."), ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			rend := &recordingRenderer{}
			a := NewAnswerer(AnswererConfig{Context: fixedContext{}, LLM: newFakeLLM(c.step), Render: rend, GenericError: "GENERIC"})
			if _, err := a.Invoke(context.Background(), c.cand, 1); err != nil {
				t.Fatal(err)
			}
			last := rend.replies[len(rend.replies)-1]
			for _, r := range rend.replies {
				if r.InReplyTo.ThreadRoot != c.want || r.InReplyTo.EventID != "$e" {
					t.Errorf("reply %+v: thread root %q, want %q", r, r.InReplyTo.ThreadRoot, c.want)
				}
			}
			if last.Markdown == "UNRENDERABLE" {
				t.Fatalf("last reply = %+v", last)
			}
		})
	}
}

// knowingSessions are fakeSessions that know the URLs of their sessions.
type knowingSessions struct {
	*fakeSessions
	known []string
}

func (k knowingSessions) KnownURLs(string) []string { return k.known }

// TestAnswererChecksLinks (issue #32 item 1): the model's answer is
// rendered with its links checked against the URLs of the invocation —
// the session's known URLs (the invoking message, the room context, the
// tools' results) and the tool results' URLs — even when the model takes
// no tools; the persona's texts are not checked; the attempt's line
// counts links_unverified.
func TestAnswererChecksLinks(t *testing.T) {
	search := newTool("web_search", func(json.RawMessage) messages.ToolResult {
		return messages.ToolResult{OK: true, Content: "hits", SourceURLs: []string{"https://found.example/a"}}
	})
	base, runner := poolOf(search)
	sessions := knowingSessions{fakeSessions: base, known: []string{"https://asked.example/q"}}
	for _, c := range []struct {
		name      string
		steps     []step
		tools     bool
		check     bool
		known     []string
		unchecked int
	}{
		{"answer after research", []step{calls(call("1", "web_search", `{"query":"q"}`)), final("See [a](https://invented.example).", "https://found.example/a")},
			true, true, []string{"https://found.example/a", "https://asked.example/q"}, 1},
		{"answer without tools", []step{final("See [it](https://asked.example/q).")}, false, true, []string{"https://asked.example/q"}, 1},
		{"persona error", []step{text(""), text("")}, true, false, nil, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			rend := &recordingRenderer{}
			cfg := AnswererConfig{Context: fixedContext{block: "ctx"}, LLM: newFakeLLM(c.steps...), Render: rend, GenericError: "GENERIC", Sessions: sessions}
			if c.tools {
				cfg.Tools = runner
			}
			res, out := runAttempt(t, NewAnswerer(cfg), candidate)
			if res.Err != nil || len(rend.replies) != 1 {
				t.Fatalf("result %v, replies %+v", res.Err, rend.replies)
			}
			r := rend.replies[0]
			if r.CheckLinks != c.check || !slices.Equal(r.KnownURLs, c.known) {
				t.Fatalf("reply checks links %v against %q; want %v against %q", r.CheckLinks, r.KnownURLs, c.check, c.known)
			}
			var final map[string]any
			for _, l := range logLines(t, out) {
				if l["msg"] == "invocation attempt finished" {
					final = l
				}
			}
			got, logged := final[codeLinksUnverified]
			if logged != c.check || (c.check && got != float64(c.unchecked)) {
				t.Fatalf("attempt line %v: links_unverified %v (logged %v), want %d", final, got, logged, c.unchecked)
			}
		})
	}
}
