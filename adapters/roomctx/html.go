package roomctx

import (
	"net/url"
	"strings"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/format"
)

// isDropped reports whether an element is removed together with
// everything inside it: executable or styling content, embedded media and
// form controls, document metadata, and reply fallbacks.
func isDropped(tag string) bool {
	switch strings.ToLower(tag) {
	case "script", "style", "noscript", "template",
		"head", "title", "meta", "link", "base",
		"iframe", "frame", "frameset", "object", "embed", "applet", "param",
		"svg", "math", "canvas", "img", "picture", "video", "audio", "source", "track", "map", "area",
		"input", "textarea", "select", "option", "optgroup", "datalist", "button",
		"meter", "progress", "output", "dialog", "mx-reply":
		return true
	}
	return false
}

// isLinkScheme reports whether links with this URL scheme show their
// target; others (javascript:, data:, ...) keep only their text.
func isLinkScheme(scheme string) bool {
	switch strings.ToLower(scheme) {
	case "http", "https", "mailto", "matrix":
		return true
	}
	return false
}

// htmlToText converts Matrix HTML to Markdown-like text. Paragraphs, line
// breaks, emphasis, strong text, strike-through, headings, inline code,
// code blocks, quotes, lists, links and tables keep their structure;
// unknown elements keep their text; the elements isDropped names vanish with
// their content. Attributes other than those naming a link target, a code
// language, a list start or a spoiler are ignored, so event handlers never
// reach the output.
//
// HTML beyond the bounds in htmlguard.go gives "", as HTML without text
// does, so the message shows its plain body: conversion costs at most a
// few milliseconds and MiB whatever the input (issue #15).
func htmlToText(src string) string {
	if len(src) > maxHTMLBytes {
		return ""
	}
	src, sentinels, check, ok := prepareHTML(event.TrimReplyFallbackHTML(src))
	if !ok {
		return ""
	}
	doc, err := html.Parse(strings.NewReader(src))
	if err != nil || !unwrapSentinels(doc, sentinels) {
		return ""
	}
	if check && treeDepth(findBody(doc), maxHTMLDepth) > maxHTMLDepth {
		return "" // what a full stack of sentinels would have refused
	}
	sanitize(doc)
	if body := findBody(doc); body == nil || !checkMarkdown(body) {
		return ""
	}
	buf := cappedBuilder{max: maxRenderedBytes}
	if err := html.Render(&buf, doc); err != nil {
		return ""
	}
	text, _ := format.HTMLToMarkdownFull(newHTMLParser(), buf.String())
	if len(text) > maxTextBytes {
		return ""
	}
	return cleanText(text)
}

// sanitize removes comments, foreign content, dropped elements and line
// break opportunities (<wbr>, which prepareHTML also adds) below n,
// rewrites tables as rows of text and restores the names prepareHTML
// changed for parsing.
func sanitize(n *html.Node) {
	for c := n.FirstChild; c != nil; {
		next := c.NextSibling
		switch c.Type {
		case html.ElementNode:
			if name, ok := strings.CutPrefix(c.Data, renamePrefix); ok && c.Namespace == "" {
				c.Data, c.DataAtom = name, atom.Lookup([]byte(name))
			}
			switch {
			case c.Namespace != "" || isDropped(c.Data) || c.DataAtom == atom.Wbr:
				n.RemoveChild(c)
			case c.DataAtom == atom.Table:
				sanitize(c)
				n.InsertBefore(tableToBlock(c), c)
				n.RemoveChild(c)
			default:
				sanitize(c)
			}
		case html.TextNode:
		default: // comments, doctypes
			n.RemoveChild(c)
		}
		c = next
	}
}

// tableToBlock rewrites a (sanitized) table as a block of "| a | b |"
// rows, with a separator after a leading header row, and its caption on a
// line before the rows.
func tableToBlock(table *html.Node) *html.Node {
	block := &html.Node{Type: html.ElementNode, Data: "div", DataAtom: atom.Div}
	lines := 0
	newline := func() {
		if lines > 0 {
			block.AppendChild(&html.Node{Type: html.ElementNode, Data: "br", DataAtom: atom.Br})
		}
		lines++
	}
	text := func(s string) { block.AppendChild(&html.Node{Type: html.TextNode, Data: s}) }
	var rows []*html.Node
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			if c.Type != html.ElementNode {
				continue
			}
			switch c.DataAtom {
			case atom.Caption:
				newline()
				moveChildren(c, block)
			case atom.Tr:
				rows = append(rows, c)
			case atom.Thead, atom.Tbody, atom.Tfoot:
				walk(c)
			}
		}
	}
	walk(table)
	for i, tr := range rows {
		var cells []*html.Node
		header := true
		for c := tr.FirstChild; c != nil; c = c.NextSibling {
			if c.Type == html.ElementNode && (c.DataAtom == atom.Td || c.DataAtom == atom.Th) {
				cells = append(cells, c)
				header = header && c.DataAtom == atom.Th
			}
		}
		if len(cells) == 0 {
			continue
		}
		newline()
		text("| ")
		for j, cell := range cells {
			if j > 0 {
				text(" | ")
			}
			moveChildren(cell, block)
		}
		text(" |")
		if i == 0 && header {
			newline()
			text("|" + strings.Repeat(" --- |", len(cells)))
		}
	}
	return block
}

// moveChildren moves the children of from to the end of to.
func moveChildren(from, to *html.Node) {
	for c := from.FirstChild; c != nil; c = from.FirstChild {
		from.RemoveChild(c)
		to.AppendChild(c)
	}
}

// newHTMLParser returns the mautrix HTML parser configured for model
// context: Markdown-like output, safe links, user mentions with their IDs,
// no media.
func newHTMLParser() *format.HTMLParser {
	return &format.HTMLParser{
		TabsToSpaces:   -1,
		Newline:        "\n",
		HorizontalLine: "\n---\n",
		PillConverter:  pill,
		LinkConverter:  link,
		MathConverter:  func(s string, _ format.Context) string { return "$" + s + "$" },
		MathBlockConverter: func(s string, _ format.Context) string {
			return "$$\n" + s + "\n$$"
		},
		MonospaceBlockConverter: func(code, language string, ctx format.Context) string {
			return format.DefaultMonospaceBlockConverter(code, codeLanguage(language), ctx)
		},
		ImageConverter: func(_, _, _, _, _ string, _ bool) string { return "" },
	}
}

// pill renders a matrix.to or matrix: link. A user mention shows its text
// and the stable user ID; other Matrix links are shown as links.
func pill(text, mxid, eventID string, ctx format.Context) string {
	if mxid != "" && mxid[0] == '@' {
		if text == "" || text == mxid {
			return mxid
		}
		return text + " (" + mxid + ")"
	}
	return format.DefaultPillConverter(text, mxid, eventID, ctx)
}

// link renders a link as [text](href), or <href> when the text is the
// address. Links with a scheme isLinkScheme rejects lose their target.
func link(text, href string, _ format.Context) string {
	href = strings.TrimSpace(href)
	u, err := url.Parse(href)
	if err != nil || !isLinkScheme(u.Scheme) {
		return text
	}
	if text == "" || text == href || text == strings.TrimPrefix(href, "mailto:") {
		return "<" + href + ">"
	}
	return "[" + text + "](" + href + ")"
}

// codeLanguage keeps a code block language only if it is a short plain
// word, so it cannot break the fence line.
func codeLanguage(s string) string {
	if len(s) > 32 {
		return ""
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("+-_.#", r)) {
			return ""
		}
	}
	return s
}
