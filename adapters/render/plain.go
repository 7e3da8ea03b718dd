package render

import (
	"bufio"
	"bytes"
	"fmt"
	"html"
	"strings"

	"github.com/yuin/goldmark/ast"
	east "github.com/yuin/goldmark/extension/ast"
	gmhtml "github.com/yuin/goldmark/renderer/html"
)

// maxPrefixDepth bounds how many nested block quotes and list items
// contribute their "> " or indentation to each line of the plain body, so
// pathological nesting cannot make the body grow quadratically.
const maxPrefixDepth = 16

// linePrefix is what one enclosing container adds to each line: a list
// item's marker goes before its first line and its indent before the
// others; a block quote has no marker and indents every line with "> ".
// used records that the container has written a line.
type linePrefix struct {
	marker, indent string
	used           bool
}

// plainWriter turns a parsed Markdown document into the plain-text body.
// It walks the same AST the HTML is rendered from, so both bodies say the
// same thing. With visible set it writes inline content as the HTML shows
// it (code spans without backticks, strikethrough without tildes), which
// is how link labels are judged.
type plainWriter struct {
	src       []byte
	text      gmhtml.Writer
	visible   bool
	out       strings.Builder
	stack     []linePrefix
	lines     int
	needBlank bool

	scratch bytes.Buffer
	bw      *bufio.Writer
}

func newPlainWriter(src []byte, text gmhtml.Writer) *plainWriter {
	p := &plainWriter{src: src, text: text}
	p.bw = bufio.NewWriter(&p.scratch)
	return p
}

// plainText renders doc (parsed from src) as plain text.
func plainText(doc ast.Node, src []byte, text gmhtml.Writer) string {
	p := newPlainWriter(src, text)
	p.blocks(doc, true)
	return strings.TrimRight(p.out.String(), "\n")
}

// decode resolves backslash escapes and character references in a text
// segment exactly as goldmark's HTML writer does, then undoes the HTML
// escaping that writer applies, leaving the literal text.
func (p *plainWriter) decode(v []byte) string {
	p.scratch.Reset()
	p.bw.Reset(&p.scratch)
	p.text.Write(p.bw, v)
	_ = p.bw.Flush()
	return html.UnescapeString(p.scratch.String())
}

// prefix builds the line prefix from the enclosing containers. A
// container that has not written a line yet contributes nothing to a
// blank line; its first non-blank line gets the list marker, if any.
func (p *plainWriter) prefix(blank bool) string {
	var b strings.Builder
	for i := range p.stack {
		e := &p.stack[i]
		if !e.used {
			if blank {
				continue
			}
			e.used = true
			if e.marker != "" {
				b.WriteString(e.marker)
				continue
			}
		}
		if i < maxPrefixDepth {
			b.WriteString(e.indent)
		}
	}
	return b.String()
}

// line writes one output line, preceded by a blank line if one is due.
func (p *plainWriter) line(s string) {
	if p.needBlank && p.lines > 0 {
		p.out.WriteString(strings.TrimRight(p.prefix(true), " "))
		p.out.WriteByte('\n')
	}
	p.needBlank = false
	pre := p.prefix(false)
	if s == "" {
		pre = strings.TrimRight(pre, " ")
	}
	p.out.WriteString(pre)
	p.out.WriteString(s)
	p.out.WriteByte('\n')
	p.lines++
}

// blocks writes the block children of parent, separated by a blank line
// when loose.
func (p *plainWriter) blocks(parent ast.Node, loose bool) {
	start := p.lines
	for c := parent.FirstChild(); c != nil; c = c.NextSibling() {
		if p.lines > start {
			p.needBlank = loose
		}
		p.block(c)
	}
}

func (p *plainWriter) textLines(s string) {
	s = strings.Trim(s, "\n")
	if s == "" {
		return
	}
	for _, l := range strings.Split(s, "\n") {
		p.line(strings.TrimRight(l, " \t"))
	}
}

func (p *plainWriter) inlineText(n ast.Node) string {
	var b strings.Builder
	p.inlines(n, &b)
	return b.String()
}

func (p *plainWriter) block(n ast.Node) {
	switch n := n.(type) {
	case *ast.Paragraph, *ast.TextBlock:
		p.textLines(p.inlineText(n))
	case *ast.Heading:
		if s := strings.TrimSpace(strings.ReplaceAll(p.inlineText(n), "\n", " ")); s != "" {
			p.line(s)
		}
	case *ast.ThematicBreak:
		p.line("---")
	case *ast.FencedCodeBlock:
		p.code(n, string(n.Language(p.src)))
	case *ast.CodeBlock:
		p.code(n, "")
	case *ast.Blockquote:
		p.stack = append(p.stack, linePrefix{indent: "> "})
		p.blocks(n, true)
		p.stack = p.stack[:len(p.stack)-1]
	case *ast.List:
		p.list(n)
	case *ast.HTMLBlock:
		for _, l := range htmlBlockLines(n, p.src) {
			p.line(l)
		}
	case *east.Table:
		for row := n.FirstChild(); row != nil; row = row.NextSibling() {
			var cells []string
			for cell := row.FirstChild(); cell != nil; cell = cell.NextSibling() {
				cells = append(cells, strings.TrimSpace(strings.ReplaceAll(p.inlineText(cell), "\n", " ")))
			}
			p.line(strings.TrimRight(strings.Join(cells, " | "), " "))
		}
	default:
		if n.FirstChild() != nil && n.FirstChild().Type() == ast.TypeBlock {
			p.blocks(n, true)
		} else {
			p.textLines(p.inlineText(n))
		}
	}
}

