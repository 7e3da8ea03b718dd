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
// It returns the calls in order and the text before them, or no calls
// (and content unchanged) when there is no well-formed one standing on
// its own: a block whose JSON has no name is not a call. An unclosed
// block runs to the end of the text (the model stopped after it).
// Arguments are passed on as the model wrote them (an object becomes its
// JSON text, a string is unquoted), so they get the same validation as
// any tool call's. The calls have no IDs; the loop gives them some.
//
// A call stands on its own (#39 item 8) when it is part of the run of
// calls that ends the text: the first call of the run begins a line (only
// spaces or tabs before it), outside a fenced code block and not on a
// quoted line ("> …"); each further call follows the one before with only
// whitespace between; and only whitespace follows the last. Prose that
// quotes a page's markup — inline, in a quotation, in a code fence, or
// with more prose after it — is therefore text, not a call: a prompt
// injection needs the model to issue the call, not merely repeat it.
//
// It reads the text in one pass, in time linear in its length however
// many markers it holds: the next opening and closing marker of each kind
// is searched once from where the last search ended, each line is looked
// at once for fences and quotes, and a block's JSON is decoded only as
// far as its first value reaches (a block that is not JSON fails at its
// first character). It looks at ctx every ctxCheckEvery markers and
// returns ctx's error once it is done.
func parseTextToolCalls(ctx context.Context, content string) ([]messages.ModelToolCall, string, error) {
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
	var (
		lines lineScanner
		// run is the current run of calls standing on their own; a
		// candidate that cannot join it ends it.
		run      []messages.ModelToolCall
		runStart = -1
		runEnd   = -1
	)
	lines.s = content
	pos, markers := 0, 0
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
		switch {
		case runEnd >= 0 && blank(content[runEnd:start]):
			run = append(run, call)
		case lines.beginsLine(start):
			run, runStart = append(run[:0], call), start
		default:
			// Inline, quoted or fenced: text, and the end of any run.
			run, runStart = run[:0], -1
			lines.skip(after)
			pos, runEnd = after, -1
			continue
		}
		lines.skip(after)
		pos, runEnd = after, after
	}
	if len(run) == 0 || !blank(content[runEnd:]) {
		return nil, content, nil
	}
	return run, strings.TrimSpace(content[:runStart]), nil
}

// blank reports whether s is only whitespace.
func blank(s string) bool {
	return strings.TrimLeftFunc(s, unicode.IsSpace) == ""
}

// lineScanner follows the lines of s forward, once each, keeping the
// state of fenced code blocks (``` or ~~~, three or more, closed by a
// fence of the same character at least as long).
type lineScanner struct {
	s string
	// next is the start of the first line not yet looked at.
	next int
	// The current line: where its first non-blank character is, and
	// whether it is quoted or in (or a line of) a fence.
	firstNonBlank int
	quoted        bool
	fenced        bool
	// fence is the open fence's character and length; 0 when none.
	fence    byte
	fenceLen int
}

// beginsLine reports whether position p, at or after every position
// asked or skipped before, is the first non-blank character of a line that
// is neither quoted nor fenced.
func (l *lineScanner) beginsLine(p int) bool {
	for l.next <= p {
		l.enter(l.next)
	}
	return p == l.firstNonBlank && !l.quoted && !l.fenced
}

// skip moves past p without looking at the lines it passes: they belong
// to a tool-call block, whose fences are its own.
func (l *lineScanner) skip(p int) {
	if p < l.next {
		return
	}
	i := strings.IndexByte(l.s[p:], '\n')
	if i < 0 {
		l.next = len(l.s) + 1
	} else {
		l.next = p + i + 1
	}
	// The rest of the line holding p is no line's beginning.
	l.firstNonBlank = -1
}

// enter looks at the line that starts at start.
func (l *lineScanner) enter(start int) {
	end := strings.IndexByte(l.s[start:], '\n')
	if end < 0 {
		end = len(l.s)
	} else {
		end += start
	}
	l.next = end + 1
	i := start
	for i < end && (l.s[i] == ' ' || l.s[i] == '\t') {
		i++
	}
	l.firstNonBlank = i
	l.quoted = i < end && l.s[i] == '>'
	n := 0
	if i < end && (l.s[i] == '`' || l.s[i] == '~') {
		for i+n < end && l.s[i+n] == l.s[i] {
			n++
		}
	}
	switch {
	case n >= 3 && l.fence == 0:
		l.fence, l.fenceLen, l.fenced = l.s[i], n, true
	case n >= 3 && l.s[i] == l.fence && n >= l.fenceLen && blank(l.s[i+n:end]):
		l.fence, l.fenceLen, l.fenced = 0, 0, true
	default:
		l.fenced = l.fence != 0
	}
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
