package llmfake

import (
	"encoding/json"
	"net/http"
)

// Reasoning replies like a DeepSeek-style reasoning model: a chat
// completion whose assistant message carries reasoning in a
// "reasoning_content" field beside content, finish_reason "stop". The
// reply is fixed (a [Raw] step), so its id and model do not follow the
// request.
func Reasoning(reasoning, content string) Step {
	type message struct {
		Role             string `json:"role"`
		Content          string `json:"content"`
		ReasoningContent string `json:"reasoning_content"`
	}
	type choice struct {
		Index        int     `json:"index"`
		Message      message `json:"message"`
		FinishReason string  `json:"finish_reason"`
	}
	b, err := json.Marshal(struct {
		ID      string   `json:"id"`
		Object  string   `json:"object"`
		Model   string   `json:"model"`
		Choices []choice `json:"choices"`
	}{"chatcmpl-fake-reasoning", "chat.completion", "m", []choice{{
		Message:      message{Role: "assistant", Content: content, ReasoningContent: reasoning},
		FinishReason: "stop",
	}}})
	if err != nil { // unreachable: strings always marshal
		panic(err)
	}
	return Raw(http.StatusOK, "application/json", string(b))
}

// Think replies like a reasoning model that writes its thinking inline:
// the assistant content is "<think>"+reasoning+"</think>" followed by
// Lisa's final-answer JSON for markdown and sourceURLs (see [Answer]).
func Think(reasoning, markdown string, sourceURLs ...string) Step {
	if sourceURLs == nil {
		sourceURLs = []string{}
	}
	b, err := json.Marshal(struct {
		Markdown   string   `json:"markdown"`
		SourceURLs []string `json:"source_urls"`
	}{markdown, sourceURLs})
	if err != nil { // unreachable: strings always marshal
		panic(err)
	}
	return Text("<think>" + reasoning + "</think>" + string(b))
}
