package htmlmd

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/url"
	"strconv"
	"strings"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// Bounds on the tree built from one page. Each keeps the work of the
// library's passes (each walks the tree, several copy a node's rendered
// text once per enclosing element) linear in the page's size.
const (
	// MaxDepth bounds the elements open at once below the body. Deeper
	// start tags are ignored and their content joins the deepest open
	// element. Real articles nest 20 to 30 levels; the library copies
	// text once per level, so this is the factor between the page's
	// text and the bytes the library copies.
	MaxDepth = 48
	// MaxNesting bounds the open elements whose Markdown the library
	// builds in a buffer of their own and copies into their parent's
	// (see copies): quotes, lists, links, emphasis, code, headings and
	// tables. Each copies the text inside it once more, and quotes and
	// lists also prefix each of its lines, so this is the factor between
	// the page's text and the bytes the library copies. Prose with a
	// link in a list item in a quote needs five.
	MaxNesting = 8
	// MaxTableColumns bounds the cells (counting colspans) of one table
	// row; further cell start tags are ignored and their content joins
	// the row's last cell.
	MaxTableColumns = 64
	// MaxSpan caps colspan and rowspan: the library fills the grid a
	// span covers with empty cells.
	MaxSpan = 4
	// MaxTableCells bounds a table's grid, rows times its widest row.
	// The library pads every row to the widest, so a larger grid of
	// mostly empty cells is laid out as plain blocks instead.
	MaxTableCells = 20_000
	// maxURLBytes bounds a kept link target; longer ones are dropped
	// (the link text stays).
	maxURLBytes = 2048
	// maxAltBytes bounds kept image alt text.
	maxAltBytes = 512
	// maxClassBytes bounds the class of code and pre, kept for the
	// code block's language.
	maxClassBytes = 128
	// maxListStart caps ol start.
	maxListStart = 1_000_000
	// MaxElements bounds the elements of the tree; later start tags are
	// ignored and their content joins the element open at the time. The
	// library's cost is mostly per node (it copies and sorts its list of
	// handlers for each one), and text nodes are at most twice as many
	// as elements. A long article has a few thousand elements once
	// scripts, styles and spans are gone.
	MaxElements = 40_000
	// checkEvery is how many tokens pass between deadline checks.
	checkEvery = 256
)

// errCancelled reports that the context ended while tokenizing.
var errCancelled = errors.New("htmlmd: cancelled")

// entry is an element open in the tree being built, with the counts the
// table bounds need.
type entry struct {
	n *html.Node
	// cells is a row's cells so far (colspans counted).
	cells int
	// rows and cols are a table's rows and widest row.
	rows, cols int
}

// builder builds a bounded tree from the tokens of one page.
type builder struct {
	z       *html.Tokenizer
	doc     *html.Node
	stack   []entry // stack[0] is the body
	text    strings.Builder
	skip    string       // element whose content is being dropped
	skipped int          // nesting of skip within itself
	flat    []*html.Node // tables to lay out as plain blocks
	elems   int          // elements in the tree
	nesting int          // open elements that copy (see copies)
}

// buildTree tokenizes src and returns a document of html and body with
// the page's content below, within the bounds above. It fails only when
// ctx ends.
func buildTree(ctx context.Context, src []byte) (*html.Node, error) {
	b := &builder{z: html.NewTokenizer(bytes.NewReader(src))}
	b.doc = &html.Node{Type: html.DocumentNode}
	root := element("html", nil)
	body := element("body", nil)
	b.doc.AppendChild(root)
	root.AppendChild(body)
	b.stack = append(b.stack, entry{n: body})
	for tokens := 1; ; tokens++ {
		if tokens%checkEvery == 0 && ctx.Err() != nil {
			return nil, errCancelled
		}
		tt := b.z.Next()
		switch tt {
		case html.ErrorToken:
			// The tokenizer reads from memory: its only error is io.EOF.
			if err := b.z.Err(); !errors.Is(err, io.EOF) {
				return nil, err
			}
			b.popTo(1)
			b.flush()
			for _, t := range b.flat {
				flatten(t)
			}
			return b.doc, nil
		case html.TextToken:
			if b.skip == "" {
				b.text.Write(b.z.Text())
			}
		case html.StartTagToken, html.SelfClosingTagToken:
			b.start(tt == html.SelfClosingTagToken)
		case html.EndTagToken:
			b.end()
		}
		// Comments and doctypes are dropped.
	}
}

