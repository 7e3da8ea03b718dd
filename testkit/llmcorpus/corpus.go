package llmcorpus

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"

	"github.com/lisabot/lisa/devkit/llmscript"
)

// Server families of the corpus.
const (
	Ollama   = "ollama"
	LlamaCpp = "llama.cpp"
	VLLM     = "vllm"
	LMStudio = "lmstudio"
	OpenAI   = "openai"
	Mistral  = "mistral"
	// Failure holds failure shapes any server or proxy may send.
	Failure = "failure"
)

// Fixtures the shapes refer to: the page their tool calls fetch, the
// query they search for, the answer text they give.
const (
	// PageURL is the page fetch_web_page calls ask for; a test's
	// web_search should return it, and its fetch_web_page download it.
	PageURL = "https://docs.example.org/lisa/servers"
	// Query is what web_search calls look for.
	Query = "lisa real llm servers"
	// AnswerText is the markdown of the shapes' answers.
	AnswerText = "Lisa keeps answering when servers misbehave."
	// ModelName is the model the shapes name.
	ModelName = "corpus-model"
)

// Shape is one way a real server answers a chat-completions request: the
// replies it sends to Lisa's first requests, in order, replayed by the
// scripted model (later requests get the test's own well-behaved model).
type Shape struct {
	// Name is "family/what", unique in the corpus.
	Name string
	// Family is the server family (one of the constants).
	Family string
	// Source says where the shape is documented, defined or reported:
	// the server's documentation, its source file, or a public issue.
	Source string
	// Replies are the server's replies, in order.
	Replies []llmscript.Step
}

// All returns every shape of the corpus, family by family.
func All() []Shape {
	var out []Shape
	for _, f := range [][]Shape{ollamaShapes(), llamaCppShapes(), vllmShapes(), lmStudioShapes(), openAIShapes(), mistralShapes(), failureShapes()} {
		out = append(out, f...)
	}
	return out
}

// Families returns the families that have shapes, sorted.
func Families() []string {
	var out []string
	for _, s := range All() {
		if !slices.Contains(out, s.Family) {
			out = append(out, s.Family)
		}
	}
	slices.Sort(out)
	return out
}

// ByName returns the shape called name; it panics on an unknown name (a
// test's typo).
func ByName(name string) Shape {
	for _, s := range All() {
		if s.Name == name {
			return s
		}
	}
	panic("llmcorpus: no shape " + name)
}

// AnswerJSON is Lisa's answer contract as a model writes it.
func AnswerJSON(markdown string, urls ...string) string {
	if urls == nil {
		urls = []string{}
	}
	return mustJSON(map[string]any{"markdown": markdown, "source_urls": urls})
}

// SearchArgs and FetchArgs are the arguments of the shapes' tool calls.
var (
	SearchArgs = mustJSON(map[string]any{"query": Query})
	FetchArgs  = mustJSON(map[string]any{"url": PageURL})
)

// completion renders a chat.completion body with one choice: message is
// the assistant message's fields, extra are more top-level fields.
func completion(id string, message map[string]any, finish string, usage []int, extra map[string]any) string {
	msg := map[string]any{"role": "assistant"}
	for k, v := range message {
		msg[k] = v
	}
	body := map[string]any{
		"id": id, "object": "chat.completion", "created": 1767225600, "model": ModelName,
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
	}
	if len(usage) == 2 {
		body["usage"] = map[string]any{"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": usage[0] + usage[1]}
	}
	for k, v := range extra {
		body[k] = v
	}
	return mustJSON(body)
}

// toolCall renders one entry of a message's tool_calls; a nil id leaves
// the field out, args that are not a string are sent as they are (an
// object, where servers do that).
func toolCall(id any, name string, args any, extra map[string]any) map[string]any {
	tc := map[string]any{"type": "function", "function": map[string]any{"name": name, "arguments": args}}
	if id != nil {
		tc["id"] = id
	}
	for k, v := range extra {
		tc[k] = v
	}
	return tc
}

// ok is a 200 application/json reply with body.
func ok(body string) llmscript.Step { return llmscript.Raw(http.StatusOK, "application/json", body) }

// fail is an error reply with status and body.
func fail(status int, body string) llmscript.Step {
	return llmscript.Raw(status, "application/json", body)
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("llmcorpus: %v", err))
	}
	return string(b)
}

// object parses a JSON object literal (for arguments sent as objects).
func object(s string) map[string]any {
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		panic(fmt.Sprintf("llmcorpus: %v", err))
	}
	return m
}
