package render

import (
	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/renderer"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"
)

// This file bounds goldmark's work on an answer (issue #15). The model's
// answer is attacker-influenced, and some Markdown makes goldmark's work
// grow faster than its input: every container opened on one line rescans
// the line from its start ("> > > …" costs the square of its length),
// every closing emphasis delimiter looks back over all unmatched openers
// of its paragraph, every "[" becomes a pending link label and every "]("
// scans the rest of its line for a destination, and every position in a
// run of tildes rescans the rest of the run. Other Markdown costs goldmark
// and the reply several hundred bytes per input byte ("a\n=\n…", "|a|b|").
//
// So Render cuts an answer with more than maxMarkup line breaks and markup
// characters before parsing it, as it cuts one over its byte budget, and
// the parser is goldmark's default one with its block quote, list,
// emphasis, strikethrough and link parsers wrapped to stay within the
// bounds below. Within them an answer parses exactly as with goldmark's
// own parser; beyond them the excess markup stays in the answer as text.
const (
	// maxBlockDepth bounds how many block quotes and lists nest. A "> "
	// or list marker that would open a deeper one is text. It is half of
	// maxNesting: a list level is two elements (list and item).
	maxBlockDepth = 16
	// maxDelimiters bounds the emphasis and strikethrough delimiter runs
	// ("*", "__", "~~"…) of one paragraph, heading or table cell; later
	// ones are text. A closing delimiter looks back over at most this
	// many others.
	maxDelimiters = 256
	// maxLinkOpeners bounds the link and image openers ("[" and "![")
	// pending at once in one paragraph, heading or table cell; more are
	// text.
	maxLinkOpeners = 32
	// maxLinkScan bounds the bytes read looking for link destinations in
	// one document, several times any answer's; once it is spent, a "]("
	// is text.
	maxLinkScan = 256 << 10
	// maxMarkup bounds the line breaks and inline markup characters (see
	// markupEnd) of the Markdown that Render parses: each can make a node,
	// which costs goldmark and the reply several hundred bytes. An answer
	// with more is cut like one over the byte budget. One within the
	// default llm.max_response_characters (12,000) would need two thirds
	// of its characters to be markup to reach it.
	maxMarkup = 8 << 10
)

// markupEnd returns the length of the longest prefix of md with at most
// limit line breaks and characters that open inline nodes: links and
// images ("[", "]", "!"), emphasis and strikethrough ("*", "_", "~"),
// code spans ("`"), raw HTML and autolinks ("<") and table cells ("|").
func markupEnd(md string, limit int) int {
	for i := 0; i < len(md); i++ {
		switch md[i] {
		case '\n', '[', ']', '!', '*', '_', '~', '`', '<', '|':
			if limit--; limit < 0 {
				return i
			}
		}
	}
	return len(md)
}

// newParser returns goldmark's default parser with the block quote, list,
// emphasis and link parsers held to the bounds above. The strikethrough
// parser comes with the strikethrough extension.
func newParser() parser.Parser {
	wrapped := 0
	blocks := parser.DefaultBlockParsers()
	for i, v := range blocks {
		switch v.Value {
		case parser.NewBlockquoteParser(), parser.NewListParser():
			blocks[i].Value = boundedContainer{v.Value.(parser.BlockParser)}
			wrapped++
		}
	}
	inlines := parser.DefaultInlineParsers()
	for i, v := range inlines {
		switch v.Value {
		case parser.NewEmphasisParser():
			inlines[i].Value = boundedDelimiters{v.Value.(parser.InlineParser)}
			wrapped++
		case parser.NewLinkParser():
			inlines[i].Value = boundedLinks{v.Value.(parser.InlineParser)}
			wrapped++
		}
	}
	if wrapped != 4 {
		panic("render: goldmark's default parsers have changed; bounds.go needs updating")
	}
	return parser.NewParser(
		parser.WithBlockParsers(blocks...),
		parser.WithInlineParsers(inlines...),
		parser.WithParagraphTransformers(parser.DefaultParagraphTransformers()...),
	)
}

// strikethrough is extension.Strikethrough with its parser held to
// maxDelimiters and without its rescanning of tilde runs.
type strikethrough struct{}

// Extend implements goldmark.Extender.
func (strikethrough) Extend(m goldmark.Markdown) {
	m.Parser().AddOptions(parser.WithInlineParsers(
		util.Prioritized(boundedTildes{boundedDelimiters{extension.NewStrikethroughParser()}}, 500),
	))
	m.Renderer().AddOptions(renderer.WithNodeRenderers(
		util.Prioritized(extension.NewStrikethroughHTMLRenderer(), 500),
	))
}

// boundedContainer is a block quote or list parser that opens no
// container deeper than maxBlockDepth.
type boundedContainer struct {
	parser.BlockParser
}

// Open implements parser.BlockParser.
func (p boundedContainer) Open(parent ast.Node, reader text.Reader, pc parser.Context) (ast.Node, parser.State) {
	if blockDepth(parent) >= maxBlockDepth {
		return nil, parser.NoChildren
	}
	return p.BlockParser.Open(parent, reader, pc)
}

