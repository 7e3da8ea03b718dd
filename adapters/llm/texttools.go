package llm

import (
	"context"
	"encoding/json"
	"strings"
	"unicode"

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

// ctxCheckEvery is how many markers parseTextToolCalls reads between two
// looks at its context.
const ctxCheckEvery = 256

// parseTextToolCalls reads the tool calls a model wrote into its text.
// It returns the calls in order and the text outside them, or no calls
// (and content unchanged) when there is no well-formed one: a block whose
// JSON has no name is not a call. An unclosed block runs to the end of
// the text (the model stopped after it). Arguments are passed on as the
// model wrote them (an object becomes its JSON text, a string is
// unquoted), so they get the same validation as any tool call's. The
// calls have no IDs; the loop gives them some.
//
// It reads the text in one pass, in time linear in its length however
// many markers it holds: the next opening and closing marker of each kind
// is searched once from where the last search ended, and a block's JSON
// is decoded only as far as its first value reaches (a block that is not
// JSON fails at its first character). It looks at ctx every
// ctxCheckEvery markers and returns ctx's error once it is done.
func parseTextToolCalls(ctx context.Context, content string) ([]messages.ModelToolCall, string, error) {
	var (
		calls []messages.ModelToolCall
		rest  strings.Builder
	)
	// next[i] caches the position of the next opening (0) or closing (1)
	// marker of kind i at or after the position it was searched from; -1
	// when there is none left (and never will be).
	type cache struct{ at, from int }
	next := make([][2]cache, len(textCallMarkers))
	for i := range next {
		next[i] = [2]cache{{at: -2}, {at: -2}}
	}
	find := func(kind, which, pos int) int {
		c := &next[kind][which]
		if c.at == -1 || (c.at >= pos && c.from <= pos) {
			return c.at
		}
		i := strings.Index(content[pos:], textCallMarkers[kind][which])
		if i >= 0 {
			i += pos
		}
		*c = cache{at: i, from: pos}
		return i
	}
	pos, kept, markers := 0, 0, 0
	for pos < len(content) {
		if markers++; markers%ctxCheckEvery == 0 && ctx.Err() != nil {
			return nil, content, ctx.Err()
		}
		start, kind := -1, 0
		for k := range textCallMarkers {
			if i := find(k, 0, pos); i >= 0 && (start < 0 || i < start) {
				start, kind = i, k
			}
		}
		if start < 0 {
			break
		}
		open, close := textCallMarkers[kind][0], textCallMarkers[kind][1]
		bodyStart := start + len(open)
		end := find(kind, 1, bodyStart)
		bodyEnd, after := len(content), len(content)
		if end >= 0 {
			bodyEnd, after = end, end+len(close)
		}
		call, ok := decodeTextCall(content[bodyStart:bodyEnd])
		if !ok {
			// Not a call: the text stays and the search goes on after the
			// opening marker.
			pos = bodyStart
			continue
		}
		rest.WriteString(content[kept:start])
		calls = append(calls, call)
		pos, kept = after, after
	}
	if len(calls) == 0 {
		return nil, content, nil
	}
	rest.WriteString(content[kept:])
	return calls, strings.TrimSpace(rest.String()), nil
}

// decodeTextCall reads one call's JSON, tolerating a code fence around
// it. It decodes only the first JSON value of body, so its cost is that
// value's length, and a body with anything but whitespace (or the closing
// fence) after the value is not a call.
func decodeTextCall(body string) (messages.ModelToolCall, bool) {
	body = strings.TrimLeftFunc(body, unicode.IsSpace)
	if strings.HasPrefix(body, "```json") {
		body = body[len("```json"):]
	} else if strings.HasPrefix(body, "```") {
		body = body[len("```"):]
	}
	body = strings.TrimLeftFunc(body, unicode.IsSpace)
	if !strings.HasPrefix(body, "{") {
		return messages.ModelToolCall{}, false
	}
	r := strings.NewReader(body)
	dec := json.NewDecoder(r)
	var tc textCall
	if err := dec.Decode(&tc); err != nil || strings.TrimSpace(tc.Name) == "" {
		return messages.ModelToolCall{}, false
	}
	tail := body[dec.InputOffset():]
	tail = strings.TrimSpace(tail)
	tail = strings.TrimSuffix(tail, "```")
	if strings.TrimSpace(tail) != "" {
		return messages.ModelToolCall{}, false
	}
	args := tc.Arguments
	if len(args) == 0 || string(args) == "null" {
		args = tc.Parameters
	}
	return messages.ModelToolCall{Name: strings.TrimSpace(tc.Name), Arguments: rawArgs(args)}, true
}
