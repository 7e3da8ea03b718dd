package roomctx

import (
	"errors"
	"hash/maphash"
	"io"
	"strconv"
	"strings"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// Bounds on converting one message's HTML (issue #15). Without them a
// 56 KB formatted_body of one paragraph, 500 nested <b> elements and
// thousands of "<p>x" took 34 s of CPU and 3.5 GB: the HTML parser
// reopens every unclosed formatting element in every paragraph, so its
// output grows with the product of the two counts, and the Markdown
// converter copies every level again. A bound that is hit makes
// htmlToText return "", and the message shows its plain body instead.
const (
	// maxHTMLBytes bounds the HTML read at all. A Matrix event is at most
	// 65,536 bytes of JSON (spec: "Size limits"), so no longer
	// formatted_body comes from a valid event, and every linear pass below
	// stays within a few milliseconds.
	maxHTMLBytes = 64 << 10
	// maxHTMLTokens bounds tags and text runs. A 64 KiB answer of prose,
	// lists, links and highlighted code has a few thousand; only dense
	// tag soup gets near the limit. Each token costs a few parser nodes at
	// most, in our parse and again in the converter's, so this keeps both
	// within a few MiB and milliseconds.
	maxHTMLTokens = 16 << 10
	// maxHTMLDepth bounds element nesting in the parsed message. Ten
	// levels of nested lists with emphasis inside need about 25; the
	// parser's scope checks walk the open elements at every token, so the
	// depth multiplies its CPU time. It is enforced by the parser itself:
	// sentinel elements fill its fixed stack of 512 up to this depth.
	maxHTMLDepth = 32
	// shallowDepth bounds the depth, as estimated before parsing, up to
	// which a message is parsed without filling the parser's stack: its
	// scope checks then walk at most this many elements, and such a
	// message has few tokens (the estimate grows by at least three per
	// start tag), so the parse costs little. Its depth is then checked on
	// the tree the parser built. Filling the stack costs the parser 478
	// more elements (about 0.15 ms); the estimate is loose (one bold word
	// makes it 44), so without this most formatted messages paid that.
	shallowDepth = 128
	// maxStackWalks bounds the tags that make the parser walk its whole
	// stack of open elements (form start and end tags, template end tags,
	// table start and end tags), which the sentinels below make 512
	// elements deep. A message with more than a few tables is rare.
	maxStackWalks = 256
	// maxReopenedElements bounds the parser's work on unclosed formatting
	// elements (reconstruction and the adoption agency), as a sound
	// over-estimate taken before parsing. Short messages stay well below;
	// above it formatting tags are parsed as plain elements, which gives
	// the same tree for well-formed HTML and never copies elements.
	maxReopenedElements = 4 << 10
	// maxRenderedBytes bounds the sanitized HTML handed to the Markdown
	// converter, four times the input: escaping makes a few characters up
	// to five times longer (& as &amp;), but not all of them.
	maxRenderedBytes = 4 * maxHTMLBytes
	// maxMarkdownWork bounds the estimated bytes the Markdown converter
	// allocates. It copies a node's text once per enclosing element and
	// prefixes every line once per enclosing quote or list, so deep
	// structure around long text costs more than the text; a 64 KiB
	// message of prose, links and lists needs a few MiB.
	maxMarkdownWork = 8 << 20
	// maxTextBytes bounds the converted text, four times the input: list
	// and quote prefixes add to each line, and more than that is
	// structure around little text.
	maxTextBytes = 4 * maxHTMLBytes
)

const (
	// sentinelTag wraps the message while parsing to cap its depth; the
	// message's own elements of that name are parsed as "object", which
	// the parser treats alike and sanitize drops alike. It is special and
	// a scope boundary, so the parser's scans stop there, and its end tag
	// never reaches the parser.
	sentinelTag = "applet"
	// sentinelCount fills the parser's stack (512 elements, html and body
	// included) so that more than maxHTMLDepth levels of message make it
	// fail.
	sentinelCount = 512 - 2 - maxHTMLDepth
	// renamePrefix marks element names changed for parsing; sanitize
	// removes one. Formatting elements get it when parsed as plain
	// elements, and names that already have it get it twice, so a
	// message cannot forge a renamed element.
	renamePrefix = "lisa-"
	// adoptionCopies bounds the elements one run of the adoption agency
	// copies: at most eight outer rounds of one copy and three inner ones.
	adoptionCopies = 8 * (1 + 3)
	// noahsArk is how many identical formatting elements the parser keeps
	// in its list of active formatting elements.
	noahsArk = 3
)

// isFormatting reports whether the HTML parser tracks the element as a
// formatting element, reopening it where a block closed it.
func isFormatting(tag string) bool {
	switch tag {
	case "a", "b", "big", "code", "em", "font", "i", "nobr", "s", "small", "strike", "strong", "tt", "u":
		return true
	}
	return false
}

// isRawText reports whether the tokenizer reads the element's content as
// one run of text: raw text, or escapable raw text for textarea and title.
func isRawText(tag string) bool {
	switch tag {
	case "iframe", "noembed", "noframes", "noscript", "plaintext", "script", "style", "textarea", "title", "xmp":
		return true
	}
	return false
}

// keptAttr reports whether an attribute reaches the parser: those the
// converter reads (link targets, code languages, list starts, spoilers,
// maths) and those that change how an element parses. Dropping the others
// keeps hostile attributes from being copied or rendered.
func keptAttr(key string) bool {
	switch key {
	case "href", "class", "start", "data-mx-spoiler", "data-mx-maths",
		"type", "color", "face", "size", "encoding":
		return true
	}
	return false
}

// validName reports whether s is a tag name worth keeping: a letter, then
// letters, digits and - : . _. Other names (the tokenizer accepts almost
// any) could mean something else once written out again.
func validName(s []byte) bool {
	if len(s) == 0 || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == ':' || c == '.' || c == '_') {
			return false
		}
	}
	return true
}

