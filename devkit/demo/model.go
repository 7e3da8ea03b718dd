package demo

import (
	"encoding/json"
	"fmt"
	"html"
	"regexp"
	"strings"

	"github.com/lisabot/lisa/devkit/llmscript"
)

// The demo's scripted model. It plays three believable turns, reading
// only what Lisa sends it (the room context block and the tool results):
//
//   - a question about the room is answered from an earlier message,
//     naming its author as the context block names them;
//   - a request to look something up calls web_search, fetch_web_page on
//     the first hit and html_to_markdown on the fetched page, then answers
//     from the converted Markdown, citing the page it read;
//   - a reply to one of Lisa's answers is answered from that answer.
//
// Nothing is canned except the phrasing around what it found.

// InvocationText pulls the invoking message out of the context block Lisa
// sends to the model.
func InvocationText(block string) string {
	for _, m := range parseContext(block) {
		if m.invocation {
			return m.text
		}
	}
	return ""
}

// ctxMessage is one <message> of the room context block.
type ctxMessage struct {
	seq, authorID, authorName, text string
	invocation, assistant           bool
	// replySeq is the sequence number of the message this one replies to
	// inside the block; replyAssistant/replyText describe a reply target
	// shown as an excerpt instead.
	replySeq       string
	replyAssistant bool
	replyText      string
}

var attrRE = regexp.MustCompile(`([a-z_]+)="([^"]*)"`)

// attrs parses the attributes of one start tag (without the brackets).
func attrs(tag string) map[string]string {
	out := map[string]string{}
	for _, m := range attrRE.FindAllStringSubmatch(tag, -1) {
		out[m[1]] = html.UnescapeString(m[2])
	}
	return out
}

// parseContext reads the <message> elements of a context block. Text has
// every "<" escaped, so the first raw "<" after it starts the metadata.
func parseContext(block string) []ctxMessage {
	var out []ctxMessage
	chunks := strings.Split(block, "<message ")
	for _, chunk := range chunks[1:] {
		tag, rest, ok := strings.Cut(chunk, ">")
		if !ok {
			continue
		}
		a := attrs(tag)
		text, meta, _ := strings.Cut(rest, "<")
		// Messages are named by event ID (roomctx, issue #30), in older
		// blocks by sequence number.
		m := ctxMessage{seq: firstOf(a["event_id"], a["sequence"]), authorID: a["author_id"], authorName: a["author_name"],
			text: strings.TrimSpace(html.UnescapeString(text)), invocation: a["invocation"] == "true", assistant: a["assistant"] == "true"}
		if strings.HasPrefix(meta, "reply_to") {
			rtag, rrest, _ := strings.Cut(meta, ">")
			ra := attrs(rtag)
			m.replySeq = firstOf(ra["event_id"], ra["sequence"])
			if ra["assistant"] == "true" {
				rtext, _, _ := strings.Cut(rrest, "<")
				m.replyAssistant, m.replyText = true, strings.TrimSpace(html.UnescapeString(rtext))
			}
		}
		out = append(out, m)
	}
	return out
}

// firstOf returns the first non-empty value.
func firstOf(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// demoMove is one decision of the scripted model: a tool call (tool and
// args) or a final answer citing sources.
type demoMove struct {
	tool    string
	args    map[string]string
	answer  string
	sources []string
}

func callMove(tool, argName, argValue string) demoMove {
	return demoMove{tool: tool, args: map[string]string{argName: argValue}}
}

func answerMove(markdown string, sources ...string) demoMove {
	return demoMove{answer: markdown, sources: sources}
}

// scriptedModel is the demo's scripted model for llmscript.
func scriptedModel(r llmscript.Request) llmscript.Step {
	m := decide(r)
	if m.tool != "" {
		return llmscript.ToolCalls(llmscript.Call(m.tool, m.args))
	}
	return llmscript.Answer(m.answer, m.sources...)
}

// decide chooses the scripted model's next move for one request.
func decide(r llmscript.Request) demoMove {
	msgs := parseContext(r.LastUser())
	var inv ctxMessage
	for _, m := range msgs {
		if m.invocation {
			inv = m
		}
	}
	results := toolResults(r)
	if len(results) > 0 || wantsResearch(inv.text) {
		return researchStep(inv.text, results)
	}
	if prev, ok := repliedAnswer(msgs, inv); ok {
		return answerMove(followUp(inv.text, prev))
	}
	return answerMove(fromRoom(msgs, inv))
}

// wantsResearch reports whether the question asks Lisa to look something
// up.
func wantsResearch(q string) bool {
	q = strings.ToLower(q)
	for _, w := range []string{"look up", "look it up", "search", "research", "find out"} {
		if strings.Contains(q, w) {
			return true
		}
	}
	return false
}

// repliedAnswer returns the text of Lisa's own answer that inv replies to.
func repliedAnswer(msgs []ctxMessage, inv ctxMessage) (string, bool) {
	if inv.replyAssistant {
		return inv.replyText, true
	}
	for _, m := range msgs {
		if inv.replySeq != "" && m.seq == inv.replySeq && m.assistant {
			return m.text, true
		}
	}
	return "", false
}

// fromRoom answers from the earlier message, by someone other than the
// asker, that shares most words with the question (the latest on a tie).
func fromRoom(msgs []ctxMessage, inv ctxMessage) string {
	best, bestScore := -1, -1
	for i, m := range msgs {
		if m.invocation || m.assistant || m.authorID == inv.authorID || m.text == "" {
			continue
		}
		if s := overlap(inv.text, m.text); s >= bestScore {
			best, bestScore = i, s
		}
	}
	if best < 0 {
		return "I can't find anything about that earlier in this room, sorry."
	}
	m := msgs[best]
	name := m.authorName
	if name == "" {
		name = m.authorID
	}
	return fmt.Sprintf("That was **%s** (`%s`), who said earlier in this room:\n\n> %s",
		name, m.authorID, strings.ReplaceAll(m.text, "\n", "\n> "))
}

// followUp answers a reply to one of Lisa's answers from that answer: the
// sentence of it that best matches the new question.
func followUp(q, answer string) string {
	best, bestScore := "", 0
	for _, s := range sentences(answer) {
		if n := overlap(q, s); n > bestScore {
			best, bestScore = s, n
		}
	}
	if best == "" {
		return "My answer above is all I found on that. Mention me with *look up …* and I'll search again."
	}
	return fmt.Sprintf("Going by the page I cited in my answer above:\n\n> %s\n\nSo that's where I would start. Ask me to look it up again if you want more detail.", best)
}

// stopwords are words too common to say two texts are about the same thing.
var stopwords = map[string]bool{"what": true, "which": true, "that": true, "this": true, "with": true, "from": true,
	"have": true, "does": true, "about": true, "your": true, "they": true, "there": true, "would": true, "could": true,
	"should": true, "please": true, "lisa": true, "look": true, "whether": true, "again": true, "earlier": true, "enough": true}

// overlap counts the distinct significant words a and b share.
func overlap(a, b string) int {
	words := func(s string) map[string]bool {
		out := map[string]bool{}
		for _, w := range strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
			return !('a' <= r && r <= 'z' || '0' <= r && r <= '9')
		}) {
			if len(w) >= 4 && !stopwords[w] {
				out[w] = true
			}
		}
		return out
	}
	wb, n := words(b), 0
	for w := range words(a) {
		if wb[w] {
			n++
		}
	}
	return n
}

