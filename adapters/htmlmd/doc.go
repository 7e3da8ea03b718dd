// Package htmlmd is Lisa's built-in html_to_markdown adapter: it turns
// fetched HTML into GitHub-flavoured Markdown in pure Go, with
// github.com/JohannesKaufmann/html-to-markdown/v2, for hosts without the
// pandoc executable (web.converter = "builtin"). It holds the bounds the
// pandoc adapter holds: input bytes, output bytes, time, and the
// hostile-input cost limits of docs/security.md.
//
// The library renders a tree of golang.org/x/net/html nodes, but that
// package's HTML5 parser can be made to do work quadratic in its input (it
// reopens every unclosed formatting element in every paragraph, and joins
// text runs by copying them), and the library walks and copies the tree
// once per level. So the tree is not built by that parser: [Converter]
// builds it itself from the HTML tokenizer in one linear pass, which
//
//   - keeps only what the Markdown needs: elements with a known meaning or
//     a harmless unknown name, link targets that are http, https or
//     relative, image alt text (never an image address), table spans and
//     code languages; scripts, styles, templates, forms' controls, frames,
//     embedded SVG and MathML are dropped with their content, and comments
//     and the head's metadata go too;
//   - closes elements where HTML implies it (a paragraph at the next
//     block, a list item at the next item, table rows and cells), and
//     never reopens or copies an element;
//   - caps the nesting at [MaxDepth] (deeper start tags are ignored, their
//     content stays), table rows at [MaxTableColumns] cells and spans at
//     [MaxSpan], and lays out as plain blocks a table whose grid would
//     exceed [MaxTableCells]; and
//   - merges adjacent text as it goes, so no text is copied twice.
//
// The tree is at most as large as the input's tokens, so every later pass
// is linear too. The deadline is checked while tokenizing and before
// every node the library renders, so a conversion that runs out of time
// stops working, not just waiting; the library's passes between (white
// space, post-processing) cannot be interrupted, but they are linear and
// the input bound bounds them (testkit/hostile measures both). Markdown
// characters in text are not escaped: the library's escaping pass is
// quadratic in the length of a line. Nothing here reads a file, starts a
// process or opens a connection; no relative link is resolved.
//
// Output is cleaned as the pandoc adapter cleans its own: line endings
// become "\n", control characters other than newline and tab are removed,
// long runs of blank lines are shortened, and the text is valid UTF-8.
//
// Every failure is a *messages.ToolError (conversion_failed, timeout or
// output_too_large) with a short, stable message.
package htmlmd
