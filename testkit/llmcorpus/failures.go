package llmcorpus

import (
	"net/http"
	"strings"

	"github.com/lisabot/lisa/devkit/llmscript"
)

// HugeBodyBytes is the size of the failure/huge-body reply: more than
// any bound Lisa should accept.
const HugeBodyBytes = 6 << 20

// failureShapes are replies any server or proxy may send.
func failureShapes() []Shape {
	return []Shape{
		{
			// A 200 whose body is an error object, no choices.
			Name: "failure/error-in-200", Family: Failure, Source: "https://github.com/n8n-io/n8n/pull/37959; https://github.com/openai/openai-agents-python/pull/2850",
			Replies: []llmscript.Step{ok(`{"error":{"message":"Rate limit exceeded","code":429}}`)},
		},
		{
			// A 200 with choices [] (Azure's content filter on the prompt).
			Name: "failure/empty-choices", Family: Failure, Source: "https://github.com/microsoft/agent-framework-go/pull/473",
			Replies: []llmscript.Step{ok(`{"id":"","object":"","created":0,"model":"","choices":[],"prompt_filter_results":[{"prompt_index":0,"content_filter_results":{"hate":{"filtered":true,"severity":"high"}}}]}`)},
		},
		{
			// The answer object cut at the token limit.
			Name: "failure/length-mid-json", Family: Failure, Source: "https://github.com/567-labs/instructor/issues/276",
			Replies: []llmscript.Step{ok(completion("chatcmpl-f1", map[string]any{"content": `{"markdown": "Lisa keeps answering when servers misbehave, and here is a long explanation of`}, "length", []int{900, 1024}, nil))},
		},
		{
			// content null and no tool calls.
			Name: "failure/content-null", Family: Failure, Source: "https://github.com/vllm-project/vllm/issues/39103 (content always null); OpenAI's message.content is nullable",
			Replies: []llmscript.Step{ok(completion("chatcmpl-f2", map[string]any{"content": nil}, "stop", []int{900, 0}, nil))},
		},
		{
			// Tool arguments that are not valid JSON (the server marks
			// such a call with finish_reason "length").
			Name: "failure/arguments-invalid-json", Family: Failure, Source: "llama.cpp tools/server/server-task.cpp (to_json_oaicompat_chat: all_tool_call_arguments_valid)",
			Replies: []llmscript.Step{ok(completion("chatcmpl-f3", map[string]any{"content": "",
				"tool_calls": []any{toolCall("call_f3", "web_search", `{"query": "lisa real llm`, nil)}}, "length", []int{900, 12}, nil))},
		},
		{
			// A call to a tool nobody offered.
			Name: "failure/unknown-tool", Family: Failure, Source: "https://github.com/QwenLM/Qwen3.8/issues/15; https://github.com/langchain4j/langchain4j/issues/1052",
			Replies: []llmscript.Step{ok(completion("chatcmpl-f4", map[string]any{"content": "",
				"tool_calls": []any{toolCall("call_f4", "toolbox.web.answer", SearchArgs, nil)}}, "tool_calls", []int{900, 20}, nil))},
		},
		{
			// Several calls in one turn, one of them repeated.
			Name: "failure/several-tool-calls", Family: Failure, Source: "https://platform.openai.com/docs/guides/function-calling (parallel function calling); https://github.com/abetlen/llama-cpp-python/issues/1784",
			Replies: []llmscript.Step{ok(completion("chatcmpl-f5", map[string]any{"content": "", "tool_calls": []any{
				toolCall("call_a", "web_search", SearchArgs, nil),
				toolCall("call_b", "web_search", SearchArgs, nil),
				toolCall("call_c", "fetch_web_page", FetchArgs, nil)}}, "tool_calls", []int{900, 60}, nil))},
		},
		{
			// An event stream although "stream": false was sent.
			Name: "failure/unasked-stream", Family: Failure, Source: "https://github.com/sgl-project/mini-sglang/issues/51; https://github.com/unslothai/unsloth/issues/6570",
			Replies: []llmscript.Step{llmscript.Raw(http.StatusOK, "text/event-stream", sse(
				`{"id":"s1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`,
				mustJSON(map[string]any{"id": "s1", "object": "chat.completion.chunk", "choices": []any{map[string]any{"index": 0, "delta": map[string]any{"content": AnswerJSON(AnswerText)[:20]}}}}),
				mustJSON(map[string]any{"id": "s1", "object": "chat.completion.chunk", "choices": []any{map[string]any{"index": 0, "delta": map[string]any{"content": AnswerJSON(AnswerText)[20:]}, "finish_reason": "stop"}}}),
				`{"id":"s1","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":900,"completion_tokens":30,"total_tokens":930}}`,
			))},
		},
		{
			// The same with a tool call spread over chunks.
			Name: "failure/unasked-stream-tool-call", Family: Failure, Source: "https://github.com/sgl-project/mini-sglang/issues/51; ollama v0.17.4 openai/openai.go (ToChunk)",
			Replies: []llmscript.Step{llmscript.Raw(http.StatusOK, "text/event-stream", sse(
				mustJSON(map[string]any{"id": "s2", "object": "chat.completion.chunk", "choices": []any{map[string]any{"index": 0, "delta": map[string]any{"role": "assistant",
					"tool_calls": []any{map[string]any{"index": 0, "id": "call_s2", "type": "function", "function": map[string]any{"name": "web_search", "arguments": SearchArgs[:9]}}}}}}}),
				mustJSON(map[string]any{"id": "s2", "object": "chat.completion.chunk", "choices": []any{map[string]any{"index": 0, "delta": map[string]any{
					"tool_calls": []any{map[string]any{"index": 0, "function": map[string]any{"arguments": SearchArgs[9:]}}}}, "finish_reason": "tool_calls"}}}),
			))},
		},
		{
			// A model stuck in a loop writes until the server's limit.
			Name: "failure/huge-body", Family: Failure, Source: "https://github.com/ollama/ollama/issues/3354",
			Replies: []llmscript.Step{ok(completion("chatcmpl-f6", map[string]any{"content": strings.Repeat("repeating myself ", HugeBodyBytes/17+1)}, "stop", []int{900, 1500000}, nil))},
		},
		{
			// ... or never stops, behind a server that streams the body.
			Name: "failure/endless-body", Family: Failure, Source: "https://github.com/jupyter-naas/abi/pull/1145; https://github.com/ollama/ollama/issues/7078",
			Replies: []llmscript.Step{llmscript.Endless(http.StatusOK, "application/json",
				`{"id":"chatcmpl-f7","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"`, "again and again ")},
		},
	}
}

// sse renders chunks as a server-sent event stream ending in [DONE].
func sse(chunks ...string) string {
	var b strings.Builder
	for _, c := range chunks {
		b.WriteString("data: " + c + "\n\n")
	}
	b.WriteString("data: [DONE]\n\n")
	return b.String()
}