// element returns a new element node named name.
func element(name string, attr []html.Attribute) *html.Node {
	return &html.Node{Type: html.ElementNode, Data: name, DataAtom: atom.Lookup([]byte(name)), Attr: attr}
}

// top is the element new content goes into.
func (b *builder) top() *html.Node { return b.stack[len(b.stack)-1].n }

// flush appends the pending text to the top element as one text node.
func (b *builder) flush() {
	if b.text.Len() == 0 {
		return
	}
	b.top().AppendChild(&html.Node{Type: html.TextNode, Data: b.text.String()})
	b.text.Reset()
}

// dropped reports whether an element is left out with all its content.
func dropped(name string) bool {
	switch name {
	case "script", "style", "template", "noscript", "iframe", "frameset", "object", "applet",
		"svg", "math", "select", "textarea", "title", "noembed", "noframes", "canvas",
		"audio", "video", "datalist", "map":
		return true
	}
	return false
}

// rawText reports whether the tokenizer reads an element's content as
// one run of text up to its end tag, even when the start tag is written
// self-closing.
func rawText(name string) bool {
	switch name {
	case "iframe", "noembed", "noframes", "noscript", "plaintext", "script", "style", "textarea", "title", "xmp":
		return true
	}
	return false
}

// copies reports whether the library renders an element's content into
// a buffer of its own and copies it into its parent's.
func copies(name string) bool {
	switch name {
	case "a", "b", "strong", "em", "i", "s", "del", "strike", "ul", "ol", "li", "pre", "code",
		"var", "samp", "kbd", "tt", "blockquote", "h1", "h2", "h3", "h4", "h5", "h6",
		"table", "td", "th", "caption", "dd", "dt":
		return true
	}
	return false
}

// ignored reports whether a tag is left out while its content stays.
func ignored(name string) bool {
	switch name {
	case "html", "head", "body", "form", "font", "span", "label", "nobr", "wbr", "frame", "embed",
		"area", "base", "col", "colgroup", "input", "keygen", "link", "meta", "param", "source", "track":
		return true
	}
	return false
}

// closesP reports whether a start tag closes an open paragraph.
func closesP(name string) bool {
	switch name {
	case "address", "article", "aside", "blockquote", "details", "dialog", "dir", "div", "dl",
		"fieldset", "figcaption", "figure", "footer", "h1", "h2", "h3", "h4", "h5", "h6", "header",
		"hgroup", "hr", "main", "menu", "nav", "ol", "p", "pre", "listing", "section", "summary",
		"table", "ul", "li", "dd", "dt", "plaintext", "xmp":
		return true
	}
	return false
}

// isHeading reports whether name is h1 to h6.
func isHeading(name string) bool {
	return len(name) == 2 && name[0] == 'h' && name[1] >= '1' && name[1] <= '6'
}

// tableBoundary reports whether an element bounds the search for an open
// element: nothing inside a table cell closes what is outside the table.
func tableBoundary(name string) bool {
	switch name {
	case "table", "td", "th", "caption":
		return true
	}
	return false
}

// find returns the index of the nearest open element named one of names,
// searching from the top and never past an element for which stop
// reports true (or the body), or 0 when there is none.
func (b *builder) find(stop func(string) bool, names ...string) int {
	for i := len(b.stack) - 1; i > 0; i-- {
		d := b.stack[i].n.Data
		for _, n := range names {
			if d == n {
				return i
			}
		}
		if stop(d) {
			return 0
		}
	}
	return 0
}

// popTo closes every element at index i and above.
func (b *builder) popTo(i int) {
	if i < 1 || i >= len(b.stack) {
		return
	}
	b.flush()
	for len(b.stack) > i {
		last := len(b.stack) - 1
		e := b.stack[last]
		b.stack = b.stack[:last]
		if copies(e.n.Data) {
			b.nesting--
		}
		switch e.n.Data {
		case "tr":
			if t := b.find(func(string) bool { return false }, "table"); t > 0 {
				b.stack[t].cols = max(b.stack[t].cols, e.cells)
			}
		case "table":
			if e.rows*e.cols > MaxTableCells {
				b.flat = append(b.flat, e.n)
			}
		}
	}
}