// sentences splits prose into sentences, dropping list markers and quotes.
func sentences(text string) []string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		for _, marker := range []string{"- ", "* ", "+ ", "> "} {
			line = strings.TrimSpace(strings.TrimPrefix(line, marker))
		}
		for line != "" {
			i := strings.Index(line, ". ")
			if i < 0 {
				out = append(out, line)
				break
			}
			out = append(out, line[:i+1])
			line = strings.TrimSpace(line[i+2:])
		}
	}
	return out
}

// toolResult is a tool message as Lisa sends it to the model.
type toolResult struct {
	OK         bool     `json:"ok"`
	Message    string   `json:"message"`
	Content    string   `json:"content"`
	SourceURLs []string `json:"source_urls"`
}

// toolResults returns the request's tool results, oldest first.
func toolResults(r llmscript.Request) []toolResult {
	var out []toolResult
	for _, m := range r.Messages {
		if m.Role != "tool" {
			continue
		}
		var t toolResult
		if err := json.Unmarshal([]byte(m.Content), &t); err != nil {
			t = toolResult{Message: "unreadable tool result"}
		}
		out = append(out, t)
	}
	return out
}

// researchStep plays search → fetch the first hit → convert → answer,
// saying so honestly when a step fails.
func researchStep(question string, results []toolResult) demoMove {
	if len(results) > 0 && !results[len(results)-1].OK {
		return answerMove(fmt.Sprintf("I tried to look that up, but a step failed (%s), so I can't give you a sourced answer right now.",
			results[len(results)-1].Message))
	}
	switch len(results) {
	case 0:
		q := question
		if before, after, ok := strings.Cut(q, ","); ok && strings.EqualFold(strings.TrimSpace(before), "lisa") {
			q = strings.TrimSpace(after)
		}
		return callMove("web_search", "query", q)
	case 1:
		if len(results[0].SourceURLs) == 0 {
			return answerMove("I searched, but nothing came up. Could you phrase it differently?")
		}
		return callMove("fetch_web_page", "url", results[0].SourceURLs[0])
	case 2:
		var page struct {
			ArtifactID string `json:"artifact_id"`
		}
		_ = json.Unmarshal([]byte(results[1].Content), &page)
		return callMove("html_to_markdown", "artifact_id", page.ArtifactID)
	default:
		var page struct {
			FinalURL string `json:"final_url"`
			Title    string `json:"title"`
		}
		_ = json.Unmarshal([]byte(results[1].Content), &page)
		return answerMove(summarize(question, page.Title, results[len(results)-1].Content), page.FinalURL)
	}
}

// summarize answers question from a page's Markdown: its first prose
// paragraph plus the two that share most words with the question, in
// page order, two sentences each.
func summarize(question, title, markdown string) string {
	var paras []string
	for _, p := range strings.Split(markdown, "\n\n") {
		p = strings.Join(strings.Fields(p), " ")
		if len(p) < 60 || strings.ContainsAny(p[:1], "#<[|>`") || strings.Contains(p, "›") ||
			strings.HasPrefix(p, "- ") || strings.HasPrefix(p, "* ") || strings.HasPrefix(p, "+ ") {
			continue
		}
		paras = append(paras, p)
	}
	if len(paras) == 0 {
		return "I found a page on this, but it had no text I could use."
	}
	picked := map[int]bool{0: true}
	for range 2 {
		best, bestScore := -1, 0
		for i, p := range paras {
			if s := overlap(question, p); !picked[i] && s > bestScore {
				best, bestScore = i, s
			}
		}
		if best >= 0 {
			picked[best] = true
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "I looked it up. According to *%s*:\n", title)
	for i, p := range paras {
		if picked[i] {
			s := sentences(p)
			fmt.Fprintf(&b, "\n- %s", strings.Join(s[:min(2, len(s))], " "))
		}
	}
	return b.String()
}
