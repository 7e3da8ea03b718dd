package render

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strings"

	"github.com/microcosm-cc/bluemonday"
	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/renderer"
	gmhtml "github.com/yuin/goldmark/renderer/html"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"
)

// InvocationKey is the namespaced content field carrying the invoking
// event's ID, so a reply can be found again on the homeserver.
const InvocationKey = "org.lisabot.invocation"

// MaxContentBytes is the budget for a reply's whole JSON content, well
// below Matrix's 64 KiB event limit so the envelope the homeserver adds
// (IDs, signatures, unsigned data) still fits. Longer answers are cut.
const MaxContentBytes = 48 << 10

// TruncatedMarker ends an answer that had to be cut to fit the budget.
const TruncatedMarker = "…(truncated)"

// ErrEmpty reports an answer with nothing to show.
var ErrEmpty = errors.New("render: empty reply")

// Answer is what Lisa says in reply to one invocation.
type Answer struct {
	// Markdown is the model's answer. It is untrusted: raw HTML in it is
	// shown as text, never interpreted.
	Markdown string
	// Sources are listed after the answer by the renderer itself; the
	// model never writes that section.
	Sources []Source
	// InReplyTo is the message being answered.
	InReplyTo Invoking
	// CheckLinks makes the links and bare URLs of Markdown whose http(s)
	// URL is not one of KnownURLs text rather than links (see verify.go).
	CheckLinks bool
	// KnownURLs are the URLs that appeared in the invocation (the
	// invoking message, the room context, successful tool results).
	KnownURLs []string
}

// Rendered is a reply's content and what the renderer changed in it.
type Rendered struct {
	// Content is the exact JSON content of the m.room.message.
	Content []byte
	// LinksUnverified counts the links and URLs of the answer shown as
	// text because their URL was not known (Answer.CheckLinks).
	LinksUnverified int
}

// Renderer renders replies. It is safe for concurrent use.
type Renderer struct {
	md     goldmark.Markdown
	policy *bluemonday.Policy
	text   gmhtml.Writer
	budget int // bytes of JSON content
}

// New returns a Renderer.
func New() *Renderer {
	text := gmhtml.NewWriter()
	md := goldmark.New(
		// Goldmark's parser, held to the bounds of bounds.go.
		goldmark.WithParser(newParser()),
		goldmark.WithExtensions(strikethrough{}, extension.Table, extension.Linkify),
		// No html.WithUnsafe: raw HTML is never passed through. The
		// overrides below show it as escaped text and apply Lisa's link
		// and image rules.
		goldmark.WithRendererOptions(renderer.WithNodeRenderers(
			util.Prioritized(nodeRenderer{text: text}, 100),
		)),
	)
	return &Renderer{md: md, policy: newPolicy(), text: text, budget: MaxContentBytes}
}

// newPolicy allows the part of Matrix's HTML subset that Lisa produces:
// links only to http, https and matrix URLs, ordered-list start numbers
// and language classes on code.
func newPolicy() *bluemonday.Policy {
	p := bluemonday.NewPolicy()
	p.AllowElements("p", "br", "hr", "strong", "b", "em", "i", "del", "s", "u", "code", "pre", "blockquote",
		"ul", "ol", "li", "h1", "h2", "h3", "h4", "h5", "h6", "table", "thead", "tbody", "tr", "th", "td", "sup", "sub")
	// "a" is not in the list above: an <a> whose href is removed is
	// dropped with its label kept as text.
	p.AllowAttrs("href").OnElements("a")
	p.AllowURLSchemes("http", "https", "matrix")
	p.RequireParseableURLs(true)
	p.AllowRelativeURLs(false)
	p.AllowAttrs("start").Matching(regexp.MustCompile(`^[0-9]{1,6}$`)).OnElements("ol")
	p.AllowAttrs("class").Matching(regexp.MustCompile(`^language-[A-Za-z0-9_+-]{1,32}$`)).OnElements("code")
	return p
}

// rendered is one Markdown document in both formats.
type rendered struct {
	html, plain string
}

// answer parses markdown once and renders the sanitised HTML and the
// plain text from the same tree.
func (r *Renderer) answer(markdown string) (rendered, error) {
	a, _, err := r.answerWithin(markdown, math.MaxInt, nil)
	return a, err
}

// answerWithin is answer for a reply with room for limit bytes of answer.
// When the plain text and the HTML before sanitising already take more,
// it returns their size as over, and no answer, without paying for the
// sanitiser: the caller has to cut the Markdown anyway. A non-nil v
// checks the answer's links (see verify.go) and counts those shown as
// text.
func (r *Renderer) answerWithin(markdown string, limit int, v *linkVerifier) (a rendered, over int, err error) {
	src := []byte(markdown)
	doc := r.md.Parser().Parse(text.NewReader(src))
	limitNesting(doc, 0)
	showTargets(doc, src, r.text, v)
	var buf bytes.Buffer
	if err := r.md.Renderer().Render(&buf, src, doc); err != nil {
		return rendered{}, 0, fmt.Errorf("render: %w", err)
	}
	plain := plainText(doc, src, r.text)
	if n := buf.Len() + len(plain); n > limit {
		return rendered{}, n, nil
	}
	// Character references such as "&#1;" decode to control characters
	// after the source was cleaned, so both bodies are cleaned again.
	return rendered{
		html:  strings.TrimSpace(cleanText(r.policy.Sanitize(buf.String()))),
		plain: cleanText(plain),
	}, 0, nil
}

