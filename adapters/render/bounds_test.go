package render

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/renderer"
	"github.com/yuin/goldmark/util"
)

// unbounded returns a Renderer with goldmark's own parser, as New was
// before bounds.go.
func unbounded() *Renderer {
	r := New()
	r.md = goldmark.New(
		goldmark.WithExtensions(extension.Strikethrough, extension.Table, extension.Linkify),
		goldmark.WithRendererOptions(renderer.WithNodeRenderers(
			util.Prioritized(nodeRenderer{text: r.text}, 100),
		)),
	)
	return r
}

// TestBoundsKeepOrdinaryMarkdown checks that Markdown within the bounds
// of bounds.go, up to them included, renders exactly as with goldmark's
// own parser.
func TestBoundsKeepOrdinaryMarkdown(t *testing.T) {
	var indented strings.Builder
	for i := range maxBlockDepth {
		fmt.Fprintf(&indented, "%s- level %d\n", strings.Repeat("  ", i), i)
	}
	cases := []struct{ name, md string }{
		{"typical answer", benchMarkdown},
		{"quotes at the bound", strings.Repeat("> ", maxBlockDepth) + "x"},
		{"lists at the bound", strings.Repeat("- ", maxBlockDepth) + "x"},
		{"ordered lists at the bound", strings.Repeat("1. ", maxBlockDepth) + "x"},
		{"mixed containers at the bound", strings.Repeat("> - ", maxBlockDepth/2) + "x\n" + strings.Repeat("> ", maxBlockDepth/2) + "y"},
		{"indented lists at the bound", indented.String()},
		{"emphasis at the bound", strings.Repeat("*a* _b_ ", maxDelimiters/4)},
		{"strikethrough at the bound", strings.Repeat("~~a~~ ", maxDelimiters/2)},
		{"bounded emphasis per paragraph", strings.Repeat(strings.Repeat("**a** ", maxDelimiters/2)+"\n\n", 4)},
		{"snake case", strings.Repeat("snake_case_name ", maxDelimiters/2)},
		{"pending openers at the bound", strings.Repeat("[", maxLinkOpeners) + "x" + strings.Repeat("](https://e.example)", maxLinkOpeners)},
		{"many links in a paragraph", strings.Repeat("[a](https://e.example/a) ![i](https://e.example/i.png) [r] ", 500) + "\n\n[r]: https://e.example/r"},
		{"long destinations", strings.Repeat("[a](https://e.example/"+strings.Repeat("x", 2000)+") ", 20)},
		{"tilde runs", strings.Repeat("~", 5000) + " a ~~b~~ ~~~c~~~ ~d~ " + strings.Repeat("~", 3) + "x"},
		{"tilde fence", "~~~~\ncode ~~ here\n~~~~\n\n" + strings.Repeat("~", 100) + "\nx\n" + strings.Repeat("~", 100)},
		{"table", "| a | *b* | [c](https://e.example) |\n|---|:-:|--:|\n| ~~d~~ | `e` | f |"},
	}
	r, u := New(), unbounded()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, want := plainOf(t, r, c.md), plainOf(t, u, c.md)
			if got != want {
				t.Errorf("bounded parser renders differently\n got %.400q\nwant %.400q", got, want)
			}
		})
	}
}

// TestBoundsBeyondLimits shows what becomes of markup beyond the bounds
// of bounds.go: it stays in the answer as text.
func TestBoundsBeyondLimits(t *testing.T) {
	over := maxBlockDepth + 1
	cases := []struct {
		name, md string
		// html must contain each of these the given number of times.
		html map[string]int
		// plain must end with this.
		plainSuffix string
	}{
		{"quotes", strings.Repeat("> ", over) + "x",
			map[string]int{"<blockquote>": maxBlockDepth, "<p>&gt; x</p>": 1}, "> > x"},
		{"lists", strings.Repeat("- ", over) + "x",
			map[string]int{"<ul>": maxBlockDepth, "<li>- x</li>": 1}, "- - x"},
		{"ordered lists", strings.Repeat("1. ", over) + "x",
			map[string]int{"<ol>": maxBlockDepth, "<li>1. x</li>": 1}, "1. 1. x"},
		{"emphasis", strings.Repeat("*a* ", maxDelimiters/2+1),
			map[string]int{"<em>a</em>": maxDelimiters / 2, " *a*</p>": 1}, "a *a*"},
		{"strikethrough", strings.Repeat("~~a~~ ", maxDelimiters/2+1),
			map[string]int{"<del>a</del>": maxDelimiters / 2, " ~~a~~</p>": 1}, "~~a~~ ~~a~~"},
		{"link openers", strings.Repeat("[", maxLinkOpeners+1) + "x](https://e.example)",
			map[string]int{"<p>" + strings.Repeat("[", maxLinkOpeners-1) + `<a href="https://e.example">[x</a></p>`: 1}, "[x (https://e.example)"},
		{"link destination scan", "[a](" + strings.Repeat("x", maxLinkScan) + ")",
			map[string]int{"<p>[a](xxx": 1, "<a": 0}, "xxx)"},
	}
	r := New()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := plainOf(t, r, c.md)
			checkHTML(t, got.html)
			for s, n := range c.html {
				if k := strings.Count(got.html, s); k != n {
					t.Errorf("%d × %q in the HTML, want %d: %.400q", k, s, n, got.html)
				}
			}
			if !strings.HasSuffix(got.plain, c.plainSuffix) {
				t.Errorf("plain body ends %q, want %q", got.plain[max(0, len(got.plain)-40):], c.plainSuffix)
			}
		})
	}
}

func TestMarkupEnd(t *testing.T) {
	cases := []struct {
		md    string
		limit int
		want  int
	}{
		{"", 0, 0},
		{"plain text, (parens) & #hash", 0, 28},
		{"a\nb", 0, 1},
		{"a\nb", 1, 3},
		{"[x](y)", 1, 2},
		{"[x](y)", 2, 6},
		{"*_~`<|!]", 7, 7},
		{"*_~`<|!]", 8, 8},
	}
	for _, c := range cases {
		if got := markupEnd(c.md, c.limit); got != c.want {
			t.Errorf("markupEnd(%q, %d) = %d, want %d", c.md, c.limit, got, c.want)
		}
	}
}

// TestMarkupBound checks that Render cuts an answer with more than
// maxMarkup line breaks and markup characters, and only such an answer.
func TestMarkupBound(t *testing.T) {
	r := New()
	for _, n := range []int{maxMarkup, maxMarkup + 1} {
		b, err := r.Reply(strings.Repeat("[", n), "$e")
		if err != nil {
			t.Fatal(err)
		}
		var c parsed
		if err := json.Unmarshal(b, &c); err != nil {
			t.Fatal(err)
		}
		want := strings.Repeat("[", min(n, maxMarkup))
		if n > maxMarkup {
			want += "\n\n" + TruncatedMarker
		}
		if c.Body != want {
			t.Errorf("%d brackets: body %.40q… of %d bytes, want %d", n, c.Body, len(c.Body), len(want))
		}
	}
}
