package hostile

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// MaxEventBytes is the largest event a homeserver accepts (the Matrix
// specification's 65,536 bytes of canonical JSON, envelope included).
// Contents stay below it with room for the envelope.
const MaxEventBytes = 65_536

// contentBudget is how many bytes of JSON one case's content may take.
const contentBudget = 60_000

// Case is one hostile message.
type Case struct {
	// Name says what the case attacks.
	Name string
	// Content is the m.room.message content, ready to send or embed in
	// an event.
	Content map[string]any
	// Addressed is true when the message mentions Lisa by alias, so it
	// is accepted as an invocation if nothing else rejects it.
	Addressed bool
}

// JSON returns the content as JSON, with <, > and & unescaped as a
// homeserver stores them.
func (c Case) JSON() []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(c.Content); err != nil {
		panic(fmt.Sprintf("hostile: case %s does not encode: %v", c.Name, err))
	}
	return bytes.TrimSpace(b.Bytes())
}

// repeatTo repeats unit after prefix until the whole is close to n bytes
// (never above it).
func repeatTo(prefix, unit, suffix string, n int) string {
	k := (n - len(prefix) - len(suffix)) / len(unit)
	return prefix + strings.Repeat(unit, max(k, 0)) + suffix
}

func text(body string) map[string]any {
	return map[string]any{"msgtype": "m.text", "body": body}
}

func html(body, formatted string) map[string]any {
	return map[string]any{"msgtype": "m.text", "body": body, "format": "org.matrix.custom.html", "formatted_body": formatted}
}

func reply(body, target string) map[string]any {
	c := text(body)
	c["m.relates_to"] = map[string]any{"m.in_reply_to": map[string]any{"event_id": target}}
	return c
}

// formattingBomb is the shape that made the HTML5 parser reopen 500
// formatting elements for every paragraph: quadratic nodes from linear
// input.
func formattingBomb(n int) string {
	var b strings.Builder
	b.WriteString("<p>")
	for i := range 500 {
		fmt.Fprintf(&b, "<b c=%d>", i)
	}
	return repeatTo(b.String(), "<p>x", "", n)
}