// parseName is the element name the parser sees for a message's tag
// named name, or "" to drop the tag. Document structure tags are dropped
// (inside the body the parser ignores them anyway), and sentinel and
// renamed names are escaped.
func parseName(name []byte) string {
	if !validName(name) {
		return ""
	}
	s := atom.Lookup(name).String()
	if s == "" {
		s = string(name)
	}
	switch {
	case s == "html" || s == "head" || s == "body":
		return ""
	case s == sentinelTag:
		return "object"
	case strings.HasPrefix(s, renamePrefix):
		return renamePrefix + s
	}
	return s
}

// prepareHTML turns a message's HTML into what htmlToText parses and
// says how many sentinel elements wrap it, or reports that it is too
// large. The result is the message as the tokenizer reads it, written out
// again so that the parser reads exactly the same tags whatever mode it
// tokenizes in: text is escaped, comments and doctypes are gone, and tags
// keep only valid names and kept attributes. A doctype selects standards
// mode (a table then closes a paragraph, so no block ends up inside one),
// and sentinel elements put the message in the body and cap its depth.
// Runs of text the parser would join are kept apart (see separate).
// Formatting elements become plain ones when the parser could spend too
// long reopening them (see reopenBound).
//
// check reports that the message was not proven shallow enough before
// parsing: the caller must check the depth of the tree (see treeDepth).
func prepareHTML(src string) (prepared string, sentinels int, check, ok bool) {
	if len(src) > maxHTMLBytes {
		return "", 0, false, false
	}
	p := &htmlPrep{z: html.NewTokenizer(strings.NewReader(src))}
	// The message is written twice, with formatting elements as they are
	// and as plain elements; the bounds decide which one is parsed.
	p.out.Grow(len(src) + len(src)/4)
	if !p.readTokens() {
		return "", 0, false, false
	}
	prepared, sentinels, check = p.wrap()
	return prepared, sentinels, check, true
}

