package llmcorpus

import "github.com/lisabot/lisa/devkit/llmscript"

// vllmShapes are replies of vLLM's OpenAI-compatible server.
func vllmShapes() []Shape {
	const hermes = "vllm/entrypoints/openai/tool_parsers/hermes_tool_parser.py (Hermes2ProToolParser.extract_tool_calls)"
	return []Shape{
		{
			// --enable-auto-tool-choice --tool-call-parser hermes: content
			// null when no text came before the call; ids
			// "chatcmpl-tool-" and a random hex uuid (make_tool_call_id).
			Name: "vllm/hermes-tool-calls", Family: VLLM, Source: hermes + "; vllm/entrypoints/chat_utils.py (make_tool_call_id)",
			Replies: []llmscript.Step{ok(completion("chatcmpl-8e0d5a86d87f4e3cbc78591b49a023aa", map[string]any{"content": nil,
				"tool_calls": []any{toolCall("chatcmpl-tool-3a25abfa70e041c8958862ab6a6550e9", "web_search", SearchArgs, nil)}},
				"tool_calls", []int{1400, 30}, nil))},
		},
		{
			// The parser throws (here: "parameters" instead of
			// "arguments") and returns the whole output as content.
			Name: "vllm/hermes-unparsed", Family: VLLM, Source: hermes + " (the except branch returns content=model_output)",
			Replies: []llmscript.Step{ok(completion("chatcmpl-v2", map[string]any{"content": "<tool_call>\n" +
				`{"name": "web_search", "parameters": {"query": "` + Query + `"}}` + "\n</tool_call>"}, "stop", []int{1400, 30}, nil))},
		},
		{
			// --reasoning-parser: reasoning_content beside content.
			Name: "vllm/reasoning-content", Family: VLLM, Source: "https://docs.vllm.ai/en/v0.9.1/features/reasoning_outputs.html",
			Replies: []llmscript.Step{ok(completion("chatcmpl-v3", map[string]any{"content": AnswerJSON(AnswerText),
				"reasoning_content": "The question is simple."}, "stop", []int{1400, 60}, nil))},
		},
		{
			// Started without --enable-auto-tool-choice: tool_choice
			// "auto" is refused; older versions send the error object at
			// the top level.
			Name: "vllm/no-auto-tool-choice", Family: VLLM, Source: "vllm/entrypoints/openai/serving_chat.py; vllm/entrypoints/openai/protocol.py (ErrorResponse: object, message, type, param, code)",
			Replies: []llmscript.Step{fail(400, `{"object":"error","message":"\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set","type":"BadRequestError","param":null,"code":400}`)},
		},
		{
			// A prompt over --max-model-len, in the newer wrapped error.
			Name: "vllm/context-length", Family: VLLM, Source: "vllm/entrypoints/openai/serving_engine.py (_validate_input); ErrorResponse{error: ErrorInfo}",
			Replies: []llmscript.Step{fail(400, `{"error":{"message":"This model's maximum context length is 8192 tokens. However, you requested 9216 tokens (8192 in the messages, 1024 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}}`)},
		},
		{
			// An unknown --served-model-name.
			Name: "vllm/model-not-found", Family: VLLM, Source: "vllm/entrypoints/openai/serving_engine.py (_check_model: \"The model `…` does not exist.\", NotFoundError)",
			Replies: []llmscript.Step{fail(404, "{\"error\":{\"message\":\"The model `qwen3-8b` does not exist.\",\"type\":\"NotFoundError\",\"param\":null,\"code\":404}}")},
		},
		{
			// Every token went to the reasoning: content null, no tool
			// calls, cut at the limit.
			Name: "vllm/reasoning-only", Family: VLLM, Source: "https://github.com/vllm-project/vllm/issues/39103",
			Replies: []llmscript.Step{ok(completion("chatcmpl-v4", map[string]any{"content": nil,
				"reasoning_content": "Let me think about which server this is, and then about the"}, "length", []int{1400, 1024}, nil))},
		},
	}
}
