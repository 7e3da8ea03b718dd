package budget

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lisabot/lisa/messages"
	"github.com/lisabot/lisa/messages/roompb"
	"github.com/lisabot/lisa/persistence"
)

// memLedger is an in-memory Ledger.
type memLedger struct {
	mu      sync.Mutex
	recs    map[string]persistence.UsageRecord // by day/room/id
	notices map[string]string
}

func newMemLedger() *memLedger {
	return &memLedger{recs: map[string]persistence.UsageRecord{}, notices: map[string]string{}}
}

func (l *memLedger) RecordUsage(r persistence.UsageRecord) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs[r.Day+"/"+r.Room+"/"+r.ID] = r
	return nil
}

func (l *memLedger) Usage(day string, fn func(persistence.UsageRecord) error) error {
	l.mu.Lock()
	var out []persistence.UsageRecord
	for _, r := range l.recs {
		if r.Day == day {
			out = append(out, r)
		}
	}
	l.mu.Unlock()
	for _, r := range out {
		if err := fn(r); err != nil {
			return err
		}
	}
	return nil
}

func (l *memLedger) BudgetNotice(day, room, ev string) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := day + "/" + room
	if got, ok := l.notices[k]; ok {
		return got == ev, nil
	}
	l.notices[k] = ev
	return true, nil
}

// scriptLLM answers every request with usage, counting requests.
type scriptLLM struct {
	usage    messages.TokenUsage
	requests int
}

func (s *scriptLLM) Chat(context.Context, messages.ChatRequest) (messages.ChatResponse, error) {
	s.requests++
	return messages.ChatResponse{Content: "twelve bytes", Usage: s.usage}, nil
}

// chatInvoker asks the model once per attempt.
type chatInvoker struct{ llm LLMPort }

func (c chatInvoker) Invoke(ctx context.Context, _ *roompb.Candidate, _ uint32) ([]byte, error) {
	if _, err := c.llm.Chat(ctx, messages.ChatRequest{Messages: []messages.ChatMessage{{Role: "user", Content: "123456789"}}}); err != nil {
		return nil, err
	}
	return []byte("answer"), nil
}

func code(err error) messages.Code {
	var le *messages.Error
	if errors.As(err, &le) {
		return le.Code
	}
	return ""
}

func TestRoomBudgetNoticeOnceThenRefusedThenReset(t *testing.T) {
	berlin, _ := time.LoadLocation("Europe/Berlin")
	now := time.Date(2026, 12, 6, 22, 30, 0, 0, time.UTC) // 23:30 in Berlin
	ledger := newMemLedger()
	m := New(Config{Ledger: ledger, Now: func() time.Time { return now }, Location: berlin, RoomDaily: 250})
	model := &scriptLLM{usage: messages.TokenUsage{PromptTokens: 100, CompletionTokens: 20}}
	inv := Invoker(chatInvoker{LLM(model)}, m, func(c *roompb.Candidate) []byte { return []byte("notice " + c.GetEventId()) })
	ask := func(room, ev string) ([]byte, error) {
		return inv.Invoke(context.Background(), &roompb.Candidate{RoomId: room, EventId: ev}, 1)
	}
	for i, ev := range []string{"$1", "$2", "$3"} { // 0, 120, 240 < 250
		if out, err := ask("!a", ev); err != nil || string(out) != "answer" {
			t.Fatalf("question %d: %q, %v", i, out, err)
		}
	}
	if out, err := ask("!a", "$4"); err != nil || string(out) != "notice $4" {
		t.Fatalf("first question over budget: %q, %v; want the notice", out, err)
	}
	if out, err := ask("!a", "$4"); err != nil || string(out) != "notice $4" {
		t.Fatalf("its repeated attempt: %q, %v; want the notice again", out, err)
	}
	if _, err := ask("!a", "$5"); code(err) != messages.CodeRefusedBudget {
		t.Fatalf("second question over budget: %v; want refused_budget", err)
	}
	if out, err := ask("!b", "$6"); err != nil || string(out) != "answer" {
		t.Fatalf("another room: %q, %v", out, err)
	}
	if model.requests != 4 {
		t.Fatalf("model asked %d times, want 4 (none for a refused question)", model.requests)
	}
	rep, err := m.Report("!a", 1)
	if err != nil || rep.Today != "2026-12-06" || len(rep.Rows) != 1 || rep.Rows[0].Sum() != 360 || rep.Rows[0].Refused != 1 || rep.Deployment.Sum() != 480 {
		t.Fatalf("report = %+v, %v", rep, err)
	}
	now = now.Add(31 * time.Minute) // 00:01 in Berlin, still 6 Dec in UTC
	if out, err := ask("!a", "$7"); err != nil || string(out) != "answer" {
		t.Fatalf("after midnight in the persona's zone: %q, %v", out, err)
	}
	rep, _ = m.Report("!a", 2)
	if rep.Today != "2026-12-07" || len(rep.Rows) != 2 || rep.Rows[0].Sum() != 120 || rep.Rows[1].Sum() != 360 {
		t.Fatalf("two days = %+v", rep)
	}
	// A new meter over the same ledger (a restart) counts the same.
	m2 := New(Config{Ledger: ledger, Now: func() time.Time { return now }, Location: berlin, RoomDaily: 250})
	rep2, _ := m2.Report("!a", 2)
	if rep2.Rows[0].Sum() != 120 || rep2.Rows[1].Sum() != 360 {
		t.Fatalf("after a restart = %+v", rep2)
	}
}

