package render

import (
	"strings"

	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/renderer"
	gmhtml "github.com/yuin/goldmark/renderer/html"
	"github.com/yuin/goldmark/util"
)

// nodeRenderer overrides goldmark's HTML output for the nodes where Lisa's
// policy differs: links are written only when their target is allowed
// (otherwise the label stays as plain text), a link whose text would
// mislead is shown as its target (see links.go), a link whose target did
// not appear in the invocation is shown as text (see verify.go), images
// become their alt
// text, and raw HTML is shown as escaped text instead of being dropped or
// interpreted.
type nodeRenderer struct {
	text gmhtml.Writer
}

// RegisterFuncs implements renderer.NodeRenderer.
func (nr nodeRenderer) RegisterFuncs(reg renderer.NodeRendererFuncRegisterer) {
	reg.Register(ast.KindLink, nr.link)
	reg.Register(ast.KindAutoLink, nr.autoLink)
	reg.Register(kindShownTarget, nr.shownTarget)
	reg.Register(kindUnlinked, nr.unlinked)
	reg.Register(kindUnverifiedURL, nr.unverifiedURL)
	reg.Register(ast.KindImage, nr.image)
	reg.Register(ast.KindRawHTML, nr.rawHTML)
	reg.Register(ast.KindHTMLBlock, nr.htmlBlock)
}

func (nr nodeRenderer) link(w util.BufWriter, _ []byte, node ast.Node, entering bool) (ast.WalkStatus, error) {
	href, ok := linkHref(node.(*ast.Link).Destination)
	if !ok {
		return ast.WalkContinue, nil // label only
	}
	if entering {
		_, _ = w.WriteString(`<a href="`)
		_, _ = w.Write(util.EscapeHTML([]byte(href)))
		_, _ = w.WriteString(`">`)
	} else {
		_, _ = w.WriteString("</a>")
	}
	return ast.WalkContinue, nil
}

func (nr nodeRenderer) autoLink(w util.BufWriter, source []byte, node ast.Node, entering bool) (ast.WalkStatus, error) {
	if !entering {
		return ast.WalkContinue, nil
	}
	n := node.(*ast.AutoLink)
	label := util.EscapeHTML(n.Label(source))
	if href, ok := autoLinkHref(n, source); ok {
		_, _ = w.WriteString(`<a href="`)
		_, _ = w.Write(util.EscapeHTML([]byte(href)))
		_, _ = w.WriteString(`">`)
		_, _ = w.Write(label)
		_, _ = w.WriteString("</a>")
	} else {
		_, _ = w.Write(label)
	}
	return ast.WalkSkipChildren, nil
}

func (nr nodeRenderer) shownTarget(w util.BufWriter, _ []byte, node ast.Node, entering bool) (ast.WalkStatus, error) {
	if entering {
		href := util.EscapeHTML([]byte(node.(*shownTarget).href))
		_, _ = w.WriteString(`<a href="`)
		_, _ = w.Write(href)
		_, _ = w.WriteString(`">`)
		_, _ = w.Write(href)
		_, _ = w.WriteString("</a>")
	}
	return ast.WalkSkipChildren, nil
}

// unlinked writes nothing itself: the label of an unverified link is
// rendered as its children, without a link.
func (nr nodeRenderer) unlinked(util.BufWriter, []byte, ast.Node, bool) (ast.WalkStatus, error) {
	return ast.WalkContinue, nil
}

// unverifiedURL shows an unverified URL as inline code, which clients
// leave as text.
func (nr nodeRenderer) unverifiedURL(w util.BufWriter, _ []byte, node ast.Node, entering bool) (ast.WalkStatus, error) {
	if entering {
		_, _ = w.WriteString("<code>")
		_, _ = w.Write(util.EscapeHTML([]byte(node.(*unverifiedURL).text)))
		_, _ = w.WriteString("</code>")
	}
	return ast.WalkSkipChildren, nil
}

func (nr nodeRenderer) image(w util.BufWriter, source []byte, node ast.Node, entering bool) (ast.WalkStatus, error) {
	if entering {
		p := newPlainWriter(source, nr.text)
		var alt strings.Builder
		p.inlines(node, &alt)
		_, _ = w.Write(util.EscapeHTML([]byte(alt.String())))
	}
	return ast.WalkSkipChildren, nil
}

func (nr nodeRenderer) rawHTML(w util.BufWriter, source []byte, node ast.Node, entering bool) (ast.WalkStatus, error) {
	if entering {
		segs := node.(*ast.RawHTML).Segments
		for i := 0; i < segs.Len(); i++ {
			s := segs.At(i)
			_, _ = w.Write(util.EscapeHTML(s.Value(source)))
		}
	}
	return ast.WalkSkipChildren, nil
}

func (nr nodeRenderer) htmlBlock(w util.BufWriter, source []byte, node ast.Node, entering bool) (ast.WalkStatus, error) {
	if !entering {
		return ast.WalkContinue, nil
	}
	lines := htmlBlockLines(node.(*ast.HTMLBlock), source)
	if len(lines) == 0 {
		return ast.WalkContinue, nil
	}
	_, _ = w.WriteString("<p>")
	for i, l := range lines {
		if i > 0 {
			_, _ = w.WriteString("<br>\n")
		}
		_, _ = w.Write(util.EscapeHTML([]byte(l)))
	}
	_, _ = w.WriteString("</p>\n")
	return ast.WalkContinue, nil
}

// htmlBlockLines returns the source lines of a raw HTML block, closing
// line included, without line terminators or trailing blank lines.
func htmlBlockLines(n *ast.HTMLBlock, source []byte) []string {
	var out []string
	add := func(v []byte) {
		out = append(out, strings.TrimRight(string(v), "\n"))
	}
	for i := 0; i < n.Lines().Len(); i++ {
		s := n.Lines().At(i)
		add(s.Value(source))
	}
	if n.HasClosure() {
		add(n.ClosureLine.Value(source))
	}
	for len(out) > 0 && strings.TrimSpace(out[len(out)-1]) == "" {
		out = out[:len(out)-1]
	}
	return out
}
