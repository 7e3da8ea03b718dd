package llm

import (
	"context"
	"testing"

	"github.com/lisabot/lisa/messages"
	"github.com/lisabot/lisa/testkit/llmfake"
)

// TestChatReportsUsage: the token usage the server reports
// (usage.prompt_tokens, usage.completion_tokens) comes back with the
// response; a response without usage reports none.
func TestChatReportsUsage(t *testing.T) {
	for _, c := range []struct {
		name string
		step llmfake.Step
		want messages.TokenUsage
	}{
		{"reported", llmfake.Text("hi").WithUsage(llmfake.Usage{PromptTokens: 1234, CompletionTokens: 56}), messages.TokenUsage{PromptTokens: 1234, CompletionTokens: 56}},
		{"tool calls", llmfake.ToolCalls(llmfake.Call("web_search", map[string]string{"query": "q"})).WithUsage(llmfake.Usage{PromptTokens: 7, CompletionTokens: 3}), messages.TokenUsage{PromptTokens: 7, CompletionTokens: 3}},
		{"none", llmfake.Raw(200, "application/json", `{"id":"x","object":"chat.completion","created":0,"model":"m",`+
			`"choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`), messages.TokenUsage{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := llmfake.Start(t, llmfake.WithModels("m"))
			srv.Enqueue(c.step)
			cl, _ := chatClient(srv, nil)
			got, err := cl.Chat(context.Background(), simpleRequest())
			if err != nil {
				t.Fatal(err)
			}
			if got.Usage != c.want || got.Usage.Reported() != (c.want != messages.TokenUsage{}) {
				t.Errorf("usage = %+v, want %+v", got.Usage, c.want)
			}
		})
	}
}