func TestDeploymentBudgetAndEstimates(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	var prompt, completion int64
	m := New(Config{Ledger: newMemLedger(), Now: func() time.Time { return now }, Daily: 10,
		OnTokens: func(p, c int64) { prompt += p; completion += c }})
	model := &scriptLLM{} // reports no usage
	inv := Invoker(chatInvoker{LLM(model)}, m, func(*roompb.Candidate) []byte { return []byte("notice") })
	if out, err := inv.Invoke(context.Background(), &roompb.Candidate{RoomId: "!a", EventId: "$1"}, 1); err != nil || string(out) != "answer" {
		t.Fatalf("%q, %v", out, err)
	}
	// "user" + "123456789" = 13 bytes → 5 tokens; "twelve bytes" → 4.
	rep, _ := m.Report("", 1)
	if rep.Deployment.Prompt != 5 || rep.Deployment.Completion != 4 || rep.Deployment.Estimated != 1 || prompt != 5 || completion != 4 {
		t.Fatalf("estimate = %+v (metrics %d/%d)", rep.Deployment, prompt, completion)
	}
	if _, err := inv.Invoke(context.Background(), &roompb.Candidate{RoomId: "!a", EventId: "$2"}, 1); err != nil {
		t.Fatal(err)
	}
	rep, _ = m.Report("", 1)
	if !rep.Exhausted() || rep.Remaining() != 0 {
		t.Fatalf("18 of 10 tokens: exhausted %v, remaining %d", rep.Exhausted(), rep.Remaining())
	}
	// Each room gets its own notice of the deployment budget.
	for _, room := range []string{"!a", "!b"} {
		if out, err := inv.Invoke(context.Background(), &roompb.Candidate{RoomId: room, EventId: "$3" + room}, 1); err != nil || string(out) != "notice" {
			t.Fatalf("room %s: %q, %v", room, out, err)
		}
	}
	if model.requests != 2 {
		t.Fatalf("model asked %d times, want 2", model.requests)
	}
}

func TestOutsideAScopeNothingIsCounted(t *testing.T) {
	model := &scriptLLM{usage: messages.TokenUsage{PromptTokens: 1}}
	if _, err := LLM(model).Chat(context.Background(), messages.ChatRequest{}); err != nil || model.requests != 1 {
		t.Fatalf("requests %d, %v", model.requests, err)
	}
}

// TestRecordOnANewDayCountsOnce: the first record of a day, made before
// any check of that day, is counted once in the totals the checks use.
func TestRecordOnANewDayCountsOnce(t *testing.T) {
	now := time.Date(2026, 12, 6, 23, 59, 0, 0, time.UTC)
	m := New(Config{Ledger: newMemLedger(), Now: func() time.Time { return now }, RoomDaily: 200})
	m.Record(context.Background(), "!a", "$1", 1, 100, 0, false)
	now = now.Add(2 * time.Minute)
	m.Record(context.Background(), "!a", "$2", 1, 150, 0, false)
	if err := m.Check(context.Background(), "!a", "$3"); err != nil {
		t.Fatalf("150 of 200 today: %v", err)
	}
	m.Record(context.Background(), "!a", "$3", 1, 50, 0, false)
	if err := m.Check(context.Background(), "!a", "$4"); code(err) != messages.CodeBudgetExhausted {
		t.Fatalf("200 of 200 today: %v, want the notice", err)
	}
}

