package roomctx

import (
	"strconv"
	"strings"

	"golang.org/x/net/html"
)

// The Markdown converter (mautrix's format.HTMLToMarkdownFull) parses the
// sanitized HTML again and turns every node into a string, copying the
// strings of its children. checkMarkdown makes sure that second parse
// builds the same tree without reopening anything, and estimates what the
// conversion allocates, from the tree.

// markdownOverhead is what a conversion allocates whatever the message.
const markdownOverhead = 64 << 10

// mdSize bounds the Markdown of a subtree: its length, its line breaks
// and its longest run of backticks.
type mdSize struct{ out, nl, run int }

// mdCheck walks a sanitized tree. work is the estimate so far; it stops
// counting once it exceeds maxMarkdownWork.
type mdCheck struct {
	work     int
	unstable bool
	open     []string // names of the elements enclosing the current one
}

// checkMarkdown reports whether converting the sanitized message in body
// to Markdown stays within maxMarkdownWork and maxTextBytes, and whether
// the converter's parse of its rendering gives the same tree: it does
// unless an element would close or reopen one around it (a block in a
// paragraph, a link in a link, ...). Rendered HTML that parses into a
// different tree could make the converter's parser reopen elements, at a
// cost we did not bound.
func checkMarkdown(body *html.Node) bool {
	c := &mdCheck{open: []string{"html", "body"}, work: markdownOverhead}
	var size mdSize
	for n := body.FirstChild; n != nil; n = n.NextSibling {
		s, block := c.node(n, false)
		size = size.then(s, block)
	}
	c.work += 4 * size.out // the document, html and body levels copy it all
	return !c.unstable && c.work <= maxMarkdownWork && size.out <= maxTextBytes
}

// then is s followed by the Markdown of a sibling, which the converter
// puts on lines of its own if it is a block.
func (s mdSize) then(t mdSize, block bool) mdSize {
	if block {
		t.out += 2
		t.nl += 2
	}
	return mdSize{s.out + t.out, s.nl + t.nl, s.run + t.run}
}

// isMarkdownBlock reports whether the converter puts an element on lines
// of its own (format.BlockTags).
func isMarkdownBlock(tag string) bool {
	switch tag {
	case "p", "h1", "h2", "h3", "h4", "h5", "h6", "ol", "ul", "pre", "blockquote", "div", "hr", "table":
		return true
	}
	return false
}

// node bounds the Markdown of n, adds what producing it allocates to
// c.work, and reports whether n is a block.
func (c *mdCheck) node(n *html.Node, pre bool) (mdSize, bool) {
	if c.work > maxMarkdownWork || c.unstable {
		return mdSize{}, false
	}
	switch n.Type {
	case html.TextNode:
		return c.text(n, pre), false
	case html.ElementNode:
	default:
		return mdSize{}, false
	}
	tag := n.Data
	if c.reparses(n) {
		c.unstable = true
		return mdSize{}, false
	}
	attrs, escAttrs := attrSizes(n)
	kids := c.children(n, pre || tag == "pre")
	out, extra := elementMarkdown(n, kids, attrs)
	// Each level builds its string (growing a buffer), wraps it and
	// copies it into its parent's, and keeps a tagged string per child;
	// the converter's parser reads the tag and its attributes as rendered
	// (escaped) into a growing buffer, decodes them and keeps the node.
	c.work += 3*out.out + extra + 64*kids.count + 4*escAttrs + 2*attrs + 512
	// Its stack of enclosing tag names is shared, and copied to twice the
	// size when full: at 4, 8, 16, ... names.
	if d := len(c.open); d >= 4 && d&(d-1) == 0 {
		c.work += 48 * d
	}
	return out, isMarkdownBlock(tag)
}

// text bounds the Markdown of text node n and adds what producing it
// allocates to c.work; pre says whether it is inside a pre element.
func (c *mdCheck) text(n *html.Node, pre bool) mdSize {
	s := mdSize{out: len(n.Data), run: longestRun(n.Data, '`')}
	if pre {
		s.nl = strings.Count(n.Data, "\n")
	}
	// Parsing it as rendered (escaped) into a growing buffer, decoding
	// it, collapsing white space, and the node's tagged string.
	c.work += 4*escapedSize(n.Data) + 3*len(n.Data) + 192
	return s
}