// push appends an element to the top one and opens it, unless the tree
// is at its depth or size bound. It reports whether it did.
func (b *builder) push(n *html.Node) bool {
	if !b.fits(n.Data) {
		return false
	}
	b.elems++
	if copies(n.Data) {
		b.nesting++
	}
	b.flush()
	b.top().AppendChild(n)
	b.stack = append(b.stack, entry{n: n})
	return true
}

// fits reports whether an element named name can be opened now, within
// the tree's bounds.
func (b *builder) fits(name string) bool {
	return len(b.stack) <= MaxDepth && b.elems < MaxElements && (!copies(name) || b.nesting < MaxNesting)
}

// leaf appends an element that has no content (br, hr).
func (b *builder) leaf(name string) {
	if b.elems >= MaxElements {
		return
	}
	b.elems++
	b.flush()
	b.top().AppendChild(element(name, nil))
}

func never(string) bool { return false }

// start handles a start tag, written self-closing or not.
func (b *builder) start(selfClosing bool) {
	raw, hasAttr := b.z.TagName()
	name := string(raw)
	if b.skip != "" {
		if name == b.skip {
			b.skipped++
		}
		return
	}
	switch {
	case dropped(name):
		// A self-closing tag has no content to drop, unless the tokenizer
		// reads raw text after it all the same.
		if !selfClosing || rawText(name) {
			b.skip, b.skipped = name, 1
		}
		return
	case ignored(name):
		return
	case name == "br":
		b.leaf("br")
		return
	case name == "img":
		if alt := b.attr(hasAttr, "alt"); alt != "" && len(alt) <= maxAltBytes {
			b.text.WriteString(alt)
		}
		return
	}
	if !b.fits(name) {
		// Over a bound the tag is ignored, closing nothing either.
		return
	}
	if closesP(name) {
		if i := b.find(func(d string) bool { return tableBoundary(d) || d == "button" }, "p"); i > 0 {
			b.popTo(i)
		}
	}
	switch {
	case name == "hr":
		b.leaf("hr")
		return
	case isHeading(name):
		if isHeading(b.top().Data) {
			b.popTo(len(b.stack) - 1)
		}
	case name == "li":
		b.popTo(b.find(func(d string) bool { return tableBoundary(d) || d == "ul" || d == "ol" }, "li"))
	case name == "dd" || name == "dt":
		b.popTo(b.find(func(d string) bool { return tableBoundary(d) || d == "dl" }, "dd", "dt"))
	case name == "a":
		b.popTo(b.find(tableBoundary, "a"))
	case name == "tr":
		b.row()
		return
	case name == "td" || name == "th":
		b.cell(name, hasAttr)
		return
	case name == "thead" || name == "tbody" || name == "tfoot" || name == "caption":
		t := b.find(never, "table")
		if t == 0 {
			return
		}
		b.popTo(t + 1)
	}
	var attr []html.Attribute
	switch name {
	case "a":
		if href, ok := linkTarget(b.attr(hasAttr, "href")); ok {
			attr = []html.Attribute{{Key: "href", Val: href}}
		}
	case "ol":
		if s, err := strconv.Atoi(strings.TrimSpace(b.attr(hasAttr, "start"))); err == nil {
			attr = []html.Attribute{{Key: "start", Val: strconv.Itoa(min(max(s, 0), maxListStart))}}
		}
	case "code", "pre":
		if c := b.attr(hasAttr, "class"); c != "" && len(c) <= maxClassBytes {
			attr = []html.Attribute{{Key: "class", Val: c}}
		}
	}
	b.push(element(name, attr))
}

// row opens a table row, closing the open one; outside a table the tag
// is ignored.
func (b *builder) row() {
	t := b.find(never, "table")
	if t == 0 {
		return
	}
	b.popTo(b.sectionOrTable(t) + 1)
	if b.push(element("tr", nil)) {
		b.stack[t].rows++
	}
}