// htmlPrep is prepareHTML's state while it reads a message token by
// token.
type htmlPrep struct {
	z      *html.Tokenizer
	out    twin
	bound  reopenBound
	tokens int    // tokens read
	walks  int    // tags that make the parser walk its stack
	raw    string // the raw text element whose content comes next
	joined bool   // whether text written now could join the last text
}

// readTokens writes out every token of the message, and reports false if
// the tokenizer failed or the message exceeds a bound.
func (p *htmlPrep) readTokens() bool {
	for {
		tt := p.z.Next()
		if tt == html.ErrorToken {
			return errors.Is(p.z.Err(), io.EOF)
		}
		if p.tokens++; p.tokens > maxHTMLTokens {
			return false
		}
		switch tt {
		case html.TextToken:
			p.text()
		case html.StartTagToken, html.SelfClosingTagToken, html.EndTagToken:
			if !p.tag(tt) {
				return false
			}
			continue
		}
		p.raw = ""
	}
}

// text writes out a text token, escaped as its element's content needs,
// kept apart from the text before it if the parser could join them.
func (p *htmlPrep) text() {
	text := p.z.Text()
	if p.joined {
		separate(&p.out, text)
	}
	switch p.raw {
	case "", "textarea", "title":
		p.out.escapeText(text, true)
	default: // taken literally, but must not start a tag
		p.out.escapeText(text, false)
	}
	p.joined = true
}

// tag writes out a start, self-closing or end tag of type tt, or drops
// it, and reports false if the message walks the parser's stack too
// often.
func (p *htmlPrep) tag(tt html.TokenType) bool {
	name, hasAttr := p.z.TagName()
	p.raw = ""
	if tt != html.EndTagToken && isRawText(string(name)) {
		p.raw = string(name)
	}
	s := parseName(name)
	if s == "" {
		return true
	}
	if walksStack(s, tt == html.EndTagToken) {
		if p.walks++; p.walks > maxStackWalks {
			return false
		}
	}
	formatting := isFormatting(s)
	if tt == html.EndTagToken {
		p.bound.end(formatting)
		p.out.tag("</", s, formatting)
		p.out.writeByte('>')
		return true
	}
	p.joined = p.joined && mayIgnore(s)
	p.out.tag("<", s, formatting)
	key := p.attrs(s, formatting, hasAttr)
	if tt == html.SelfClosingTagToken {
		p.out.WriteString("/>")
	} else {
		p.out.writeByte('>')
	}
	p.bound.start(s, formatting, key)
	return true
}

// attrs writes out the kept attributes of the current tag, named s, if
// hasAttr says it has any, and returns the key that tells formatting
// elements apart by name and attributes.
func (p *htmlPrep) attrs(s string, formatting, hasAttr bool) uint64 {
	var key maphash.Hash
	if formatting {
		key.SetSeed(variantSeed)
		key.WriteString(s)
	}
	for hasAttr {
		var k, v []byte
		k, v, hasAttr = p.z.TagAttr()
		if !keptAttr(string(k)) {
			continue
		}
		p.out.WriteString(" " + string(k) + `="`)
		p.out.escapeAttr(v)
		p.out.writeByte('"')
		if formatting {
			key.WriteByte(0)
			key.Write(k)
			key.WriteString("=" + strconv.Itoa(len(v)) + ":")
			key.Write(v)
		}
	}
	return key.Sum64()
}

// wrap picks the written message the bounds allow, with formatting
// elements as they are or as plain elements, and puts the doctype and
// the sentinels before it. It returns the result, the sentinel count and
// whether the parsed tree's depth must be checked.
func (p *htmlPrep) wrap() (string, int, bool) {
	plain := p.bound.reopen > maxReopenedElements
	body := p.out.real.String()
	depth := p.bound.depth()
	if plain {
		body = p.out.plain.String()
		depth -= p.bound.reopen // no element is reopened
	}
	sentinels := 1 // so the message starts in the body
	if depth > shallowDepth {
		sentinels = sentinelCount
	}
	var b strings.Builder
	b.Grow(len(body) + 16 + sentinels*(len(sentinelTag)+2))
	b.WriteString("<!DOCTYPE html>")
	for range sentinels {
		b.WriteString("<" + sentinelTag + ">")
	}
	b.WriteString(body)
	return b.String(), sentinels, sentinels == 1 && depth > maxHTMLDepth
}

