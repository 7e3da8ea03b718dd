package roomctx

import (
	"runtime"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzHTMLToText: Matrix HTML normalization never panics, yields valid
// UTF-8, stays within its cost bounds (at most maxTextBytes of text and
// maxConvertAlloc allocated), never lets script or style content through,
// and the memo returns what a conversion gives.
func FuzzHTMLToText(f *testing.F) {
	for _, seed := range []string{
		"<p>Hello <b>world</b></p>", "<pre><code class=\"language-go\">x := 1</code></pre>",
		"<ul><li>a<ul><li>b</li></ul></li></ul>", "<a href=\"javascript:alert(1)\">x</a>",
		"<script>SECRETSCRIPT</script>ok", "<style>SECRETSTYLE{}</style>", "<mx-reply><blockquote>q</blockquote></mx-reply>a",
		"<table><tr><td>a</td><td>b</td></tr></table>", "<<<>>>&amp;&#0;&#xD800;", strings.Repeat("<div>", 600),
		"<img src=x onerror=alert(1)>", "\xff\xfe<p>bad utf8</p>",
		bombHTML(500, 13_000), bombHTML(20, 200), "<b><i>x<p>y</b>z</i>", "<a href=1>x<a href=2>y",
		"x</i>y</i>z", "<table>x</i>y", "<svg><style><b>x</style><p>y", "<lisa-b>x</lisa-b><applet>y</applet>",
	} {
		f.Add(seed)
	}
	memo := newMemos(1 << 16)
	f.Fuzz(func(t *testing.T, src string) {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		out := htmlToText(src)
		runtime.ReadMemStats(&after)
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > maxConvertAlloc {
			t.Fatalf("allocated %d KiB converting %d bytes, want at most %d KiB", alloc>>10, len(src), maxConvertAlloc>>10)
		}
		if len(out) > maxTextBytes {
			t.Fatalf("%d bytes of text from %d bytes, want at most %d", len(out), len(src), maxTextBytes)
		}
		if !utf8.ValidString(out) {
			t.Fatalf("invalid UTF-8 from %q", src)
		}
		if first, again := memo.htmlToText(src), memo.htmlToText(src); first != out || again != out {
			t.Fatalf("memo gave %q then %q for %q, conversion %q", first, again, src, out)
		}
		// After plain text, script and style bodies never come out. (After
		// arbitrary markup the parser may read "<script" as part of another
		// tag, and then it is inert text, not a script.)
		const canary = "QQCANARYQQ"
		if strings.ContainsAny(src, "<&") || strings.Contains(src, canary) {
			return
		}
		withScript := htmlToText(src + "<script>" + canary + "</script><style>" + canary + "{}</style>")
		if strings.Contains(withScript, canary) {
			t.Fatalf("script or style content leaked after %q: %q", src, withScript)
		}
	})
}
