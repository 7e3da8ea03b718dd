package invocation

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/lisabot/lisa/messages"
)

// TestRunStripsReasoning: reasoning a model writes before its answer
// (<think>…</think>, <thinking>…</thinking>) is removed before the answer
// is parsed and is never sent back to the model; reasoning that never
// closes is no answer, which gets the one repair request and then, still
// without an answer, the persona's generic error.
func TestRunStripsReasoning(t *testing.T) {
	const canary = "CANARY-think-5d1e"
	think := "<think>secret reasoning " + canary + "</think>\n"
	withCalls := func(content string, cs ...messages.ModelToolCall) step {
		return func(messages.ChatRequest) (messages.ChatResponse, error) {
			return messages.ChatResponse{Content: content, ToolCalls: cs}, nil
		}
	}
	for _, c := range []struct {
		name  string
		steps []step
		tools []Tool
		want  messages.Answer
		reqs  int
	}{
		{"think before the answer",
			[]step{text(think + `{"markdown":"Four.","source_urls":[]}`)}, nil,
			messages.Answer{Markdown: "Four."}, 1},
		{"thinking before a fenced answer",
			[]step{text("<thinking>" + canary + "</thinking>```json\n{\"markdown\":\"Four.\"}\n```")}, nil,
			messages.Answer{Markdown: "Four."}, 1},
		{"opening tag in the chat template",
			[]step{text(canary + "</think>\n" + `{"markdown":"Four.","source_urls":[]}`)}, nil,
			messages.Answer{Markdown: "Four."}, 1},
		{"unclosed think is no answer, repaired",
			[]step{text("<think>" + canary + ` {"markdown":"leak"}`), final("Four.")}, nil,
			messages.Answer{Markdown: "Four."}, 2},
		{"unclosed think twice: generic error",
			[]step{text("<think>" + canary), text("<think>" + canary)}, nil,
			messages.Answer{Fallback: messages.FallbackGeneric}, 2},
		{"think beside tool calls is not sent back",
			[]step{withCalls(think, call("s", "web_search", `{"query":"q"}`)), final("Four.")}, []Tool{okTool("web_search", "result")},
			messages.Answer{Markdown: "Four."}, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			llm := newFakeLLM(c.steps...)
			got, err := Run(context.Background(), llm, c.tools, Prompt{}, Limits{})
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", c.want) {
				t.Errorf("answer = %+v, want %+v", got, c.want)
			}
			reqs := llm.requests()
			if len(reqs) != c.reqs {
				t.Errorf("%d requests, want %d", len(reqs), c.reqs)
			}
			for i, r := range reqs {
				for _, m := range r.Messages {
					if strings.Contains(m.Content, canary) || strings.Contains(m.Content, "<think") {
						t.Errorf("request %d sends reasoning back: %+v", i, m)
					}
				}
			}
		})
	}
}

func TestParseFinalReasoning(t *testing.T) {
	fr := parseFinal("<think>x</think>\n"+`{"markdown":"a","source_urls":["https://a.example/"]}`, "stop", 100)
	if fr.markdown != "a" || len(fr.urls) != 1 || fr.problem != "" {
		t.Errorf("parseFinal = %+v", fr)
	}
	if fr := parseFinal("<think>never closed", "stop", 100); fr.problem != "the reply was empty" || fr.prose != "" {
		t.Errorf("unclosed reasoning: %+v", fr)
	}
}

// TestParseFinalSpecialTokens: special tokens a server left in the text
// are not part of the answer, the prose, or a reason to think there is
// one.
func TestParseFinalSpecialTokens(t *testing.T) {
	for _, c := range []struct {
		in, markdown, prose, problem string
	}{
		{`{"markdown":"a<|im_end|>","source_urls":[]}<|endoftext|>`, "a", "", ""},
		{"water and<|endoftext|> light<|im_end|>", "", "water and light", "the reply was not a single JSON object"},
		{"<|im_end|>\n<|endoftext|>", "", "", "the reply was empty"},
	} {
		fr := parseFinal(c.in, "stop", 100)
		if fr.markdown != c.markdown || fr.prose != c.prose || fr.problem != c.problem {
			t.Errorf("parseFinal(%q) = %+v", c.in, fr)
		}
	}
}
