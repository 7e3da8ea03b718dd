package main

import (
	"html"
	"strings"
)

// invocationText pulls the invoking message out of the context block Lisa
// sends to the model. The demo's scripted model uses it to answer the
// question that was asked rather than echo the whole block.
func invocationText(block string) string {
	_, rest, ok := strings.Cut(block, `invocation="true">`)
	if !ok {
		return ""
	}
	text, _, _ := strings.Cut(rest, "</message>")
	// Reply metadata follows the text as elements; the text itself has
	// every "<" escaped, so the first raw "<" starts the metadata.
	text, _, _ = strings.Cut(text, "<")
	return strings.TrimSpace(html.UnescapeString(text))
}