// attrSizes is the length of n's attributes' keys and values, as they
// are and as rendered (escaped, with an equals sign, quotes and a space).
func attrSizes(n *html.Node) (attrs, escAttrs int) {
	for _, a := range n.Attr {
		attrs += len(a.Key) + len(a.Val)
		escAttrs += len(a.Key) + escapedSize(a.Val) + 4
	}
	return attrs, escAttrs
}

// mdChildren is what an element's children add up to: the bound on their
// Markdown, how many there are, how many are list items, and the lines
// of those items.
type mdChildren struct {
	in                  mdSize
	count, items, lines int
}

// children checks the children of element n, with n open around them;
// pre says whether they are inside a pre element.
func (c *mdCheck) children(n *html.Node, pre bool) mdChildren {
	var k mdChildren
	c.open = append(c.open, n.Data)
	for ch := n.FirstChild; ch != nil; ch = ch.NextSibling {
		s, block := c.node(ch, pre)
		k.in = k.in.then(s, block)
		k.count++
		if ch.Type == html.ElementNode && ch.Data == "li" {
			k.items++
			k.lines += s.nl + 1
		}
	}
	c.open = c.open[:len(c.open)-1]
	return k
}

// elementMarkdown bounds the Markdown of element n from that of its
// children and the length of its attributes, and returns it with what
// producing it allocates beyond building, wrapping and copying it.
func elementMarkdown(n *html.Node, kids mdChildren, attrs int) (mdSize, int) {
	in := kids.in
	out := in
	extra := 0
	switch n.Data {
	case "br":
		out = mdSize{out: 1, nl: 1}
	case "hr":
		out = mdSize{out: 5, nl: 2}
	case "code", "tt":
		// Fenced with one backtick more than its longest run, after
		// replacing line breaks.
		fence := min(in.run, in.out) + 1
		out.out += 2*fence + 2
		out.run = in.run + 1
		extra = 2 * out.out
	case "pre":
		fence := max(3, min(in.run, in.out)+1)
		out.out += 2*fence + 2 + 32 // and a language of up to 32 bytes
		out.nl += 2
		out.run = max(in.run, fence)
		extra = 2 * out.out
	case "blockquote":
		// "> " on every line, split and joined again.
		out.out += 2 * (in.nl + 1)
		extra = 2*out.out + 32*(in.nl+1)
	case "ol", "ul":
		// A marker on every item, as wide as its indent on every further
		// line, and a line break between items; split and joined again.
		out.out += listIndent(n, kids.count)*kids.lines + kids.items
		out.nl += kids.items
		extra = 2*out.out + 32*kids.lines
	default:
		// Emphasis, links, spoilers, maths, headings: wrapping marks and
		// attribute values.
		out.out += attrs + 8
	}
	return out, extra
}

