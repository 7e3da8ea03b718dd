package llmcorpus

import "github.com/lisabot/lisa/devkit/llmscript"

// openAIShapes are replies of OpenAI's chat completions API.
func openAIShapes() []Shape {
	return []Shape{
		{
			// A refusal: content null, the refusal text in "refusal".
			Name: "openai/refusal", Family: OpenAI, Source: "https://platform.openai.com/docs/guides/structured-outputs/refusals",
			Replies: []llmscript.Step{ok(completion("chatcmpl-oa1", map[string]any{"content": nil,
				"refusal": "I'm sorry, I cannot assist with that request."}, "stop", []int{900, 12}, nil))},
		},
		{
			// Reasoning models refuse max_tokens.
			Name: "openai/max-tokens-refused", Family: OpenAI, Source: "https://github.com/griptape-ai/ComfyUI-Griptape/issues/312; https://github.com/ITSpecialist111/ai_automation_suggester/issues/38",
			Replies: []llmscript.Step{fail(400, `{"error":{"message":"Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.","type":"invalid_request_error","param":"max_tokens","code":"unsupported_parameter"}}`)},
		},
		{
			// ... and any temperature but the default.
			Name: "openai/temperature-refused", Family: OpenAI, Source: "https://github.com/microsoft/vscode/issues/253673; https://github.com/owndev/Open-WebUI-Functions/issues/98",
			Replies: []llmscript.Step{fail(400, `{"error":{"message":"Unsupported value: 'temperature' does not support 0.7 with this model. Only the default (1) value is supported.","type":"invalid_request_error","param":"temperature","code":"unsupported_value"}}`)},
		},
		{
			// An unknown model.
			Name: "openai/model-not-found", Family: OpenAI, Source: "https://github.com/abi/screenshot-to-code/issues/332",
			Replies: []llmscript.Step{fail(404, "{\"error\":{\"message\":\"The model `gpt-4o-2024-05-13` does not exist or you do not have access to it.\",\"type\":\"invalid_request_error\",\"param\":null,\"code\":\"model_not_found\"}}")},
		},
		{
			// Parallel function calling: several calls in one message.
			Name: "openai/parallel-tool-calls", Family: OpenAI, Source: "https://platform.openai.com/docs/guides/function-calling (parallel function calling)",
			Replies: []llmscript.Step{ok(completion("chatcmpl-oa2", map[string]any{"content": nil, "refusal": nil, "tool_calls": []any{
				toolCall("call_8nP2Qb3kLx7VvR1cT0mZyA9s", "web_search", SearchArgs, nil),
				toolCall("call_4hF6Jd2sGw9XqE5uN8pKtB1c", "fetch_web_page", FetchArgs, nil)}},
				"tool_calls", []int{950, 60}, map[string]any{"system_fingerprint": "fp_2f406b9113"}))},
		},
	}
}