// treeDepth returns the depth of the element tree below n (n's children
// are at depth 1), counting no further than limit+1.
func treeDepth(n *html.Node, limit int) int {
	deepest := 0
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if c.Type != html.ElementNode {
			continue
		}
		d := 1
		if limit > 0 {
			d += treeDepth(c, limit-1)
		}
		deepest = max(deepest, d)
		if deepest > limit {
			break
		}
	}
	return deepest
}

// variantSeed seeds the hashes that tell formatting elements apart.
var variantSeed = maphash.MakeSeed()

// reopenBound bounds, token by token, the elements the HTML parser will
// reopen or copy, and the depth of what it builds.
//
// The parser copies an element of its list of active formatting elements
// when the element has been popped off the stack of open elements; only a
// token that pops can do that, and it pops at most the formatting
// elements open, which are no more than the list holds and no more than
// maxHTMLDepth. The list holds at most noahsArk elements with the same
// name and attributes. Text and formatting start tags other than a and
// nobr never pop. Each run of the adoption agency copies at most
// adoptionCopies more.
type reopenBound struct {
	reopen int            // bound on elements reopened or copied
	starts int            // start tags
	listed int            // bound on the list of active formatting elements
	seen   map[uint64]int // formatting elements by name and attributes
}

// start counts a start tag; key tells formatting elements apart.
func (r *reopenBound) start(tag string, formatting bool, key uint64) {
	r.starts++
	popped := min(r.listed, maxHTMLDepth)
	if !formatting {
		r.reopen += popped
		return
	}
	if tag == "a" || tag == "nobr" {
		r.reopen += popped + adoptionCopies
	}
	if r.seen == nil {
		r.seen = map[uint64]int{}
	}
	if r.seen[key]++; r.seen[key] <= noahsArk {
		r.listed++
	}
}

// end counts an end tag.
func (r *reopenBound) end(formatting bool) {
	r.reopen += min(r.listed, maxHTMLDepth)
	if formatting {
		r.reopen += adoptionCopies
	}
}

// depth bounds the depth of the parsed message: html and body, at most
// three elements for each start tag (a table cell implies a body and a
// row), one implied by an end tag, and every reopened element.
func (r *reopenBound) depth() int {
	return 3 + 3*r.starts + 1 + r.reopen
}

// twin is the message written out twice: real with formatting elements
// as they are, plain with them renamed.
type twin struct{ real, plain strings.Builder }

// Grow grows both.
func (t *twin) Grow(n int) {
	t.real.Grow(n)
	t.plain.Grow(n)
}

// WriteString writes s to both.
func (t *twin) WriteString(s string) {
	t.real.WriteString(s)
	t.plain.WriteString(s)
}

// write writes p to both.
func (t *twin) write(p []byte) {
	t.real.Write(p)
	t.plain.Write(p)
}

// writeByte writes c to both.
func (t *twin) writeByte(c byte) {
	t.real.WriteByte(c)
	t.plain.WriteByte(c)
}

// tag writes the opening of a tag, "<" or "</" and its name, renaming
// formatting elements in plain.
func (t *twin) tag(open, name string, formatting bool) {
	t.WriteString(open)
	if formatting {
		t.plain.WriteString(renamePrefix)
	}
	t.WriteString(name)
}

// escapeText writes text escaped for element content: < always, so no
// tag starts in it, and & when the parser decodes entities there.
func (t *twin) escapeText(text []byte, amp bool) {
	for len(text) > 0 {
		i := 0
		for i < len(text) && text[i] != '<' && (text[i] != '&' || !amp) {
			i++
		}
		t.write(text[:i])
		if i == len(text) {
			return
		}
		if text[i] == '<' {
			t.WriteString("&lt;")
		} else {
			t.WriteString("&amp;")
		}
		text = text[i+1:]
	}
}