// reparses reports whether parsing n's rendering inside its ancestors
// c.open would not give n back as it is: whether its start tag would
// close an ancestor (or, for a and nobr, reopen one), or the parser
// treats it in a way that does not nest. The rules are those of the HTML
// parser "in body".
func (c *mdCheck) reparses(n *html.Node) bool {
	tag, open := n.Data, c.open
	parent := open[len(open)-1]
	switch tag {
	case "address", "article", "aside", "blockquote", "center", "details", "dialog", "dir", "div", "dl",
		"fieldset", "figcaption", "figure", "footer", "header", "hgroup", "main", "menu", "nav", "ol", "p",
		"search", "section", "summary", "ul", "pre", "listing", "hr", "xmp":
		return pInButtonScope(open)
	case "h1", "h2", "h3", "h4", "h5", "h6":
		switch parent {
		case "h1", "h2", "h3", "h4", "h5", "h6":
			return true
		}
		return pInButtonScope(open)
	case "li":
		return closesItem(open, "li", "li") || pInButtonScope(open)
	case "dd", "dt":
		return closesItem(open, "dd", "dt") || pInButtonScope(open)
	case "a", "nobr", "form", "button":
		for _, o := range open {
			if o == tag {
				return true
			}
		}
		return tag == "form" && pInButtonScope(open)
	case "rb", "rp", "rt", "rtc":
		switch parent {
		case "dd", "dt", "li", "optgroup", "option", "p", "rb", "rp", "rt", "rtc":
			return true
		}
	case "html", "head", "body", "frameset", "frame", "table", "caption", "colgroup", "col",
		"tbody", "thead", "tfoot", "tr", "td", "th", "select", "option", "optgroup", "template",
		"plaintext", "image", "textarea", "input", "math", "svg", "noscript", "iframe",
		"script", "style", "title", "applet", "object":
		return true
	}
	if isRawText(tag) { // xmp, noembed, noframes: text without a tag in it
		for ch := n.FirstChild; ch != nil; ch = ch.NextSibling {
			if ch.Type != html.TextNode || strings.Contains(ch.Data, "<") {
				return true
			}
		}
	}
	return false
}

// listIndent bounds the width of the converter's item markers and
// indents in list n of children nodes: "* " and two spaces, or the
// widest number of an ordered list, ". " and padding.
func listIndent(n *html.Node, children int) int {
	if n.Data != "ol" {
		return 2
	}
	counter := 1
	for _, a := range n.Attr {
		if a.Key == "start" && a.Val != "" {
			counter, _ = strconv.Atoi(a.Val) // as the converter reads it
		}
	}
	return max(len(strconv.Itoa(counter)), len(strconv.Itoa(counter-1+children))) + 2
}

// pInButtonScope reports whether the parser finds a p element "in button
// scope" among the open elements (none of those that stop the search
// survive sanitizing but html and button).
func pInButtonScope(open []string) bool {
	for i := len(open) - 1; i >= 0; i-- {
		switch open[i] {
		case "p":
			return true
		case "html", "button", "marquee", "object", "applet", "table", "td", "th", "caption", "template":
			return false
		}
	}
	return false
}

// closesItem reports whether a new li (or dd, dt) start tag closes an
// open one: an a or b element open above every special element other than
// address, div and p.
func closesItem(open []string, a, b string) bool {
	for i := len(open) - 1; i >= 0; i-- {
		switch o := open[i]; {
		case o == a || o == b:
			return true
		case o == "address" || o == "div" || o == "p":
		case isSpecial(o):
			return false
		}
	}
	return false
}

// isSpecial reports whether the HTML parser counts an element as
// "special" (golang.org/x/net/html's isSpecialElementMap).
func isSpecial(tag string) bool {
	switch tag {
	case "address", "applet", "area", "article", "aside", "base", "basefont", "bgsound", "blockquote",
		"body", "br", "button", "caption", "center", "col", "colgroup", "dd", "details", "dir", "div", "dl",
		"dt", "embed", "fieldset", "figcaption", "figure", "footer", "form", "frame", "frameset",
		"h1", "h2", "h3", "h4", "h5", "h6", "head", "header", "hgroup", "hr", "html", "iframe", "img",
		"input", "keygen", "li", "link", "listing", "main", "marquee", "menu", "meta", "nav", "noembed",
		"noframes", "noscript", "object", "ol", "p", "param", "plaintext", "pre", "script", "section",
		"select", "source", "style", "summary", "table", "tbody", "td", "template", "textarea", "tfoot",
		"th", "thead", "title", "tr", "track", "ul", "wbr", "xmp":
		return true
	}
	return false
}

// escapedSize is the length of s as html.Render escapes it.
func escapedSize(s string) int {
	n := len(s)
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '&', '\'', '"', '\r':
			n += 4
		case '<', '>':
			n += 3
		}
	}
	return n
}

// longestRun is the length of the longest run of c in s.
func longestRun(s string, c byte) int {
	run, best := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			run++
			best = max(best, run)
		} else {
			run = 0
		}
	}
	return best
}
