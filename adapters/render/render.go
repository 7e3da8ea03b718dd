package render

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html"
	"regexp"
	"strings"

	"github.com/microcosm-cc/bluemonday"
	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/extension"
)

// InvocationKey is the namespaced content field carrying the invoking
// event's ID, so a reply can be found again on the homeserver.
const InvocationKey = "org.lisabot.invocation"

// Renderer renders replies. It is safe for concurrent use.
type Renderer struct {
	md     goldmark.Markdown
	policy *bluemonday.Policy
}

// New returns a Renderer.
func New() *Renderer {
	md := goldmark.New(goldmark.WithExtensions(extension.Strikethrough, extension.Table, extension.Linkify))
	p := bluemonday.NewPolicy()
	p.AllowElements("p", "br", "hr", "strong", "b", "em", "i", "del", "s", "u", "code", "pre", "blockquote",
		"ul", "ol", "li", "h1", "h2", "h3", "h4", "h5", "h6", "table", "thead", "tbody", "tr", "th", "td", "sup", "sub")
	p.AllowAttrs("href").OnElements("a")
	p.AllowURLSchemes("http", "https", "matrix")
	p.RequireParseableURLs(true)
	p.AllowAttrs("start").Matching(regexp.MustCompile(`^[0-9]{1,6}$`)).OnElements("ol")
	p.AllowAttrs("class").Matching(regexp.MustCompile(`^language-[A-Za-z0-9_+-]{1,32}$`)).OnElements("code")
	return &Renderer{md: md, policy: p}
}

// HTML renders markdown to sanitized HTML.
func (r *Renderer) HTML(markdown string) (string, error) {
	var buf bytes.Buffer
	// goldmark escapes raw HTML unless WithUnsafe is set; it is not.
	if err := r.md.Convert([]byte(markdown), &buf); err != nil {
		return "", fmt.Errorf("render: %w", err)
	}
	return strings.TrimSpace(r.policy.Sanitize(buf.String())), nil
}

// Reply returns the JSON content of an m.text reply to inReplyTo.
func (r *Renderer) Reply(markdown, inReplyTo string) ([]byte, error) {
	markdown = strings.TrimSpace(markdown)
	if markdown == "" {
		return nil, fmt.Errorf("render: empty reply")
	}
	formatted, err := r.HTML(markdown)
	if err != nil {
		return nil, err
	}
	content := map[string]any{
		"msgtype":        "m.text",
		"body":           plain(formatted, markdown),
		"format":         "org.matrix.custom.html",
		"formatted_body": formatted,
		"m.relates_to":   map[string]any{"m.in_reply_to": map[string]string{"event_id": inReplyTo}},
		"m.mentions":     map[string]any{},
		InvocationKey:    inReplyTo,
	}
	return json.Marshal(content)
}

var tags = regexp.MustCompile(`<[^>]*>`)

// plain derives the text body from the sanitized HTML, keeping line
// structure; it falls back to the Markdown source if nothing is left.
func plain(formatted, markdown string) string {
	s := strings.ReplaceAll(formatted, ">\n<", "><")
	s = strings.NewReplacer("<br>", "\n", "</p>", "\n\n", "</li>", "\n", "<li>", "- ", "</h1>", "\n\n", "</h2>", "\n\n", "</h3>", "\n\n", "</pre>", "\n\n", "</blockquote>", "\n\n", "</tr>", "\n").Replace(s)
	s = html.UnescapeString(tags.ReplaceAllString(s, ""))
	s = strings.TrimSpace(regexp.MustCompile(`\n{3,}`).ReplaceAllString(s, "\n\n"))
	if s == "" {
		return markdown
	}
	return s
}