// HTML renders markdown to sanitized HTML, without sources or limits.
func (r *Renderer) HTML(markdown string) (string, error) {
	a, err := r.answer(cleanText(markdown))
	return a.html, err
}

// Reply returns the JSON content of an m.text reply to the event
// inReplyTo, with no sources, no fallback quote and an empty m.mentions:
// the sender is unknown, so it pings nobody.
func (r *Renderer) Reply(markdown, inReplyTo string) ([]byte, error) {
	return r.Render(Answer{Markdown: markdown, InReplyTo: Invoking{EventID: inReplyTo}})
}

// Render returns the exact JSON content of the m.room.message answering
// a.InReplyTo: the answer in HTML and plain text, the Sources section, an
// escaped and bounded fallback quote of the invoking message (when its
// sender is known), the reply relation, m.mentions naming only the
// invoking sender (empty when the sender is unknown or not a valid user
// ID) and InvocationKey. A reply to an event in a thread
// (InReplyTo.ThreadRoot) is sent in that thread: m.relates_to carries
// rel_type m.thread with the root, is_falling_back false and the
// m.in_reply_to to the invoking event. Links to users, which clients show as pills, are
// kept as text, so the reply mentions nobody else. The content never
// exceeds MaxContentBytes: sources are dropped from the end until they
// and the fallback take at most half of it, and an answer that still does
// not fit is cut at a block or rune boundary and ends with
// TruncatedMarker. An answer with more than
// maxMarkup line breaks and markup characters is cut the same way before
// it is parsed, and parsing is bounded (see bounds.go). The output is
// deterministic.
func (r *Renderer) Render(a Answer) ([]byte, error) {
	out, err := r.RenderReply(a)
	return out.Content, err
}

// RenderReply is Render, and says what the renderer changed: with
// a.CheckLinks, the links and bare URLs of the answer whose URL is not
// one of a.KnownURLs are shown as text (see verify.go) and counted.
func (r *Renderer) RenderReply(a Answer) (Rendered, error) {
	if a.InReplyTo.EventID == "" {
		return Rendered{}, errors.New("render: no event to reply to")
	}
	md := strings.TrimSpace(cleanText(a.Markdown))
	if md == "" {
		return Rendered{}, ErrEmpty
	}
	m := message{eventID: a.InReplyTo.EventID, fallback: replyFallback(a.InReplyTo), asker: askerID(a.InReplyTo.Sender),
		thread: threadRoot(a.InReplyTo.ThreadRoot)}

	// The parts that do not depend on the answer, with the truncation
	// marker counted, may take half the budget.
	srcs := acceptSources(a.Sources)
	var fixed int
	for {
		// The section is escaped by construction; sanitising it too
		// keeps every HTML byte Lisa sends under the same policy.
		m.sources = rendered{html: r.policy.Sanitize(sourcesHTML(srcs)), plain: sourcesPlain(srcs)}
		b, err := m.encode(rendered{}, true)
		if err != nil {
			return Rendered{}, err
		}
		fixed = len(b)
		if fixed <= r.budget/2 || len(srcs) == 0 {
			break
		}
		srcs = srcs[:len(srcs)-1]
	}
	if fixed > r.budget {
		return Rendered{}, fmt.Errorf("render: reply envelope of %d bytes exceeds the %d-byte budget", fixed, r.budget)
	}

	truncated := false
	if len(md) > r.budget {
		md, truncated = cutMarkdown(md, r.budget), true
	}
	if n := markupEnd(md, maxMarkup); n < len(md) {
		md, truncated = cutMarkdown(md, n), true
	}
	var v *linkVerifier
	if a.CheckLinks {
		v = newLinkVerifier(a.KnownURLs)
	}
	for {
		v.reset() // counts the links of this cut of the answer
		ans, over, err := r.answerWithin(md, r.budget-fixed, v)
		if err != nil {
			return Rendered{}, err
		}
		size := fixed + over
		if over == 0 {
			if strings.TrimSpace(ans.plain) == "" && !truncated {
				// Nothing visible, e.g. "[]()" or "![](x)": an empty
				// paragraph is not an answer.
				return Rendered{}, ErrEmpty
			}
			b, err := m.encode(ans, truncated)
			if err != nil {
				return Rendered{}, err
			}
			if len(b) <= r.budget {
				return Rendered{Content: b, LinksUnverified: v.count()}, nil
			}
			size = len(b)
		}
		if md == "" {
			return Rendered{}, fmt.Errorf("render: reply of %d bytes exceeds the %d-byte budget", size, r.budget)
		}
		// Shrink the Markdown in proportion to the overshoot, with a
		// margin, and always by at least a tenth.
		n := int(int64(len(md)) * int64(r.budget-fixed) / int64(max(1, size-fixed)))
		md, truncated = cutMarkdown(md, min(n*9/10, len(md)*9/10)), true
	}
}

