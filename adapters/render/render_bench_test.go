package render

import (
	"strings"
	"testing"
)

// benchMarkdown is a typical answer: a heading, paragraphs with emphasis
// and links, a list and a code block.
var benchMarkdown = strings.Repeat(`## Summary

The **short** answer is *yes*: see [the docs](https://example.org/docs) and `+"`go test -bench`"+`.

- first point with a [link](https://example.org/a)
- second point
- third point with <b>raw html</b> shown as text

`+"```go\nfunc main() { println(\"hi\") }\n```\n\n", 3)

// BenchmarkRender measures a whole reply: Markdown → sanitized Matrix HTML
// → plain body → reply payload with fallback and sources.
func BenchmarkRender(b *testing.B) {
	r := New()
	a := Answer{
		Markdown:  benchMarkdown,
		Sources:   []Source{{URL: "https://example.org/docs", Title: "Docs"}, {URL: "https://example.org/a", Title: "A"}},
		InReplyTo: Invoking{EventID: "$inv", Sender: "@ann:hs", Body: "Lisa, what do the docs say?"},
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Render(a); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRenderShort measures the instant scripted answer the bench
// command uses.
func BenchmarkRenderShort(b *testing.B) {
	r := New()
	a := Answer{Markdown: "Pong. This is the benchmark's **scripted** answer.", InReplyTo: Invoking{EventID: "$inv", Sender: "@ann:hs", Body: "Lisa, ping"}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Render(a); err != nil {
			b.Fatal(err)
		}
	}
}
