package daemon

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/lisabot/lisa/adapters/metrics"
	"github.com/lisabot/lisa/budget"
	"github.com/lisabot/lisa/config"
	"github.com/lisabot/lisa/messages"
	"github.com/lisabot/lisa/messages/roompb"
	"github.com/lisabot/lisa/persistence"
	"github.com/lisabot/lisa/testkit/llmfake"
)

// TestFailedRequestsSpendTheRoomBudget (issue #39 item 4): 50 questions
// of ~10,000 prompt tokens each against a 1,000-token room budget, every
// request failing after it reached the scripted server (a timeout, a 500,
// a reply cut off), through the LLM client and the budget wrappers as the
// daemon builds them. The first question's request — its attempts, the
// client's retries included — is recorded as estimated prompt tokens;
// the room budget is then spent, the second question gets the budget
// notice and the rest are refused, with no further request sent. Before
// the fix nothing was recorded and every question was sent.
func TestFailedRequestsSpendTheRoomBudget(t *testing.T) {
	const questions, budgetTokens = 50, 1000
	prompt := strings.Repeat("x", 30000) // ~10,000 tokens by the 3-byte estimate
	cases := []struct {
		name     string
		step     llmfake.Step
		attempts int // attempts of one request: the client retries timeouts and 5xx
	}{
		{name: "timeout", step: llmfake.Hang(), attempts: 3},
		{name: "server error", step: llmfake.Error(500, "boom"), attempts: 3},
		{name: "reply cut off", step: llmfake.Truncated(), attempts: 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			srv := llmfake.Start(t, llmfake.WithModels("m"), llmfake.WithDefault(c.step))
			cfg := config.Default()
			cfg.LLM.BaseURL, cfg.LLM.Model, cfg.LLM.RequestTimeoutSeconds = srv.URL(), "m", 1
			cfg.LLM.RoomDailyTokenBudget = budgetTokens
			log := slog.New(slog.DiscardHandler)
			store, err := persistence.OpenBadger(t.TempDir(), persistence.BadgerOptions{Logger: log})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = store.Close() })
			met := metrics.New(metrics.Sources{})
			meter := newMeter(cfg, store, time.Now, met, log)
			client := budget.LLM(llmClient(cfg, "", func(s string) string { return s }, met, log))
			inv := budget.Invoker(askOnce{llm: client, prompt: prompt}, meter, func(*roompb.Candidate) []byte { return []byte("notice") })

			var notices, refused, failed int
			for i := range questions {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				out, err := inv.Invoke(ctx, &roompb.Candidate{RoomId: "!a:x", EventId: "$q" + string(rune('A'+i))}, 1)
				cancel()
				switch code := messages.ErrorCode(err); {
				case err == nil && string(out) == "notice":
					notices++
				case code == messages.CodeRefusedBudget:
					refused++
				case err != nil:
					failed++
				default:
					t.Fatalf("question %d answered %q", i, out)
				}
			}
			rep, err := meter.Report("!a:x", 1)
			if err != nil {
				t.Fatal(err)
			}
			sent := len(srv.Requests())
			t.Logf("%s: %d questions of %d bytes against a %d-token room budget: %d requests sent, %d tokens recorded (%d records, %d estimated); %d failed, %d notices, %d refused",
				c.name, questions, len(prompt), budgetTokens, sent, rep.Deployment.Sum(), rep.Deployment.Requests, rep.Deployment.Estimated, failed, notices, refused)
			perRequest := budget.Estimate(len(messages.RoleUser) + len(prompt))
			if sent != c.attempts || failed != 1 || notices != 1 || refused != questions-2 {
				t.Errorf("%d requests sent, %d failed, %d notices, %d refused; want %d sent, 1 failed, 1 notice, %d refused",
					sent, failed, notices, refused, c.attempts, questions-2)
			}
			if d := rep.Deployment; d.Prompt != int64(c.attempts)*perRequest || d.Completion != 0 || d.Requests != int64(c.attempts) || d.Estimated != d.Requests {
				t.Errorf("recorded %+v, want %d estimated records of %d prompt tokens", d, c.attempts, perRequest)
			}
		})
	}
}

// askOnce asks the model once per attempt with prompt, as the answerer's
// first request does.
type askOnce struct {
	llm    budget.LLMPort
	prompt string
}

func (a askOnce) Invoke(ctx context.Context, _ *roompb.Candidate, _ uint32) ([]byte, error) {
	_, err := a.llm.Chat(ctx, messages.ChatRequest{Messages: []messages.ChatMessage{{Role: messages.RoleUser, Content: a.prompt}}})
	if err != nil {
		return nil, err
	}
	return nil, errors.New("the model answered a failing server")
}