// askerID returns sender as the user m.mentions names, or "" when it is
// not a user ID: "@", a localpart of printable ASCII without ":", ":",
// and a server name (letters, digits, ".", "-", an IPv6 literal's
// brackets and colons, a port), at most 255 bytes in all.
func askerID(sender string) string {
	if len(sender) > maxSenderBytes || !strings.HasPrefix(sender, "@") {
		return ""
	}
	local, server, ok := strings.Cut(sender[1:], ":")
	if !ok || local == "" || server == "" {
		return ""
	}
	for i := 0; i < len(local); i++ {
		if c := local[i]; c < 0x21 || c > 0x7e {
			return ""
		}
	}
	for i := 0; i < len(server); i++ {
		c := server[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte(".-:[]", c) >= 0) {
			return ""
		}
	}
	return sender
}

// cutMarkdown shortens md to at most n bytes, preferring to cut between
// blocks (at a blank line), then at a line end, and otherwise at a rune
// boundary, as long as that keeps at least half of the allowance.
func cutMarkdown(md string, n int) string {
	if n >= len(md) {
		return md
	}
	s := truncateBytes(md, n)
	if i := strings.LastIndex(s, "\n\n"); i >= len(s)/2 {
		s = s[:i]
	} else if i := strings.LastIndexByte(s, '\n'); i >= len(s)/2 {
		s = s[:i]
	}
	return strings.TrimRight(s, " \t\n")
}

// message holds the parts of a reply other than the answer itself.
type message struct {
	eventID  string
	fallback fallback
	sources  rendered
	asker    string // the user m.mentions names, or ""
	thread   string // the thread root the reply is sent in, or ""
}

// content is the JSON shape of the reply, in a fixed field order.
type content struct {
	MsgType       string    `json:"msgtype"`
	Body          string    `json:"body"`
	Format        string    `json:"format"`
	FormattedBody string    `json:"formatted_body"`
	RelatesTo     relatesTo `json:"m.relates_to"`
	Mentions      mentions  `json:"m.mentions"`
	Invocation    string    `json:"org.lisabot.invocation"`
}

// mentions is m.mentions: the asker, so their client notifies them, and
// nobody else. Without a known asker it is empty and pings nobody.
type mentions struct {
	UserIDs []string `json:"user_ids,omitempty"`
}

// relatesTo is m.relates_to: a rich reply to the invoking event and, in
// a thread, the thread relation. The reply in a thread is a real reply,
// not a thread fallback, hence is_falling_back false.
type relatesTo struct {
	RelType       string `json:"rel_type,omitempty"`
	EventID       string `json:"event_id,omitempty"`
	IsFallingBack *bool  `json:"is_falling_back,omitempty"`
	InReplyTo     struct {
		EventID string `json:"event_id"`
	} `json:"m.in_reply_to"`
}

const (
	// threadRel is the thread relation type.
	threadRel = "m.thread"
	// maxEventIDBytes bounds an event ID, as the Matrix spec does.
	maxEventIDBytes = 255
)

// threadRoot returns root if it is a plausible event ID ("$" and at most
// 255 bytes of printable ASCII), else "".
func threadRoot(root string) string {
	if len(root) < 2 || len(root) > maxEventIDBytes || root[0] != '$' {
		return ""
	}
	for i := 0; i < len(root); i++ {
		if c := root[i]; c < 0x21 || c > 0x7e {
			return ""
		}
	}
	return root
}

// encode assembles both bodies (fallback, answer, truncation marker,
// sources) and marshals the content.
func (m message) encode(ans rendered, truncated bool) ([]byte, error) {
	var h, t []string
	add := func(hs, ts string) {
		if hs != "" {
			h = append(h, hs)
		}
		if ts != "" {
			t = append(t, ts)
		}
	}
	add(ans.html, ans.plain)
	if truncated {
		add("<p>"+TruncatedMarker+"</p>", TruncatedMarker)
	}
	add(m.sources.html, m.sources.plain)

	c := content{
		MsgType:       "m.text",
		Body:          strings.Join(t, "\n\n"),
		Format:        "org.matrix.custom.html",
		FormattedBody: m.fallback.html + strings.Join(h, "\n"),
		Invocation:    m.eventID,
	}
	if m.fallback.plain != "" {
		c.Body = m.fallback.plain + "\n\n" + c.Body
	}
	c.RelatesTo.InReplyTo.EventID = m.eventID
	if m.thread != "" {
		falling := false
		c.RelatesTo.RelType, c.RelatesTo.EventID, c.RelatesTo.IsFallingBack = threadRel, m.thread, &falling
	}
	if m.asker != "" {
		c.Mentions.UserIDs = []string{m.asker}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // smaller, and the content is never embedded in HTML
	if err := enc.Encode(c); err != nil {
		return nil, fmt.Errorf("render: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// Compile-time check that the overrides satisfy goldmark's interface.
var _ renderer.NodeRenderer = nodeRenderer{}
