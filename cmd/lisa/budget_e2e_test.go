package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/lisabot/lisa/adapters/admin"
	"github.com/lisabot/lisa/chaos"
	"github.com/lisabot/lisa/daemon"
	"github.com/lisabot/lisa/devkit/demo"
	"github.com/lisabot/lisa/testkit/llmfake"
)

const budgetNotice = "My voice is gone for today, ask me tomorrow."

// replyBodies returns, per invoking event, the bodies of Lisa's replies
// in room.
func (e *e2e) replyBodies(room id.RoomID) map[id.EventID][]string {
	e.t.Helper()
	out := map[id.EventID][]string{}
	resp, err := e.human.Messages(e.ctx, room, "", "", mautrix.DirectionBackward, &mautrix.FilterPart{Types: []event.Type{event.EventMessage}}, 200)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, evt := range resp.Chunk {
		if string(evt.Sender) != e.bot.UserID {
			continue
		}
		var c struct {
			Body string `json:"body"`
		}
		_ = json.Unmarshal(evt.Content.VeryRaw, &c)
		out[inReplyTo(evt)] = append(out[inReplyTo(evt)], c.Body)
	}
	return out
}

// usage asks the running Lisa's admin socket for "usage args…".
func (e *e2e) usage(args ...string) daemon.UsageReport {
	e.t.Helper()
	cl, err := admin.Dial(filepath.Join(e.dir, "data", "admin.sock"), 2*time.Second)
	if err != nil {
		e.t.Fatal(err)
	}
	defer cl.Close()
	data, err := cl.Call("usage", args...)
	if err != nil {
		e.t.Fatal(err)
	}
	var rep daemon.UsageReport
	if err := json.Unmarshal(data, &rep); err != nil {
		e.t.Fatalf("usage answer %s: %v", data, err)
	}
	return rep
}

// TestRoomTokenBudget: with a room budget of 300 tokens and a model that
// reports 120 tokens a question, three questions are answered (0, 120,
// 240 < 300), the fourth gets persona.budget_error, the fifth no reply and
// no LLM request; after the day boundary (Lisa's clock moved a day on)
// questions are answered again. The shell's usage shows the day's sums.
func TestRoomTokenBudget(t *testing.T) {
	onEachHomeserver(t, func(t *testing.T, hs string) {
		e := newE2E(t, hs, 1)
		e.llm = llmfake.Start(t, llmfake.WithModels("m"), llmfake.WithDefault(llmfake.Func(func(r llmfake.Request) llmfake.Step {
			return llmfake.Answer("answer: " + demo.InvocationText(r.LastUser())).WithUsage(llmfake.Usage{PromptTokens: 100, CompletionTokens: 20})
		})))
		e.extraConfig = "sender_rate_limit = 0\n" // seven questions from one member
		shift := filepath.Join(e.dir, "clock-shift")
		p := e.start("LISA_LLM__ROOM_DAILY_TOKEN_BUDGET=300", "LISA_PERSONA__BUDGET_ERROR="+budgetNotice, chaos.ClockShiftEnv+"="+shift)
		e.awaitLog(p, "sync baseline recorded")
		room := e.allowed[0]

		want := map[id.EventID]int{}
		for i := range 3 {
			ev := e.mention(room, "question "+string(rune('a'+i)))
			want[ev] = 1
			e.awaitReply(room, ev)
			if got := e.replyBodies(room)[ev]; len(got) != 1 || !strings.Contains(got[0], "answer:") {
				t.Fatalf("question %d: replies %q", i, got)
			}
		}
		if n := len(e.llm.Requests()); n != 3 {
			t.Fatalf("%d LLM requests for 3 questions", n)
		}
		over := e.mention(room, "question d")
		e.awaitReply(room, over)
		if got := e.replyBodies(room)[over]; len(got) != 1 || !strings.Contains(got[0], budgetNotice) {
			t.Fatalf("first question over budget: replies %q, want the budget notice", got)
		}
		refused := e.mention(room, "question e")
		e.awaitLog(p, "question refused: the token budget is spent")
		if n := len(e.llm.Requests()); n != 3 {
			t.Fatalf("%d LLM requests after the budget was spent, want still 3", n)
		}
		// The event's outcome, as the shell's why reads it.
		deadline := time.Now().Add(30 * time.Second)
		for {
			out := e.shell("why "+string(refused)+"\n", "--json")
			if strings.Contains(out, `"refused_budget"`) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("why %s does not say refused_budget: %s", refused, out)
			}
			time.Sleep(100 * time.Millisecond)
		}
		rep := e.usage(string(room))
		if len(rep.Rows) != 1 || rep.Rows[0].Total != 360 || rep.Rows[0].Prompt != 300 || rep.Rows[0].Requests != 3 ||
			rep.Rows[0].Estimated != 0 || rep.Rows[0].Refused != 1 || rep.RoomDailyBudget != 300 || rep.Rows[0].RoomBudgetShare != 1.2 {
			t.Fatalf("usage = %+v", rep)
		}
		// The day boundary: Lisa's clock a day on, no restart.
		if err := os.WriteFile(shift, []byte("24h"), 0o600); err != nil {
			t.Fatal(err)
		}
		next := e.mention(room, "question f")
		e.awaitReply(room, next)
		bodies := e.replyBodies(room)
		if got := bodies[next]; len(got) != 1 || !strings.Contains(got[0], "answer:") {
			t.Fatalf("next day: replies %q", got)
		}
		if got := bodies[refused]; len(got) != 0 {
			t.Fatalf("the refused question got replies %q", got)
		}
		if n := len(e.llm.Requests()); n != 4 {
			t.Fatalf("%d LLM requests, want 4", n)
		}
		rep = e.usage(string(room), "2")
		if len(rep.Rows) != 2 || rep.Rows[0].Total != 120 || rep.Rows[1].Total != 360 || rep.Rows[0].Day == rep.Rows[1].Day {
			t.Fatalf("usage over two days = %+v", rep)
		}
		want[over], want[next], want[e.settle(room)] = 1, 1, 1
		e.expectReplies(room, want)

		// lisa doctor prints today's usage against the budgets.
		var out, errb strings.Builder
		run(e.ctx, []string{"doctor", "--config", filepath.Join(e.dir, "lisa.toml"), "--only", "llm"}, strings.NewReader(""), &out, &errb, lookupFrom(map[string]string{
			"LISA_MATRIX_ACCESS_TOKEN": e.bot.AccessToken, "LISA_LLM__ROOM_DAILY_TOKEN_BUDGET": "300"}))
		if !strings.Contains(out.String(), "per room 300; today (") || !strings.Contains(out.String(), "the busiest room used 240 of its 300") {
			t.Fatalf("doctor does not report today's usage against the budget:\n%s%s", out.String(), errb.String())
		}
	})
}

