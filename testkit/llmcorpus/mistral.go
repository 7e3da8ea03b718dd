package llmcorpus

import "github.com/lisabot/lisa/devkit/llmscript"

// mistralShapes are replies of Mistral's API (and of servers running
// Mistral's templates).
func mistralShapes() []Shape {
	return []Shape{
		{
			// Tool call ids are nine letters and digits; Mistral refuses
			// any other id in the conversation sent back.
			Name: "mistral/tool-calls", Family: Mistral, Source: "https://docs.mistral.ai/capabilities/function_calling/; https://github.com/anomalyco/opencode/issues/1680 (\"must be a-z, A-Z, 0-9, with a length of 9\")",
			Replies: []llmscript.Step{ok(completion("cf79286fbb114a7f9a3bd5f3d56ffa3a", map[string]any{"content": "",
				"tool_calls": []any{toolCall("D681PevKs", "web_search", SearchArgs, map[string]any{"index": 0})}}, "tool_calls", []int{1100, 20}, nil))},
		},
		{
			// Reasoning models (Magistral) send content as chunks: a
			// thinking chunk, then the text.
			Name: "mistral/thinking-chunks", Family: Mistral, Source: "https://github.com/spring-projects/spring-ai/issues/5019; https://docs.mistral.ai/inference/conversations/reasoning",
			Replies: []llmscript.Step{ok(completion("mst2", map[string]any{"content": []any{
				map[string]any{"type": "thinking", "thinking": []any{map[string]any{"type": "text", "text": "The user asks about servers."}}},
				map[string]any{"type": "text", "text": AnswerJSON(AnswerText)},
			}}, "stop", []int{1100, 80}, nil))},
		},
	}
}
