package llm

import (
	"encoding/json"
	"strings"

	"github.com/lisabot/lisa/messages"
)

// textCallMarkers are the markups models use to write a tool call into
// their text when the server does not turn it into a tool_calls entry:
// Hermes/Qwen-style chat templates ("<tool_call>{…}</tool_call>", which
// llama.cpp and vLLM leave in the content when their parser does not
// recognize or cannot parse the call) and LM Studio's default tool-use
// format ("[TOOL_REQUEST]{…}[END_TOOL_REQUEST]").
var textCallMarkers = [][2]string{
	{"<tool_call>", "</tool_call>"},
	{"[TOOL_REQUEST]", "[END_TOOL_REQUEST]"},
}

// textCall is the JSON inside a text tool call.
type textCall struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	// Parameters is the Llama-style spelling of arguments.
	Parameters json.RawMessage `json:"parameters"`
}

// parseTextToolCalls reads the tool calls a model wrote into its text.
// It returns the calls in order and the text outside them, or no calls
// (and content unchanged) when there is no well-formed one: a block whose
// JSON has no name is not a call. An unclosed block runs to the end of
// the text (the model stopped after it). Arguments are passed on as the
// model wrote them (an object becomes its JSON text, a string is
// unquoted), so they get the same validation as any tool call's. The
// calls have no IDs; the loop gives them some.
func parseTextToolCalls(content string) ([]messages.ModelToolCall, string) {
	var (
		calls []messages.ModelToolCall
		rest  strings.Builder
	)
	s := content
	for {
		start, open, close := -1, "", ""
		for _, m := range textCallMarkers {
			if i := strings.Index(s, m[0]); i >= 0 && (start < 0 || i < start) {
				start, open, close = i, m[0], m[1]
			}
		}
		if start < 0 {
			rest.WriteString(s)
			break
		}
		body := s[start+len(open):]
		end := strings.Index(body, close)
		next := ""
		if end >= 0 {
			next = body[end+len(close):]
			body = body[:end]
		}
		call, ok := decodeTextCall(body)
		if !ok {
			// Not a call: keep the text as it was and look further.
			rest.WriteString(s[:start+len(open)])
			s = s[start+len(open):]
			continue
		}
		rest.WriteString(s[:start])
		calls = append(calls, call)
		if end < 0 {
			break
		}
		s = next
	}
	if len(calls) == 0 {
		return nil, content
	}
	return calls, strings.TrimSpace(rest.String())
}

// decodeTextCall reads one call's JSON, tolerating a code fence around it.
func decodeTextCall(body string) (messages.ModelToolCall, bool) {
	body = strings.TrimSpace(body)
	body = strings.TrimPrefix(body, "```json")
	body = strings.TrimPrefix(body, "```")
	body = strings.TrimSuffix(strings.TrimSpace(body), "```")
	var tc textCall
	if err := json.Unmarshal([]byte(strings.TrimSpace(body)), &tc); err != nil || strings.TrimSpace(tc.Name) == "" {
		return messages.ModelToolCall{}, false
	}
	args := tc.Arguments
	if len(args) == 0 || string(args) == "null" {
		args = tc.Parameters
	}
	return messages.ModelToolCall{Name: strings.TrimSpace(tc.Name), Arguments: rawArgs(args)}, true
}