// TestUsageSurvivesSIGKILL: Lisa is killed while an invocation's second
// LLM request is in flight (the first came back in prose and asked for a
// repair). After the restart the question is answered by a new attempt,
// and the day's usage is exactly the sum of what the scripted model
// reported for the requests whose answers reached Lisa: the first
// request's usage, recorded before the kill, is neither lost nor counted
// twice, and the request cut off by the kill reported nothing.
func TestUsageSurvivesSIGKILL(t *testing.T) {
	onEachHomeserver(t, func(t *testing.T, hs string) {
		e := newE2E(t, hs, 1)
		gate := llmfake.NewGate()
		usageOf := func(seq int) llmfake.Usage { return llmfake.Usage{PromptTokens: 100 + seq, CompletionTokens: 10 + seq} }
		e.llm = llmfake.Start(t, llmfake.WithModels("m"), llmfake.WithDefault(llmfake.Func(func(r llmfake.Request) llmfake.Step {
			switch r.Seq {
			case 0: // prose: Lisa asks for a repair
				return llmfake.Text("Plain words without the JSON wrapper.").WithUsage(usageOf(r.Seq))
			case 1: // the repair request: held until Lisa is dead
				return llmfake.Answer("too late").WithUsage(usageOf(r.Seq)).Until(gate)
			}
			return llmfake.Answer("answer: " + demo.InvocationText(r.LastUser())).WithUsage(usageOf(r.Seq))
		})))
		p := e.start()
		e.awaitLog(p, "sync baseline recorded")
		room := e.allowed[0]
		q := e.mention(room, "a question that will be cut short")
		if err := e.llm.WaitForRequests(e.ctx, 2); err != nil {
			t.Fatal(err)
		}
		if err := e.llm.WaitForInFlight(e.ctx, 1); err != nil {
			t.Fatal(err)
		}
		if n := len(e.llm.Requests()); n != 2 {
			t.Fatalf("%d requests in flight or done, want 2", n)
		}
		p.kill()
		gate.Release()

		e.start()
		e.awaitReply(room, q)
		want := map[id.EventID]int{q: 1, e.settle(room): 1}
		e.expectReplies(room, want)

		var sum int64
		reqs := e.llm.Requests()
		for _, r := range reqs {
			if r.Seq == 1 {
				continue // its answer never reached Lisa
			}
			u := usageOf(r.Seq)
			sum += int64(u.PromptTokens + u.CompletionTokens)
		}
		rep := e.usage(string(room))
		if len(rep.Rows) != 1 || rep.Rows[0].Total != sum || rep.Rows[0].Requests != int64(len(reqs)-1) || rep.TodayTotal != sum {
			t.Fatalf("usage = %+v; want %d tokens over %d requests (model log: %d requests)", rep, sum, len(reqs)-1, len(reqs))
		}
	})
}