func (p *plainWriter) list(n *ast.List) {
	start := p.lines
	i := 0
	for item := n.FirstChild(); item != nil; item = item.NextSibling() {
		if p.lines > start {
			p.needBlank = !n.IsTight
		}
		marker := "- "
		if n.IsOrdered() {
			marker = fmt.Sprintf("%d. ", n.Start+i)
		}
		i++
		p.stack = append(p.stack, linePrefix{marker: marker, indent: strings.Repeat(" ", len(marker))})
		p.blocks(item, !n.IsTight)
		if !p.stack[len(p.stack)-1].used {
			p.line("") // an empty item still shows its marker
		}
		p.stack = p.stack[:len(p.stack)-1]
	}
}

// code writes a code block verbatim between fences longer than any run
// of backticks inside it.
func (p *plainWriter) code(n ast.Node, lang string) {
	var b strings.Builder
	lines := n.Lines()
	for i := 0; i < lines.Len(); i++ {
		s := lines.At(i)
		b.Write(s.Value(p.src))
	}
	content := strings.TrimRight(b.String(), "\n")
	fence := strings.Repeat("`", max(3, longestRun(content, '`')+1))
	p.line(fence + lang)
	if content != "" {
		for _, l := range strings.Split(content, "\n") {
			p.line(l)
		}
	}
	p.line(fence)
}

func longestRun(s string, c byte) int {
	best, run := 0, 0
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

// inlines writes the inline children of n as text: emphasis markers are
// dropped, inline code keeps its backticks, strikethrough keeps its tildes
// (dropping them would change the meaning), links read "label (url)", a
// link shown as its target reads as the target, and images become their
// alt text.
func (p *plainWriter) inlines(n ast.Node, b *strings.Builder) {
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		p.inline(c, b)
	}
}

func (p *plainWriter) inline(n ast.Node, b *strings.Builder) {
	switch n := n.(type) {
	case *ast.Text:
		v := n.Segment.Value(p.src)
		if n.IsRaw() {
			b.Write(v)
		} else {
			b.WriteString(p.decode(v))
		}
		if n.SoftLineBreak() || n.HardLineBreak() {
			b.WriteByte('\n')
		}
	case *ast.String:
		if n.IsRaw() || n.IsCode() {
			b.Write(n.Value)
		} else {
			b.WriteString(p.decode(n.Value))
		}
	case *ast.CodeSpan:
		p.codeSpan(n, b)
	case *ast.Link:
		label := p.inlineText(n)
		href, ok := linkHref(n.Destination)
		switch {
		case !ok:
			b.WriteString(label)
		case strings.TrimSpace(label) == "":
			b.WriteString(href)
		case label == href || label == string(n.Destination):
			b.WriteString(label)
		default:
			b.WriteString(label)
			b.WriteString(" (")
			b.WriteString(href)
			b.WriteString(")")
		}
	case *ast.AutoLink:
		b.Write(n.Label(p.src))
	case *shownTarget:
		b.WriteString(n.href)
	case *unverifiedURL:
		b.WriteString(n.text)
	case *ast.RawHTML:
		for i := 0; i < n.Segments.Len(); i++ {
			s := n.Segments.At(i)
			b.Write(s.Value(p.src))
		}
	case *east.Strikethrough:
		if p.visible {
			p.inlines(n, b)
			break
		}
		b.WriteString("~~")
		p.inlines(n, b)
		b.WriteString("~~")
	case *ast.Image:
		// The HTML shows an image as its alt text in the plain form.
		visible := p.visible
		p.visible = false
		p.inlines(n, b)
		p.visible = visible
	default: // emphasis and anything else: their text only
		p.inlines(n, b)
	}
}

func (p *plainWriter) codeSpan(n *ast.CodeSpan, b *strings.Builder) {
	var code strings.Builder
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		switch t := c.(type) {
		case *ast.Text:
			code.Write(bytes.TrimSuffix(t.Segment.Value(p.src), []byte("\n")))
			if bytes.HasSuffix(t.Segment.Value(p.src), []byte("\n")) {
				code.WriteByte(' ')
			}
		case *ast.String:
			code.Write(t.Value)
		}
	}
	s := code.String()
	if p.visible {
		b.WriteString(s)
		return
	}
	fence := strings.Repeat("`", longestRun(s, '`')+1)
	pad := ""
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") {
		pad = " "
	}
	b.WriteString(fence + pad + s + pad + fence)
}