// escapeAttr writes an attribute value escaped for double quotes.
func (t *twin) escapeAttr(val []byte) {
	for _, c := range val {
		switch c {
		case '&':
			t.WriteString("&amp;")
		case '"':
			t.WriteString("&#34;")
		case '<':
			t.WriteString("&lt;")
		default:
			t.writeByte(c)
		}
	}
}

// walksStack reports whether the parser may walk its whole stack of open
// elements for a start or end tag: to look for a template, or to find its
// insertion mode after closing a table or template.
func walksStack(tag string, end bool) bool {
	switch tag {
	case "form", "table":
		return true
	case "template":
		return end
	}
	return false
}

// mayIgnore reports whether the parser may drop a start tag without
// adding a node, so text before and after it could join. (End tags never
// separate text.)
func mayIgnore(tag string) bool {
	switch tag {
	case "caption", "col", "colgroup", "frame", "frameset", "head", "html", "body",
		"tbody", "td", "tfoot", "th", "thead", "tr", "form", "select":
		return true
	}
	return false
}

// separate writes a node that keeps the text following it from joining
// the text before it: the parser appends a text token to a preceding
// text node by copying both, so many small runs of text between ignored
// tags would cost time and memory quadratic in their number. A comment
// is inserted where white space goes, an empty <wbr> where other text
// goes (also before a table, where a comment would not go); sanitize
// removes both.
func separate(b *twin, text []byte) {
	for _, c := range text {
		switch c {
		case ' ', '\t', '\n', '\f', '\r':
		default:
			b.WriteString("<wbr>")
			return
		}
	}
	b.WriteString("<!---->")
}

// unwrapSentinels moves the message's nodes out of the sentinels
// sentinel elements prepareHTML put around them, into the body. It
// reports false if the parsed document does not have that shape.
func unwrapSentinels(doc *html.Node, sentinels int) bool {
	body := findBody(doc)
	if body == nil {
		return false
	}
	first := body.FirstChild
	n := body
	for range sentinels {
		c := n.FirstChild
		if c == nil || c != n.LastChild || c.Type != html.ElementNode || c.Data != sentinelTag {
			return false
		}
		n = c
	}
	moveChildren(n, body)
	body.RemoveChild(first)
	return true
}

// findBody returns the body element of a parsed document.
func findBody(doc *html.Node) *html.Node {
	for h := doc.FirstChild; h != nil; h = h.NextSibling {
		if h.Type == html.ElementNode && h.DataAtom == atom.Html {
			for b := h.FirstChild; b != nil; b = b.NextSibling {
				if b.Type == html.ElementNode && b.DataAtom == atom.Body {
					return b
				}
			}
		}
	}
	return nil
}

// errTooLarge stops rendering at maxRenderedBytes.
var errTooLarge = errors.New("rendered HTML too large")

// cappedBuilder is a strings.Builder that fails once it would hold more
// than max bytes.
type cappedBuilder struct {
	strings.Builder
	max int
}

// Write appends p.
func (c *cappedBuilder) Write(p []byte) (int, error) {
	if c.Len()+len(p) > c.max {
		return 0, errTooLarge
	}
	return c.Builder.Write(p)
}

// WriteString appends s.
func (c *cappedBuilder) WriteString(s string) (int, error) {
	if c.Len()+len(s) > c.max {
		return 0, errTooLarge
	}
	return c.Builder.WriteString(s)
}

// WriteByte appends b.
func (c *cappedBuilder) WriteByte(b byte) error {
	if c.Len()+1 > c.max {
		return errTooLarge
	}
	return c.Builder.WriteByte(b)
}

// WriteRune appends r.
func (c *cappedBuilder) WriteRune(r rune) (int, error) {
	if c.Len()+4 > c.max {
		return 0, errTooLarge
	}
	return c.Builder.WriteRune(r)
}