// TestUsageEstimatedWithoutServerCounts: a model that reports no usage is
// counted by the byte estimate, and the shell marks those figures.
func TestUsageEstimatedWithoutServerCounts(t *testing.T) {
	onEachHomeserver(t, func(t *testing.T, hs string) {
		e := newE2E(t, hs, 1)
		// An OpenAI chat completion without the usage object (Ollama's OpenAI
		// layer before 0.1.33 and some proxies send none).
		body := `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"{\"markdown\":\"counted by estimate\",\"source_urls\":[]}"},"finish_reason":"stop"}]}`
		e.llm = llmfake.Start(t, llmfake.WithModels("m"), llmfake.WithDefault(llmfake.Raw(200, "application/json", body)))
		p := e.start()
		e.awaitLog(p, "sync baseline recorded")
		room := e.allowed[0]
		q := e.mention(room, "count me")
		e.awaitReply(room, q)
		rep := e.usage()
		if len(rep.Rows) != 1 || rep.Rows[0].Estimated != 1 || rep.Rows[0].Requests != 1 || rep.Rows[0].Prompt < 100 || rep.Rows[0].Completion < 10 || rep.TodayEstimated != 1 {
			t.Fatalf("usage = %+v; want one estimated request", rep)
		}
		out := e.shell("usage\n")
		if !strings.Contains(out, "~"+strconv.FormatInt(rep.Rows[0].Total, 10)) || !strings.Contains(out, "includes estimates") {
			t.Fatalf("shell usage does not mark the estimate:\n%s", out)
		}
		t.Logf("shell:\n%s", out)
	})
}

// TestDeploymentBudgetHealthAndMetrics: with a deployment budget of 200
// tokens and 120 a question, one question in each of two rooms is
// answered; then lisa health is degraded and names the budget, each room
// gets its own notice once, a further question is refused and counted,
// and /metrics shows the tokens and the remaining budget.
func TestDeploymentBudgetHealthAndMetrics(t *testing.T) {
	onEachHomeserver(t, func(t *testing.T, hs string) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		e := newE2E(t, hs, 2)
		e.llm = llmfake.Start(t, llmfake.WithModels("m"), llmfake.WithDefault(llmfake.Func(func(r llmfake.Request) llmfake.Step {
			return llmfake.Answer("answer: " + demo.InvocationText(r.LastUser())).WithUsage(llmfake.Usage{PromptTokens: 100, CompletionTokens: 20})
		})))
		p := e.start("LISA_LLM__DAILY_TOKEN_BUDGET=200", "LISA_PERSONA__BUDGET_ERROR="+budgetNotice, "LISA_RUNTIME__METRICS_LISTEN="+addr)
		e.awaitLog(p, "sync baseline recorded")
		a, b := e.allowed[0], e.allowed[1]
		health := func() (int, string) {
			var out bytes.Buffer
			code := run(context.Background(), []string{"health", "--config", filepath.Join(e.dir, "lisa.toml")}, strings.NewReader(""), &out, &bytes.Buffer{}, lookupFrom(nil))
			return code, out.String()
		}
		qa := e.mention(a, "first in a")
		e.awaitReply(a, qa)
		if code, out := health(); code != 0 {
			t.Fatalf("health with 120 of 200 tokens spent: %d %s", code, out)
		}
		qb := e.mention(b, "first in b")
		e.awaitReply(b, qb)
		if code, out := health(); code != 1 || !strings.Contains(out, "daily token budget") {
			t.Fatalf("health with 240 of 200 tokens spent: %d %s, want degraded naming the budget", code, out)
		}
		na := e.mention(a, "second in a")
		e.awaitReply(a, na)
		e.mention(a, "third in a")
		e.awaitLog(p, "question refused: the token budget is spent")
		nb := e.mention(b, "second in b")
		e.awaitReply(b, nb)
		for ev, room := range map[id.EventID]id.RoomID{na: a, nb: b} {
			if got := e.replyBodies(room)[ev]; len(got) != 1 || !strings.Contains(got[0], budgetNotice) {
				t.Fatalf("room %s: replies %q, want the notice", room, got)
			}
		}
		if n := len(e.llm.Requests()); n != 2 {
			t.Fatalf("%d LLM requests, want 2", n)
		}
		var body string
		deadline := time.Now().Add(20 * time.Second)
		for {
			resp, err := http.Get("http://" + addr + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			body = string(raw)
			if strings.Contains(body, `lisa_invocations_total{outcome="refused_budget"} 1`) || time.Now().After(deadline) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		for _, want := range []string{
			`lisa_llm_tokens_total{kind="prompt"} 200`,
			`lisa_llm_tokens_total{kind="completion"} 40`,
			`lisa_llm_budget_remaining_tokens 0`,
			`lisa_invocations_total{outcome="refused_budget"} 1`,
			`lisa_llm_requests_total{result="ok"} 2`,
		} {
			if !strings.Contains(body, want) {
				t.Errorf("metrics lack %q", want)
			}
		}
	})
}
