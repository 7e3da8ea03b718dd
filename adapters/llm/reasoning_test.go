package llm

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lisabot/lisa/messages"
	"github.com/lisabot/lisa/testkit/llmfake"
)

// TestChatDropsReasoning: a reasoning model's thinking, inline as
// <think>…</think> before the answer or in a DeepSeek-style
// reasoning_content field, never reaches the caller, in the content or in
// an error; reasoning that never closes is no answer.
func TestChatDropsReasoning(t *testing.T) {
	const canary = "CANARY-reasoning-7f3a"
	answer := `{"markdown":"The answer is 4.","source_urls":[]}`
	for _, c := range []struct {
		name string
		step llmfake.Step
		want string
	}{
		{"think block", llmfake.Think("secret reasoning "+canary, "The answer is 4."), answer},
		{"thinking block", llmfake.Text("<thinking>\nsecret " + canary + "\n</thinking>\n" + answer), answer},
		{"reasoning_content", llmfake.Reasoning("secret reasoning "+canary, answer), answer},
		{"both", llmfake.Reasoning(canary, "<think>"+canary+"</think>"+answer), answer},
		{"unclosed think", llmfake.Text("<think>secret " + canary + " " + answer), ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := llmfake.Start(t, llmfake.WithModels("m"))
			srv.Enqueue(c.step)
			cl, _ := chatClient(srv, nil)
			got, err := cl.Chat(context.Background(), simpleRequest())
			if err != nil {
				t.Fatal(err)
			}
			if got.Content != c.want || len(got.ToolCalls) != 0 {
				t.Errorf("response = %+v, want content %q", got, c.want)
			}
			if strings.Contains(fmt.Sprintf("%+v", got), canary) {
				t.Errorf("reasoning reached the caller: %+v", got)
			}
		})
	}
}

// TestCompleteDropsReasoning is TestChatDropsReasoning for Complete, whose
// reply is the text itself: reasoning only is an empty response.
func TestCompleteDropsReasoning(t *testing.T) {
	const canary = "CANARY-reasoning-91c2"
	for _, c := range []struct {
		name string
		step llmfake.Step
		want string
		code messages.Code
	}{
		{"think block", llmfake.Text("<think>" + canary + "</think>\nhello"), "hello", ""},
		{"reasoning_content", llmfake.Reasoning(canary, "hello"), "hello", ""},
		{"only reasoning", llmfake.Text("<think>" + canary), "", messages.CodeLLMBadResponse},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := llmfake.Start(t, llmfake.WithModels("m"))
			srv.Enqueue(c.step)
			cl := New(Config{BaseURL: srv.URL(), Model: "m", MaxOutputTokens: 50, Timeout: 2 * time.Second})
			got, err := cl.Complete(context.Background(), "system", "user")
			if got != c.want || (c.code == "") != (err == nil) || (err != nil && messages.ErrorCode(err) != c.code) {
				t.Errorf("Complete = %q, %v; want %q, code %q", got, err, c.want, c.code)
			}
			if err != nil && strings.Contains(err.Error(), canary) {
				t.Errorf("reasoning in the error: %v", err)
			}
		})
	}
}