// failingLLM fails every request with an LLM failure that says how many
// attempts reached the server, counting requests.
type failingLLM struct {
	sent     int
	requests int
}

func (f *failingLLM) Chat(context.Context, messages.ChatRequest) (messages.ChatResponse, error) {
	f.requests++
	return messages.ChatResponse{}, &messages.Error{Code: messages.CodeLLMTimeout, Message: "LLM request timed out",
		Err: &messages.LLMFailure{Cause: messages.CauseTimeout, Sent: f.sent}}
}

// TestAFailedRequestThatReachedTheServerCounts (issue #39 item 4): each
// attempt that reached the server and failed is recorded as the request's
// prompt estimated from bytes, marked estimated; one that reached nothing
// records nothing; a reply after retried attempts records them too.
func TestAFailedRequestThatReachedTheServerCounts(t *testing.T) {
	// "user" + "123456789" = 13 bytes → 5 tokens.
	cases := []struct {
		name             string
		next             LLMPort
		prompt, requests int64
	}{
		{name: "reached nothing", next: &failingLLM{sent: 0}},
		{name: "one attempt reached the server", next: &failingLLM{sent: 1}, prompt: 5, requests: 1},
		{name: "three attempts did", next: &failingLLM{sent: 3}, prompt: 15, requests: 3},
		{name: "a reply after two that did", next: unansweredLLM{}, prompt: 5*2 + 5, requests: 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
			ledger := newMemLedger()
			m := New(Config{Ledger: ledger, Now: func() time.Time { return now }, RoomDaily: 1000})
			inv := Invoker(chatInvoker{LLM(c.next)}, m, func(*roompb.Candidate) []byte { return []byte("notice") })
			_, _ = inv.Invoke(context.Background(), &roompb.Candidate{RoomId: "!a", EventId: "$1"}, 2)
			rep, err := m.Report("!a", 1)
			if err != nil {
				t.Fatal(err)
			}
			estimated := c.requests
			if _, ok := c.next.(unansweredLLM); ok {
				estimated = 2
			}
			if d := rep.Deployment; d.Prompt != c.prompt || d.Requests != c.requests || d.Estimated != estimated {
				t.Fatalf("totals = %+v, want prompt %d in %d requests, %d estimated", d, c.prompt, c.requests, estimated)
			}
			for _, r := range ledger.recs {
				if r.Event != "$1" || r.Attempt != 2 {
					t.Errorf("record %+v not of the attempt", r)
				}
			}
		})
	}
}

// unansweredLLM replies with reported usage after two attempts that
// reached the server and failed.
type unansweredLLM struct{}

func (unansweredLLM) Chat(context.Context, messages.ChatRequest) (messages.ChatResponse, error) {
	return messages.ChatResponse{Content: "ok", Usage: messages.TokenUsage{PromptTokens: 5, CompletionTokens: 2}, Unanswered: 2}, nil
}

// TestFailingRequestsSpendTheBudget: a request of ~10,000 prompt tokens
// that times out after reaching the server spends a 1,000-token room
// budget; the next question gets the notice without a request.
func TestFailingRequestsSpendTheBudget(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	m := New(Config{Ledger: newMemLedger(), Now: func() time.Time { return now }, RoomDaily: 1000})
	model := &failingLLM{sent: 1}
	big := bigInvoker{llm: LLM(model), prompt: strings.Repeat("x", 30000)}
	inv := Invoker(big, m, func(*roompb.Candidate) []byte { return []byte("notice") })
	if _, err := inv.Invoke(context.Background(), &roompb.Candidate{RoomId: "!a", EventId: "$1"}, 1); code(err) != messages.CodeLLMTimeout {
		t.Fatalf("first question: %v", err)
	}
	if out, err := inv.Invoke(context.Background(), &roompb.Candidate{RoomId: "!a", EventId: "$2"}, 1); err != nil || string(out) != "notice" {
		t.Fatalf("second question: %q, %v; want the notice", out, err)
	}
	if model.requests != 1 {
		t.Fatalf("%d requests, want 1", model.requests)
	}
}

// bigInvoker asks the model once per attempt with prompt.
type bigInvoker struct {
	llm    LLMPort
	prompt string
}

func (b bigInvoker) Invoke(ctx context.Context, _ *roompb.Candidate, _ uint32) ([]byte, error) {
	if _, err := b.llm.Chat(ctx, messages.ChatRequest{Messages: []messages.ChatMessage{{Role: "user", Content: b.prompt}}}); err != nil {
		return nil, err
	}
	return []byte("answer"), nil
}
