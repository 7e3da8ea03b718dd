package llmcorpus

import "github.com/lisabot/lisa/devkit/llmscript"

// llamaCppShapes are replies of llama.cpp's llama-server.
func llamaCppShapes() []Shape {
	const task = "llama.cpp tools/server/server-task.cpp (to_json_oaicompat_chat)"
	const chat = "llama.cpp common/chat.cpp (common_chat_msg::to_json_oaicompat)"
	timings := map[string]any{"system_fingerprint": "b6500-0a1b2c3d", "timings": map[string]any{"prompt_n": 1210, "prompt_ms": 4021.5, "predicted_n": 40, "predicted_ms": 2210.3}}
	return []Shape{
		{
			// gen_chatcmplid: "chatcmpl-" and 32 random letters and digits;
			// system_fingerprint is the build; timings beside usage.
			Name: "llama.cpp/answer", Family: LlamaCpp, Source: task + "; tools/server/server-common.cpp (gen_chatcmplid)",
			Replies: []llmscript.Step{ok(completion("chatcmpl-q8ZtV1r0LmB5sK2xWn9PfA3cYd7Ge4Hj", map[string]any{"content": AnswerJSON(AnswerText)},
				"stop", []int{1210, 40}, timings))},
		},
		{
			// --jinja with a template the server parses: content "" and a
			// tool call whose id is 32 random letters and digits
			// (gen_tool_call_id).
			Name: "llama.cpp/jinja-tool-calls", Family: LlamaCpp, Source: chat + "; tools/server/server-common.cpp (gen_tool_call_id)",
			Replies: []llmscript.Step{ok(completion("chatcmpl-r2", map[string]any{"content": "",
				"tool_calls": []any{toolCall("Xv2C8kP0aQ7mZ3tR9yL1nB5sW4eD6fG0", "web_search", SearchArgs, nil)}}, "tool_calls", []int{1300, 25}, timings))},
		},
		{
			// The id is left out when the template makes none.
			Name: "llama.cpp/tool-call-without-id", Family: LlamaCpp, Source: chat + " (the id is only set when not empty); https://github.com/ggml-org/llama.cpp/issues/12279",
			Replies: []llmscript.Step{ok(completion("chatcmpl-r3", map[string]any{"content": "",
				"tool_calls": []any{toolCall(nil, "web_search", SearchArgs, nil)}}, "tool_calls", []int{1300, 25}, timings))},
		},
		{
			// A Hermes/Qwen-style template whose call the server did not
			// recognise: the call stays in the content as text.
			Name: "llama.cpp/tool-call-as-text", Family: LlamaCpp, Source: "https://github.com/ggml-org/llama.cpp/issues/22786 (tool call returned as content); Hermes 2 Pro <tool_call> format (" + chat + ")",
			Replies: []llmscript.Step{ok(completion("chatcmpl-r4", map[string]any{"content": "I will look that up.\n<tool_call>\n" +
				`{"name": "web_search", "arguments": {"query": "` + Query + `"}}` + "\n</tool_call>"}, "stop", []int{1300, 40}, timings))},
		},
		{
			// Without --jinja, a request with tools is refused; the thrown
			// std::runtime_error becomes a 500 server_error.
			Name: "llama.cpp/no-jinja", Family: LlamaCpp, Source: "llama.cpp examples/server/utils.hpp (oaicompat_completion_params_parse: \"tools param requires --jinja flag\"); tools/server/server-common.cpp (format_error_response)",
			Replies: []llmscript.Step{fail(500, `{"error":{"code":500,"message":"tools param requires --jinja flag","type":"server_error"}}`)},
		},
		{
			// Older builds said it differently, still as a 500.
			Name: "llama.cpp/unsupported-param-tools", Family: LlamaCpp, Source: "https://github.com/ggml-org/llama.cpp/issues/10920",
			Replies: []llmscript.Step{fail(500, `{"error":{"code":500,"message":"Unsupported param: tools","type":"server_error"}}`)},
		},
		{
			// A prompt over the slot's context.
			Name: "llama.cpp/exceeds-context", Family: LlamaCpp, Source: "llama.cpp tools/server/server-common.cpp (format_error_response, ERROR_TYPE_EXCEED_CONTEXT_SIZE)",
			Replies: []llmscript.Step{fail(400, `{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error","n_prompt_tokens":9000,"n_ctx":8192}}`)},
		},
		{
			// Tool arguments as a JSON object instead of a string.
			Name: "llama.cpp/arguments-object", Family: LlamaCpp, Source: "https://github.com/ggml-org/llama.cpp/issues/20198",
			Replies: []llmscript.Step{ok(completion("chatcmpl-r5", map[string]any{"content": "",
				"tool_calls": []any{toolCall("c1", "web_search", object(SearchArgs), nil)}}, "tool_calls", []int{1300, 25}, timings))},
		},
		{
			// --reasoning-format deepseek: the thinking in
			// reasoning_content, the answer in content.
			Name: "llama.cpp/reasoning-content", Family: LlamaCpp, Source: chat + " (reasoning_content)",
			Replies: []llmscript.Step{ok(completion("chatcmpl-r6", map[string]any{"content": AnswerJSON(AnswerText),
				"reasoning_content": "Short question; answer directly."}, "stop", []int{1250, 90}, timings))},
		},
	}
}