// Corpus returns every hostile case. alias is a name that addresses Lisa
// (one of matrix.mention_aliases); addressed cases put it at the start
// of the body.
func Corpus(alias string) []Case {
	n := contentBudget / 2 // body and formatted_body share the budget
	say := alias + ": what is this?"
	cs := []Case{
		{Name: "html_formatting_bomb", Content: html(say, formattingBomb(contentBudget-200)), Addressed: true},
		{Name: "html_nested_divs", Content: html(say, repeatTo("", "<div>", "x", contentBudget-200)), Addressed: true},
		{Name: "html_nested_quotes", Content: html(say, repeatTo("", "<blockquote>", "x", contentBudget-200)), Addressed: true},
		{Name: "html_nested_lists", Content: html(say, repeatTo("", "<ul><li>", "x", contentBudget-200)), Addressed: true},
		{Name: "html_nested_tables", Content: html(say, repeatTo("", "<table><tr><td>", "x", contentBudget-200)), Addressed: true},
		{Name: "html_nested_formatting", Content: html(say, repeatTo("", "<b><i><s><u><code>", "x", contentBudget-200)), Addressed: true},
		{Name: "html_huge_attribute", Content: html(say, repeatTo(`<a href="https://example.org/`, "a", `">link</a>`, contentBudget-200)), Addressed: true},
		{Name: "html_many_attributes", Content: html(say, repeatTo("<span", " a=1", ">x</span>", contentBudget-200)), Addressed: true},
		{Name: "html_many_entities", Content: html(say, repeatTo("<p>", "&amp;", "</p>", contentBudget-200)), Addressed: true},
		{Name: "html_numeric_entities", Content: html(say, repeatTo("<p>", "&#x202E;", "</p>", contentBudget-200)), Addressed: true},
		{Name: "html_many_tiny_tags", Content: html(say, repeatTo("", "<i></i>", "", contentBudget-200)), Addressed: true},
		{Name: "html_unclosed_tags", Content: html(say, repeatTo("", "<p><li><td><a>", "", contentBudget-200)), Addressed: true},
		{Name: "html_many_links", Content: html(say, repeatTo("", `<a href="https://e.org/">https://bank.example</a>`, "", contentBudget-200)), Addressed: true},
		{Name: "html_long_pre", Content: html(say, repeatTo(`<pre><code class="language-go">`, "x = 1; ", "</code></pre>", contentBudget-200)), Addressed: true},
		{Name: "html_reply_fallback_nest", Content: html(say, repeatTo("", "<mx-reply><blockquote>", "x", contentBudget-200)), Addressed: true},
		{Name: "html_comments", Content: html(say, repeatTo("", "<!-- x -->", "", contentBudget-200)), Addressed: true},
		{Name: "alias_repeated_no_word", Content: text(repeatTo("", strings.ToLower(alias), "", n*2))},
		{Name: "alias_repeated_underscore", Content: text(repeatTo("", strings.ToLower(alias)+"_", "", n*2))},
		{Name: "alias_after_multibyte", Content: text(repeatTo("", "é", " "+alias, n)), Addressed: true},
		{Name: "alias_prefixed_multibyte", Content: text(repeatTo("", "é"+strings.ToLower(alias), "", n))},
		{Name: "long_body", Content: text(repeatTo(say+" ", "word ", "", n*2)), Addressed: true},
		{Name: "newlines_body", Content: text(repeatTo(say, "\n", "", n)), Addressed: true},
		{Name: "combining_marks", Content: text(repeatTo(say+" e", "\u0301", "", n)), Addressed: true},
		{Name: "bidi_controls", Content: text(repeatTo(say+" ", "\u202Eabc\u202C\u2066x\u2069", "", n)), Addressed: true},
		{Name: "zero_width", Content: text(repeatTo(say+" ", "\u200B\u200D\uFEFF", "", n)), Addressed: true},
		{Name: "noncharacters", Content: text(repeatTo(say+" ", "\uFDD0\uFFFE\uFFFF", "", n)), Addressed: true},
		{Name: "emoji_zwj", Content: text(repeatTo(say+" ", "👩\u200D👩\u200D👧\u200D👦", "", n)), Addressed: true},
		{Name: "markdown_quotes", Content: text(repeatTo(say+"\n", "> ", "x", n*2)), Addressed: true},
		{Name: "markdown_brackets", Content: text(repeatTo(say+" ", "[", "", n*2)), Addressed: true},
		{Name: "markdown_emphasis", Content: text(repeatTo(say+" ", "*_", "", n*2)), Addressed: true},
		{Name: "markdown_links", Content: text(repeatTo(say+" ", "[https://bank.example](https://evil.example) ", "", n*2)), Addressed: true},
		{Name: "markdown_backticks", Content: text(repeatTo(say+" ", "`", "", n*2)), Addressed: true},
		{Name: "reply_giant_id", Content: reply(say, repeatTo("$", "a", "", contentBudget-300)), Addressed: true},
		{Name: "reply_giant_id_unaddressed", Content: reply("just a reply", repeatTo("$", "a", "", contentBudget-300))},
		{Name: "reply_malformed_id", Content: reply("just a reply", "not-an-id")},
		{Name: "reply_control_chars_id", Content: reply("just a reply", "$a\u0000b\nc")},
		{Name: "reply_path_traversal_id", Content: reply("just a reply", "$../../../_matrix/client/v3/account/whoami")},
	}
	flood := make([]string, 0, 2000)
	for i := range 2000 {
		flood = append(flood, fmt.Sprintf("@u%d:example.org", i))
	}
	m := text(say)
	m["m.mentions"] = map[string]any{"user_ids": flood}
	cs = append(cs, Case{Name: "mentions_flood", Content: m, Addressed: true})
	return cs
}
