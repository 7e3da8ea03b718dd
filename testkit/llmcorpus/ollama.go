package llmcorpus

import "github.com/lisabot/lisa/devkit/llmscript"

// ollamaShapes are replies of Ollama's OpenAI compatibility layer
// (/v1/chat/completions), v0.17.4.
func ollamaShapes() []Shape {
	const routes = "ollama v0.17.4 server/routes.go (ChatHandler)"
	const openai = "ollama v0.17.4 openai/openai.go (ToChatCompletion)"
	return []Shape{
		{
			// ToChatCompletion: system_fingerprint "fp_ollama", usage from
			// the runner's prompt and eval counts.
			Name: "ollama/answer", Family: Ollama, Source: openai,
			Replies: []llmscript.Step{ok(completion("chatcmpl-451", map[string]any{"content": AnswerJSON(AnswerText)}, "stop", []int{812, 31},
				map[string]any{"system_fingerprint": "fp_ollama"}))},
		},
		{
			// ToToolCalls: each call carries an index; toolCallId in
			// server/routes.go makes "call_" and eight lower-case letters
			// and digits; content is "" and finish_reason "tool_calls".
			Name: "ollama/tool-calls", Family: Ollama, Source: openai + "; " + routes + " (toolCallId)",
			Replies: []llmscript.Step{ok(completion("chatcmpl-452", map[string]any{"content": "",
				"tool_calls": []any{toolCall("call_k3v9x2qa", "web_search", SearchArgs, map[string]any{"index": 0})}},
				"tool_calls", []int{901, 22}, map[string]any{"system_fingerprint": "fp_ollama"}))},
		},
		{
			// Message.Reasoning carries a thinking model's reasoning in a
			// "reasoning" field beside the content.
			Name: "ollama/thinking", Family: Ollama, Source: openai + " (Message.Reasoning from r.Message.Thinking)",
			Replies: []llmscript.Step{ok(completion("chatcmpl-453", map[string]any{"content": AnswerJSON(AnswerText),
				"reasoning": "The user wants a short answer. I should not search."}, "stop", []int{840, 120}, nil))},
		},
		{
			// ChatHandler answers 404 "model '…' not found"; the OpenAI
			// middleware (middleware/openai.go writeError) wraps it as an
			// api_error with param and code null.
			Name: "ollama/model-not-found", Family: Ollama, Source: routes + "; ollama v0.17.4 middleware/openai.go (writeError)",
			Replies: []llmscript.Step{fail(404, `{"error":{"message":"model 'qwen3:8b' not found","type":"api_error","param":null,"code":null}}`)},
		},
		{
			// A model whose template does not use .Tools: the capability
			// check (server/images.go errCapabilities) refuses the request.
			Name: "ollama/no-tools", Family: Ollama, Source: "ollama v0.17.4 server/images.go (CheckCapabilities, \"does not support\"); " + routes,
			Replies: []llmscript.Step{fail(400, `{"error":{"message":"registry.ollama.ai/library/gemma3:1b does not support tools","type":"api_error","param":null,"code":null}}`)},
		},
		{
			// num_predict reached: DoneReason "length" becomes the
			// finish_reason, the content stops where generation stopped
			// (structured output too, see the issue).
			Name: "ollama/length", Family: Ollama, Source: openai + " (FinishReason from r.DoneReason); https://github.com/567-labs/instructor/issues/276",
			Replies: []llmscript.Step{ok(completion("chatcmpl-454", map[string]any{"content": `{"markdown": "Lisa keeps answering when servers`}, "length", []int{830, 1024}, nil))},
		},
		{
			// A prompt longer than num_ctx is cut without an error;
			// usage.prompt_tokens then equals num_ctx (the server log says
			// "truncating input prompt"), probed on v0.17.4.
			Name: "ollama/prompt-cut-silently", Family: Ollama, Source: "ollama v0.17.4 runner (\"truncating input prompt\", probed: prompt_tokens == num_ctx); ../shared/guides/real-llm-server.md",
			Replies: []llmscript.Step{ok(completion("chatcmpl-455", map[string]any{"content": AnswerJSON(AnswerText)}, "stop", []int{4096, 30}, nil))},
		},
	}
}
