package messages

import "testing"

func TestStripReasoning(t *testing.T) {
	answer := `{"markdown":"hi","source_urls":[]}`
	for _, c := range []struct{ name, in, want string }{
		{"no reasoning", answer, answer},
		{"plain text unchanged", "  just text  ", "  just text  "},
		{"think block", "<think>secret CANARY</think>" + answer, answer},
		{"thinking block with white space", "\n <thinking>\nsecret CANARY\n</thinking>\n\n" + answer, answer},
		{"tag case", "<THINK>secret CANARY</Think>" + answer, answer},
		{"several blocks", "<think>a CANARY</think> <thinking>b CANARY</thinking>" + answer, answer},
		{"inner tag of the other name", "<think>x </thinking> CANARY</think>" + answer, answer},
		{"unclosed: no answer", "<think>secret CANARY " + answer, ""},
		{"unclosed after a block", "<think>a</think><thinking>CANARY", ""},
		{"opening tag in the prompt", "secret CANARY\n</think>\n\n" + answer, answer},
		{"opening tag in the prompt, thinking", "secret CANARY</thinking>" + answer, answer},
		{"tag inside the answer kept", `{"markdown":"use </think> here"}`, `{"markdown":"use </think> here"}`},
		{"fenced answer with tag kept", "```json\n{\"markdown\":\"</think>\"}\n```", "```json\n{\"markdown\":\"</think>\"}\n```"},
		{"tag after the answer kept", answer + "<think>x</think>", answer + "<think>x</think>"},
		{"empty", "", ""},
		{"only reasoning", "<think>CANARY</think>", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := StripReasoning(c.in); got != c.want {
				t.Errorf("StripReasoning(%q) = %q, want %q", c.in, got, c.want)
			}
		})
	}
}

func TestStripSpecialTokens(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"none", "plain <b>text</b> | with bars |", "plain <b>text</b> | with bars |"},
		{"ChatML end", "hello world<|im_end|>", "hello world"},
		{"several, inside", "<|im_start|>assistant\nhi<|endoftext|> there<|eot_id|>", "assistant\nhi there"},
		{"DeepSeek full-width", "answer<｜end▁of▁sentence｜>", "answer"},
		{"in a JSON answer", `{"markdown":"ok<|im_end|>","source_urls":[]}`, `{"markdown":"ok","source_urls":[]}`},
		{"not a token: spaces", "a <| not a token |> b", "a <| not a token |> b"},
		{"not a token: empty", "a <||> b", "a <||> b"},
		{"unclosed", "text <|im_end", "text <|im_end"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := StripSpecialTokens(c.in); got != c.want {
				t.Errorf("StripSpecialTokens(%q) = %q, want %q", c.in, got, c.want)
			}
		})
	}
}