// sectionOrTable returns the index of the innermost of table t's open
// sections (thead, tbody, tfoot), or t.
func (b *builder) sectionOrTable(t int) int {
	if t+1 < len(b.stack) {
		switch b.stack[t+1].n.Data {
		case "thead", "tbody", "tfoot":
			return t + 1
		}
	}
	return t
}

// cell opens a table cell, closing the open one and opening a row if
// none is; outside a table, or past the row's column bound, the tag is
// ignored.
func (b *builder) cell(name string, hasAttr bool) {
	t := b.find(never, "table")
	if t == 0 {
		return
	}
	var attr []html.Attribute
	colspan := 1
	for hasAttr {
		var k, v []byte
		k, v, hasAttr = b.z.TagAttr()
		switch key := string(k); key {
		case "colspan", "rowspan":
			n, err := strconv.Atoi(strings.TrimSpace(string(v)))
			if err != nil || n <= 1 {
				continue
			}
			n = min(n, MaxSpan)
			if key == "colspan" {
				colspan = n
			}
			attr = append(attr, html.Attribute{Key: key, Val: strconv.Itoa(n)})
		case "align":
			switch a := strings.ToLower(string(v)); a {
			case "left", "center", "right":
				attr = append(attr, html.Attribute{Key: key, Val: a})
			}
		}
	}
	r := 0
	for i := len(b.stack) - 1; i > t; i-- {
		if b.stack[i].n.Data == "tr" {
			r = i
			break
		}
	}
	if r == 0 {
		b.popTo(b.sectionOrTable(t) + 1)
		if !b.push(element("tr", nil)) {
			return
		}
		b.stack[t].rows++
		r = len(b.stack) - 1
	}
	if b.stack[r].cells+colspan > MaxTableColumns {
		return
	}
	b.popTo(r + 1)
	if b.push(element(name, attr)) {
		b.stack[r].cells += colspan
	}
}

// end handles an end tag.
func (b *builder) end() {
	raw, _ := b.z.TagName()
	name := string(raw)
	if b.skip != "" {
		if name == b.skip {
			if b.skipped--; b.skipped == 0 {
				b.skip = ""
			}
		}
		return
	}
	var stop func(string) bool
	switch name {
	case "table":
		stop = never
	case "td", "th", "tr", "thead", "tbody", "tfoot", "caption":
		stop = func(d string) bool { return d == "table" }
	case "li":
		stop = func(d string) bool { return tableBoundary(d) || d == "ul" || d == "ol" }
	case "dd", "dt":
		stop = func(d string) bool { return tableBoundary(d) || d == "dl" }
	case "br":
		b.leaf("br")
		return
	default:
		stop = tableBoundary
	}
	b.popTo(b.find(stop, name))
}

// attr returns the value of the current tag's attribute key, reading the
// tag's attributes (it can be called once per tag).
func (b *builder) attr(hasAttr bool, key string) string {
	val := ""
	for hasAttr {
		var k, v []byte
		k, v, hasAttr = b.z.TagAttr()
		if val == "" && string(k) == key {
			val = string(v)
		}
	}
	return val
}

// linkTarget returns the link target kept for href: an absolute http or
// https URL, or a relative reference (the research tools resolve it
// against the page's address, without any request). Other schemes
// (javascript:, data:, file:, mailto: …), fragments of the same page,
// overlong and unparsable targets are dropped; the link's text stays.
func linkTarget(href string) (string, bool) {
	href = strings.TrimSpace(href)
	if href == "" || href[0] == '#' || len(href) > maxURLBytes {
		return "", false
	}
	u, err := url.Parse(href)
	if err != nil {
		return "", false
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "https":
		if u.Host == "" {
			return "", false
		}
	case "":
		if u.Opaque != "" {
			return "", false
		}
	default:
		return "", false
	}
	return href, true
}

// flatten lays out a table as plain blocks: every table element below
// t, and t, becomes a div.
func flatten(t *html.Node) {
	switch t.Data {
	case "table", "thead", "tbody", "tfoot", "tr", "td", "th", "caption":
		t.Data, t.DataAtom, t.Attr = "div", atom.Div, nil
	}
	for c := t.FirstChild; c != nil; c = c.NextSibling {
		if c.Type == html.ElementNode {
			flatten(c)
		}
	}
}