// blockDepth counts the block quotes and lists n is in, n included, up to
// maxBlockDepth.
func blockDepth(n ast.Node) int {
	d := 0
	for ; n != nil && d < maxBlockDepth; n = n.Parent() {
		switch n.(type) {
		case *ast.Blockquote, *ast.List:
			d++
		}
	}
	return d
}

// inlineBudgetKey holds the *inlineBudget of the document being parsed.
var inlineBudgetKey = parser.NewContextKey()

// inlineBudget counts what the inline parsers have spent: delimiters and
// pending link openers in the current block, and link destination bytes
// scanned in the whole document.
type inlineBudget struct {
	block               ast.Node
	delimiters, openers int
	scanned             int
}

// budget returns the budget, reset for block, the paragraph, heading or
// table cell whose inline content is being parsed.
func budget(block ast.Node, pc parser.Context) *inlineBudget {
	b, _ := pc.Get(inlineBudgetKey).(*inlineBudget)
	if b == nil {
		b = &inlineBudget{}
		pc.Set(inlineBudgetKey, b)
	}
	if b.block != block {
		*b = inlineBudget{block: block, scanned: b.scanned}
	}
	return b
}

// boundedDelimiters is an emphasis or strikethrough parser that pushes
// at most maxDelimiters delimiter runs per block.
type boundedDelimiters struct {
	parser.InlineParser
}

// Parse implements parser.InlineParser.
func (p boundedDelimiters) Parse(parent ast.Node, block text.Reader, pc parser.Context) ast.Node {
	b := budget(parent, pc)
	if b.delimiters >= maxDelimiters {
		return nil
	}
	n := p.InlineParser.Parse(parent, block, pc)
	if n != nil {
		b.delimiters++
	}
	return n
}

// boundedTildes is the strikethrough parser without its rescanning: it
// scans a whole run of tildes at each of its positions only to refuse
// every position but the first, so a long run costs the square of its
// length. A tilde after a tilde is refused at once, as goldmark would.
type boundedTildes struct {
	parser.InlineParser
}

// Parse implements parser.InlineParser.
func (p boundedTildes) Parse(parent ast.Node, block text.Reader, pc parser.Context) ast.Node {
	if block.PrecendingCharacter() == '~' {
		return nil
	}
	return p.InlineParser.Parse(parent, block, pc)
}

// boundedLinks is the link parser with at most maxLinkOpeners pending
// link and image openers per block and at most maxLinkScan bytes of link
// destinations scanned per document.
type boundedLinks struct {
	parser.InlineParser
}

// Parse implements parser.InlineParser.
func (p boundedLinks) Parse(parent ast.Node, block text.Reader, pc parser.Context) ast.Node {
	b := budget(parent, pc)
	line, _ := block.PeekLine()
	if len(line) == 0 || line[0] != ']' { // "[" or "!"
		if b.openers >= maxLinkOpeners {
			return nil
		}
		n := p.InlineParser.Parse(parent, block, pc)
		if n != nil {
			b.openers++
		}
		return n
	}
	if b.openers == 0 {
		// Nothing to close: goldmark returns at once.
		return p.InlineParser.Parse(parent, block, pc)
	}
	if len(line) > 1 && line[1] == '(' {
		n := destinationScan(line[2:], maxLinkScan-b.scanned)
		if b.scanned += n; b.scanned > maxLinkScan {
			b.scanned = maxLinkScan
			return nil // text, and the opener stays pending
		}
	}
	// Whatever it makes of the label, goldmark closes its last opener.
	b.openers--
	return p.InlineParser.Parse(parent, block, pc)
}

// CloseBlock implements parser.CloseBlocker: the link parser turns the
// openers left pending into text.
func (p boundedLinks) CloseBlock(parent ast.Node, block text.Reader, pc parser.Context) {
	if cb, ok := p.InlineParser.(parser.CloseBlocker); ok {
		cb.CloseBlock(parent, block, pc)
	}
}

// destinationScan returns how many bytes of line, the rest of a line
// after "](", goldmark reads looking for the link destination, or limit+1
// once that is more than limit: up to the closing ">" of an angle-bracket
// destination, or else up to white space or an unbalanced ")", skipping
// backslash escapes. It never reads more than limit+1 bytes.
func destinationScan(line []byte, limit int) int {
	i := 0
	for i < len(line) && (line[i] == ' ' || line[i] == '\t') {
		i++
	}
	angle := i < len(line) && line[i] == '<'
	opened := 0
	for ; i < len(line); i++ {
		if i > limit {
			return limit + 1
		}
		switch c := line[i]; {
		case c == '\\' && i+1 < len(line) && util.IsPunct(line[i+1]):
			i++
		case angle:
			if c == '>' {
				return i + 1
			}
		case c == '(':
			opened++
		case c == ')':
			if opened--; opened < 0 {
				return i + 1
			}
		case util.IsSpace(c):
			return i + 1
		}
	}
	return i
}
