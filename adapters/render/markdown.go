package render

import (
	"net/url"
	"strings"

	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/renderer"
	gmhtml "github.com/yuin/goldmark/renderer/html"
	"github.com/yuin/goldmark/util"
)

// maxHrefBytes bounds a single link target; longer ones are kept as text.
const maxHrefBytes = 4096

// allowedHref reports whether s may be the href of a link in an answer:
// an absolute http or https URL with a host, or a matrix: URI. Anything
// else (javascript:, data:, vbscript:, relative or protocol-relative
// references, unparseable text, embedded white space or controls) is not.
func allowedHref(s string) bool {
	if s == "" || len(s) > maxHrefBytes {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c == 0x7f {
			return false
		}
	}
	u, err := url.Parse(s)
	if err != nil {
		return false
	}
	switch u.Scheme { // url.Parse lower-cases the scheme
	case "http", "https":
		return u.Host != ""
	case "matrix":
		return u.Opaque != ""
	}
	return false
}

// linkHref returns the href goldmark would write for a link destination
// (escapes and character references resolved, unsafe bytes
// percent-encoded) and whether Lisa allows it.
func linkHref(dest []byte) (string, bool) {
	s := string(util.URLEscape(dest, true))
	return s, allowedHref(s)
}

// autoLinkHref is linkHref for an autolink or a linkified URL; e-mail
// autolinks become mailto: URLs, which are not allowed.
func autoLinkHref(n *ast.AutoLink, source []byte) (string, bool) {
	if n.AutoLinkType == ast.AutoLinkEmail {
		return "", false
	}
	s := string(util.URLEscape(n.URL(source), false))
	return s, allowedHref(s)
}

// nodeRenderer overrides goldmark's HTML output for the nodes where Lisa's
// policy differs: links are written only when their target is allowed
// (otherwise the label stays as plain text), images become their alt
// text, and raw HTML is shown as escaped text instead of being dropped or
// interpreted.
type nodeRenderer struct {
	text gmhtml.Writer
}

// RegisterFuncs implements renderer.NodeRenderer.
func (nr nodeRenderer) RegisterFuncs(reg renderer.NodeRendererFuncRegisterer) {
	reg.Register(ast.KindLink, nr.link)
	reg.Register(ast.KindAutoLink, nr.autoLink)
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
