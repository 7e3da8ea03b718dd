package llm

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lisabot/lisa/messages"
	"github.com/lisabot/lisa/testkit/llmfake"
)

func TestCompleteAndClassify(t *testing.T) {
	const key = "sk-CANARY-llm-key-123"
	cases := []struct {
		name      string
		step      llmfake.Step
		want      string
		code      messages.Code
		permanent bool
	}{
		{"text", llmfake.Text("  hello **world**  "), "hello **world**", "", false},
		{"rate limited", llmfake.Error(429, "slow down"), "", messages.CodeLLMUnavailable, false},
		{"server error", llmfake.Error(500, "boom"), "", messages.CodeLLMUnavailable, false},
		{"rejected", llmfake.Error(400, "bad model"), "", messages.CodeLLMRejected, true},
		{"empty choices", llmfake.EmptyChoices(), "", messages.CodeLLMBadResponse, false},
		{"truncated body", llmfake.Truncated(), "", messages.CodeLLMBadResponse, false},
		{"too long", llmfake.Text(strings.Repeat("x", 101)), "", messages.CodeLLMBadResponse, false},
		{"timeout", llmfake.Text("late").After(5 * time.Second), "", messages.CodeLLMTimeout, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := llmfake.Start(t, llmfake.WithAPIKey(key), llmfake.WithModels("m"))
			srv.Enqueue(c.step)
			cl := New(Config{BaseURL: srv.URL(), APIKey: key, Model: "m", MaxOutputTokens: 50, Temperature: ptr(0.5),
				Timeout: 300 * time.Millisecond, MaxResponseCharacters: 100})
			got, err := cl.Complete(context.Background(), "system prompt", "user says hi")
			if c.code == "" {
				if err != nil || got != c.want {
					t.Fatalf("Complete = %q, %v", got, err)
				}
				reqs := srv.Requests()
				if len(reqs) != 1 || !reqs[0].Authorized || reqs[0].Model != "m" || reqs[0].MaxTokens != 50 || reqs[0].LastUser() != "user says hi" {
					t.Fatalf("request on the wire = %+v", reqs)
				}
				return
			}
			var le *messages.Error
			if !errors.As(err, &le) || le.Code != c.code || le.Permanent != c.permanent {
				t.Fatalf("err = %v, want code %s permanent=%v", err, c.code, c.permanent)
			}
			if strings.Contains(err.Error(), key) || strings.Contains(err.Error(), "user says hi") {
				t.Fatalf("error leaks key or prompt: %v", err)
			}
		})
	}
}
