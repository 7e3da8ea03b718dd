package llmcorpus

import "github.com/lisabot/lisa/devkit/llmscript"

// lmStudioShapes are replies of LM Studio's OpenAI-compatible server.
func lmStudioShapes() []Shape {
	const tools = "https://lmstudio.ai/docs/advanced/tool-use"
	return []Shape{
		{
			// An answer with LM Studio's extra fields (stats,
			// system_fingerprint naming the model).
			Name: "lmstudio/answer", Family: LMStudio, Source: "https://lmstudio.ai/docs/app/api/endpoints/openai",
			Replies: []llmscript.Step{ok(completion("chatcmpl-lms1", map[string]any{"content": AnswerJSON(AnswerText)}, "stop", []int{700, 30},
				map[string]any{"stats": map[string]any{}, "system_fingerprint": "qwen2.5-7b-instruct"}))},
		},
		{
			// Native tool use: ids are strings of digits.
			Name: "lmstudio/tool-calls", Family: LMStudio, Source: tools,
			Replies: []llmscript.Step{ok(completion("chatcmpl-lms2", map[string]any{"content": "",
				"tool_calls": []any{toolCall("365174485", "web_search", SearchArgs, nil)}}, "tool_calls", []int{760, 20}, nil))},
		},
		{
			// A model without native tool support uses LM Studio's default
			// format; when its call does not parse, the text comes back as
			// content.
			Name: "lmstudio/tool-request-as-text", Family: LMStudio, Source: tools + " (default tool use format; malformed calls fall back to content)",
			Replies: []llmscript.Step{ok(completion("chatcmpl-lms3", map[string]any{"content": "[TOOL_REQUEST]" +
				`{"name": "web_search", "arguments": {"query": "` + Query + `"}}` + "[END_TOOL_REQUEST]"}, "stop", []int{760, 30}, nil))},
		},
		{
			// json_object is refused, with the error as a plain string.
			// The first reply is prose, so that the repair request (which
			// carries response_format) meets the refusal.
			Name: "lmstudio/json-object-refused", Family: LMStudio, Source: "https://github.com/lmstudio-ai/lmstudio-bug-tracker/issues/189; https://github.com/LoadShine/tada/issues/16",
			Replies: []llmscript.Step{
				ok(completion("chatcmpl-lms4", map[string]any{"content": "Lisa keeps answering."}, "stop", []int{700, 10}, nil)),
				fail(400, `{"error":"'response_format.type' must be 'json_schema' or 'text'"}`),
			},
		},
	}
}
