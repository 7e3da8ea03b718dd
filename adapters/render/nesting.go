package render

import (
	"github.com/yuin/goldmark/ast"
	east "github.com/yuin/goldmark/extension/ast"
)

// maxNesting bounds how deeply the answer's HTML elements nest. Markdown
// nests without limit ("> > > …", "- - - …", "***…***"), but deep markup
// burdens clients and HTML parsers refuse it (golang.org/x/net/html stops
// at 512 open elements), so containers below this depth are unwrapped:
// their content stays, their element goes.
const maxNesting = 32

// elementDepth estimates how many nested HTML elements n contributes.
func elementDepth(n ast.Node) int {
	switch n.(type) {
	case *ast.Text, *ast.String, *ast.RawHTML, *ast.Image, *ast.AutoLink, *ast.Document:
		return 0
	case *ast.CodeBlock, *ast.FencedCodeBlock, *east.TableHeader, *east.TableRow:
		return 2 // pre+code, thead/tbody+tr
	}
	return 1
}

// limitNesting unwraps block quotes, lists, emphasis, strikethrough and
// links that would sit deeper than maxNesting, keeping their content in
// place; other nodes (paragraphs, headings, code, tables) are shallow.
func limitNesting(parent ast.Node, depth int) {
	for c := parent.FirstChild(); c != nil; {
		w := elementDepth(c)
		if depth+w > maxNesting {
			if first, ok := unwrap(parent, c); ok {
				c = first
				continue
			}
		}
		limitNesting(c, depth+w)
		c = c.NextSibling()
	}
}

// unwrap replaces n, a child of parent, with its content and returns the
// node to continue from (the first moved node, or n's old next sibling).
// The items of an unwrapped list become paragraphs and blocks in order.
func unwrap(parent, n ast.Node) (ast.Node, bool) {
	var moved []ast.Node
	switch n.(type) {
	case *ast.Blockquote, *ast.Emphasis, *east.Strikethrough, *ast.Link:
		moved = children(n)
	case *ast.List:
		for _, item := range children(n) {
			for _, b := range children(item) {
				if tb, ok := b.(*ast.TextBlock); ok {
					p := ast.NewParagraph()
					p.SetLines(tb.Lines())
					for _, in := range children(tb) {
						p.AppendChild(p, in)
					}
					b = p
				}
				moved = append(moved, b)
			}
		}
	default:
		return nil, false
	}
	next := n.NextSibling()
	for _, m := range moved {
		parent.InsertBefore(parent, n, m)
	}
	parent.RemoveChild(parent, n)
	if len(moved) > 0 {
		return moved[0], true
	}
	return next, true
}

// children detaches and returns the children of n.
func children(n ast.Node) []ast.Node {
	var out []ast.Node
	for c := n.FirstChild(); c != nil; {
		next := c.NextSibling()
		n.RemoveChild(n, c)
		out = append(out, c)
		c = next
	}
	return out
}
