package render

import (
	"net/url"
	"strings"

	"github.com/yuin/goldmark/ast"

	"github.com/lisabot/lisa/urlkey"
)

// This file holds Lisa's rule against invented links (issue #32 item 1).
// Sources are built by the host from this invocation's tool results; a
// link the model writes into its answer is a source to the reader too.
// So, when an answer is checked (Answer.CheckLinks), every link and every
// autolink or bare URL in it whose target is an http(s) URL that did not
// appear in the invocation (Answer.KnownURLs: the invoking message, the
// room context and the successful tool results) is shown as text:
//
//   - a link keeps its label as plain text, without the link (and without
//     its target in the plain body);
//   - a link without visible text, an autolink and a bare URL show the URL
//     as inline code, which clients do not turn into a link again.
//
// URLs are compared in the normal form the research tools use for their
// known URLs (see linkKey). Links to Matrix users and rooms (matrix:
// URIs, matrix.to permalinks) are not checked here: the rules of links.go
// apply to them as before. Each link shown as text is counted
// (Rendered.LinksUnverified).

// kindUnlinked is the node kind of an unverified link shown as its label.
var kindUnlinked = ast.NewNodeKind("LisaUnlinked")

// unlinked holds the label of a link whose target is unverified: its
// children are rendered, without a link around them.
type unlinked struct {
	ast.BaseInline
}

// Kind implements ast.Node.
func (n *unlinked) Kind() ast.NodeKind { return kindUnlinked }

// Dump implements ast.Node.
func (n *unlinked) Dump(source []byte, level int) { ast.DumpHelper(n, source, level, nil, nil) }

// kindUnverifiedURL is the node kind of an unverified URL shown as text.
var kindUnverifiedURL = ast.NewNodeKind("LisaUnverifiedURL")

// unverifiedURL replaces an autolink, a bare URL or a link without
// visible text whose target is unverified: it is shown as the URL in
// inline code.
type unverifiedURL struct {
	ast.BaseInline
	text string
}

// Kind implements ast.Node.
func (n *unverifiedURL) Kind() ast.NodeKind { return kindUnverifiedURL }

// Dump implements ast.Node.
func (n *unverifiedURL) Dump(source []byte, level int) {
	ast.DumpHelper(n, source, level, map[string]string{"Text": n.text}, nil)
}

// linkVerifier decides which link targets of one answer are verified,
// and counts the others. A nil *linkVerifier verifies everything.
type linkVerifier struct {
	known      map[string]bool
	unverified int
}

// newLinkVerifier returns a verifier for which the URLs in known are
// verified.
func newLinkVerifier(known []string) *linkVerifier {
	v := &linkVerifier{known: make(map[string]bool, len(known))}
	for _, k := range known {
		if key, ok := linkKey(k); ok {
			v.known[key] = true
		}
	}
	return v
}

// verified reports whether a link to href, an allowed target (see
// safeHref), may stay a link: it is not checked (a matrix: URI or a
// matrix.to permalink), or its URL is known.
func (v *linkVerifier) verified(href string) bool {
	if v == nil {
		return true
	}
	u, err := url.Parse(href)
	if err != nil {
		return false
	}
	if u.Scheme == "matrix" || hostKey(u.Hostname()) == "matrix.to" {
		return true
	}
	key, ok := linkKey(href)
	return ok && v.known[key]
}

// count returns the links shown as text so far.
func (v *linkVerifier) count() int {
	if v == nil {
		return 0
	}
	return v.unverified
}

// reset sets the count back to zero.
func (v *linkVerifier) reset() {
	if v != nil {
		v.unverified = 0
	}
}

// unlink replaces the link or autolink c, a child of parent whose
// target is not verified, with text: a link's label, or the URL (shown)
// when the label is blank or c is an autolink.
func (v *linkVerifier) unlink(parent, c ast.Node, label, shown string) {
	v.unverified++
	if _, isLink := c.(*ast.Link); isLink && strings.TrimSpace(cleanText(label)) != "" {
		u := &unlinked{}
		for g := c.FirstChild(); g != nil; {
			next := g.NextSibling()
			u.AppendChild(u, g)
			g = next
		}
		parent.ReplaceChild(parent, c, u)
		return
	}
	parent.ReplaceChild(parent, c, &unverifiedURL{text: shown})
}

// linkKey returns the comparison form of an absolute http(s) URL, as the
// research tools compare known URLs: scheme and host in lower case, the
// host in IDNA (xn--) form without a trailing dot, the default port (80
// for http, 443 for https) and the fragment dropped, percent escapes of
// path and query in normal form (unreserved characters decoded, others in
// upper-case hex), trailing slashes of the path and an empty query
// removed. URLs with user information, and anything else, have none.
func linkKey(raw string) (string, bool) {
	s := strings.TrimSpace(raw)
	if s == "" || len(s) > maxHrefBytes || hasInvisible(s) {
		return "", false
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.Opaque != "" {
		return "", false
	}
	a, ok := asciiHost(s, u)
	if !ok {
		return "", false
	}
	if a != s {
		if u, err = url.Parse(a); err != nil {
			return "", false
		}
	}
	return urlkey.Of(u), true
}
