package roomctx

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/format"
)

const (
	// maxConvertCPU is the CPU time one message's HTML conversion may
	// take, hostile input included (issue #15: one 56 KB message took
	// 34 s). Scaled by raceCPUFactor under the race detector.
	maxConvertCPU = 50 * time.Millisecond
	// raceCPUFactor scales CPU bounds when the race detector is on.
	raceCPUFactor = 20
	// maxConvertAlloc is what one message's HTML conversion may allocate
	// (issue #15: 17 GB in all, 3.5 GB resident). The race detector's
	// shadow memory is not heap, so this bound does not scale.
	maxConvertAlloc = 16 << 20
)

// bombHTML is the formatting bomb of issue #15: an open paragraph, depth
// nested <b> elements with distinct attributes, then paras paragraphs of
// one letter. The HTML parser reopens every <b> in every paragraph.
func bombHTML(depth, paras int) string {
	var b strings.Builder
	b.WriteString("<p>")
	for i := 1; i <= depth; i++ {
		fmt.Fprintf(&b, "<b c=%d>", i)
	}
	b.WriteString(strings.Repeat("<p>x", paras))
	return b.String()
}

// cpuLimit is maxConvertCPU, scaled under the race detector.
func cpuLimit() time.Duration {
	if raceEnabled {
		return maxConvertCPU * raceCPUFactor
	}
	return maxConvertCPU
}

// measure runs f and returns the CPU time and the bytes the process
// spent meanwhile. A run near the CPU bound is repeated, up to five
// times, and the least is taken: other processes on the machine only add
// to it. Tests calling measure must not be parallel.
func measure(t testing.TB, f func()) (time.Duration, uint64) {
	best, bestAlloc := time.Duration(1<<62), uint64(1<<63)
	for range 5 {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		cpu0 := processCPU(t)
		f()
		cpu := processCPU(t) - cpu0
		runtime.ReadMemStats(&after)
		best, bestAlloc = min(best, cpu), min(bestAlloc, after.TotalAlloc-before.TotalAlloc)
		if best <= cpuLimit()/2 || best > 4*cpuLimit() {
			break // clearly within, or clearly not
		}
	}
	return best, bestAlloc
}

// checkCost fails t when a conversion took more than the per-message
// bounds.
func checkCost(t testing.TB, what string, cpu time.Duration, alloc uint64) {
	t.Helper()
	limit := cpuLimit()
	t.Logf("%s: %v CPU, %d KiB allocated", what, cpu, alloc>>10)
	if cpu > limit {
		t.Errorf("%s: took %v CPU, want at most %v", what, cpu, limit)
	}
	if alloc > maxConvertAlloc {
		t.Errorf("%s: allocated %d KiB, want at most %d KiB", what, alloc>>10, maxConvertAlloc>>10)
	}
}

// TestHTMLFormattingBombFallsBackToBody: the formatting bomb of issue
// #15 (56 KB) is refused cheaply, and the message shows its plain body,
// freed of its reply fallback.
func TestHTMLFormattingBombFallsBackToBody(t *testing.T) {
	bomb := bombHTML(500, 13000)
	if n := len(bomb); n < 50_000 || n > 60_000 {
		t.Fatalf("bomb is %d bytes, want about 56 KB", n)
	}
	for _, tc := range []struct {
		name         string
		body         string
		trimFallback bool
		want         string
	}{
		{"plain", "the plain body", false, "the plain body"},
		{"reply", "> <@a:hs> quoted\n\nthe plain answer", true, "the plain answer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg := newMsg(tc.body, bomb)
			var got string
			cpu, alloc := measure(t, func() { got = messageText(msg, tc.trimFallback, nil) })
			checkCost(t, "bomb", cpu, alloc)
			if got != tc.want {
				t.Errorf("got %.200q, want %q", got, tc.want)
			}
		})
	}
}

// hostileHTML is generated worst-case Matrix HTML, by name: deep
// nesting, huge attributes, many entities, many tiny or unclosed tags,
// tables in tables, long preformatted text, and shapes that made the
// HTML parser or the Markdown converter do quadratic work. Most stay just
// within maxHTMLBytes and maxHTMLTokens, so they reach the parser.
func hostileHTML() map[string]string {
	r := strings.Repeat
	big := r("a", 60_000)
	return map[string]string{
		"div nested 10000":        r("<div>", 10_000) + "x",
		"blockquote nested 10000": r("<blockquote>", 10_000) + "x",
		"list nested 10000":       r("<ul><li>", 10_000) + "x",
		"span nested 5000":        r("<span>", 5000) + "x",
		"div nested 30 of p":      r("<div>", 30) + r("<p>x", 7400),
		"div nested 30 of /p":     r("<div>", 30) + r("</p>", 15_000),
		"href 60 KB":              `<a href="https://example.org/` + big + `">x</a>`,
		"title 60 KB":             `<b title="` + big + `">x</b>` + r("<p>y", 100),
		"spoiler 60 KB":           `<span data-mx-spoiler="` + big + `">x</span>`,
		"many attributes":         "<b" + r(" a=1", 15_000) + ">x</b>",
		"entities 20000":          r("&amp;", 20_000),
		"entities 12000":          r("&lt;&#38;", 6000),
		"raw ampersands":          r("&", 60_000),
		"tiny tags":               r("<i></i>", 5000),
		"tiny bold":               r("<b>x</b>", 5000),
		"tiny paragraphs":         r("<p>x", 8000),
		"tiny breaks":             r("x<br>", 8000),
		"tiny links":              r(`<a href="https://e.org/">x</a>`, 2000),
		"unclosed formatting":     r("<b><i><u><s>", 4000),
		"unclosed items":          "<ul>" + r("<li>x", 8000),
		"unclosed paragraphs":     r("<p>para <b>bold<br>line", 1500),
		"unclosed tables":         r("<table><tr><td>", 3000),
		"unclosed tables 100":     r("<table><tr><td>x", 100) + r("y<br>", 5000),
		"tables in tables":        r("<table><tr><td>", 30) + r("<table><tr><td>y</td></tr></table>", 100),
		"table of tables":         r("<table><tr><td><table><tr><td>x</td></tr></table></td></tr></table>", 60),
		"long pre":                "<pre><code>" + r("line of code\n", 4900) + "</code></pre>",
		"long pre of backticks":   "<pre><code>" + r("`", 60_000) + "</code></pre>",
		"code nested 30":          r("<code>", 30) + r("x`", 20_000),
		"reopened b":              "<p>" + r("<b>", 30) + r("<p>x", 7400),
		"reopened distinct":       "<p>" + r("<b c=1><i c=2><u c=3><s c=4>", 7) + r("<p>x", 7400),
		"reopened within bound":   "<p>" + r("<b c=1><i c=2><u c=3><s c=4>", 5) + r("<p>x", 180),
		"adoption agency":         "<b>" + r("<div>", 9) + r("</b>", 12_000),
		"adoption agency text":    r("<b><div>", 9) + r("x</b>", 7400),
		"nested links":            r(`<a href="https://e.org/">x`, 2400),
		"nobr":                    r("<nobr>x", 8000),
		"text between end tags":   r("x</i>", 7500),
		"text in a table":         "<table>" + r("x</i>", 7500),
		"space in a table":        "<table>" + r(" </i>", 7500),
		"text between cells":      r("x<td>", 7500),
		"quotes 8 of lines":       r("<blockquote>", 8) + r("<br>x", 7400),
		"lists 15 of lines":       r(`<ol start="999999999999999999"><li>`, 15) + r("<br>x", 7400),
		"select":                  r("<select><option>x</select>", 2500),
		"template":                r("<template>x</template>", 2800),
		"forms":                   r("<form>x</form>", 4500),
		"end tables":              "<div>" + r("</table>", 8000),
		"svg":                     "<svg>" + r("<g><text>x</text></g>", 2500),
		"svg breakout":            "<svg><style>" + r("<b c=1>", 20) + "</style>" + r("<p>x", 7400),
		"comments":                r("x<!---->", 8000),
		"bomb":                    bombHTML(500, 13_000),
		"bomb within depth":       bombHTML(30, 7400),
		"bomb reply":              "<mx-reply>" + r("<b>", 200) + "</mx-reply>" + bombHTML(500, 12_000),
	}
}

// TestHTMLHostileBounded: converting each hostile message costs at most
// maxConvertCPU and maxConvertAlloc, and the message still shows text:
// converted, or its plain body.
func TestHTMLHostileBounded(t *testing.T) {
	for name, src := range hostileHTML() {
		t.Run(name, func(t *testing.T) {
			msg := newMsg("the plain body", src)
			var got string
			cpu, alloc := measure(t, func() { got = messageText(msg, false, nil) })
			checkCost(t, name, cpu, alloc)
			if got == "" {
				t.Errorf("no text")
			}
			if len(got) > maxTextBytes {
				t.Errorf("%d bytes of text, want at most %d", len(got), maxTextBytes)
			}
		})
	}
}

// referenceHTMLToText is htmlToText as it was before the bounds of issue
// #15: the message parsed as it is, sanitized, rendered and converted
// (sanitize's additions, restoring renamed elements and dropping <wbr>,
// change nothing for messages without such names). For well-formed HTML
// the bounded conversion must give the same text.
func referenceHTMLToText(src string) string {
	doc, err := html.Parse(strings.NewReader(event.TrimReplyFallbackHTML(src)))
	if err != nil {
		return ""
	}
	sanitize(doc)
	var buf strings.Builder
	if err := html.Render(&buf, doc); err != nil {
		return ""
	}
	text, _ := format.HTMLToMarkdownFull(newHTMLParser(), buf.String())
	return cleanText(text)
}

// largeOrdinaryHTML is well-formed Matrix HTML of nearly the largest
// size an event allows, by name.
func largeOrdinaryHTML() map[string]string {
	r := strings.Repeat
	return map[string]string{
		"answer": r(`<h2>Heading</h2><p>Some <strong>bold</strong> text, <em>emphasis</em>, <code>code</code> and a <a href="https://example.org/x">link</a>.</p>`+
			`<ul><li>one</li><li>two <code>x</code></li></ul><pre><code class="language-sh">go test ./...
</code></pre><blockquote><p>quote</p></blockquote>`, 200),
		"nested lists":  r("<ul><li>item", 5) + r(`<li>more <b>text</b> and <a href="https://example.org/page">link</a></li>`, 800) + r("</li></ul>", 5),
		"ordered list":  `<ol start="7">` + r("<li><p>step <em>one</em></p><ol><li>sub</li></ol></li>", 1000) + "</ol>",
		"nested quotes": r("<blockquote>", 5) + r("<p>quoted text line with some words</p>", 1500) + r("</blockquote>", 5),
		"table": "<table><thead><tr><th>a</th><th>b</th><th>c</th></tr></thead><tbody>" +
			r("<tr><td>cell</td><td><b>bold</b></td><td>3</td></tr>", 1000) + "</tbody></table>",
		"highlighted code":   `<pre><code class="language-go">` + r(`<span data-mx-color="#cc7832">func</span> main() {`+"\n", 1200) + "</code></pre>",
		"colored paragraphs": r(`<font color="red"><p>text in <span data-mx-spoiler="why">font</span></p></font>`, 800),
		"deep nesting":       r("<div><ul><li>", 10) + r(`<p>deep <i>text</i> at depth 32</p>`, 500) + r("</li></ul></div>", 10),
	}
}

// TestHTMLLargeOrdinaryUnchanged: large well-formed messages convert as
// they did before the bounds, within them.
func TestHTMLLargeOrdinaryUnchanged(t *testing.T) {
	for name, src := range largeOrdinaryHTML() {
		t.Run(name, func(t *testing.T) {
			if len(src) > maxHTMLBytes || len(src) < 15_000 {
				t.Fatalf("%d bytes, want a large message within maxHTMLBytes", len(src))
			}
			var got string
			cpu, alloc := measure(t, func() { got = htmlToText(src) })
			checkCost(t, name, cpu, alloc)
			if want := referenceHTMLToText(src); got != want || got == "" {
				t.Errorf("got %d bytes, want %d as before:\n got %.300q\nwant %.300q", len(got), len(want), got, want)
			}
		})
	}
}

// TestHTMLToTextBounds: each bound falls back to the plain body (htmlToText
// gives ""), and what stays within converts.
func TestHTMLToTextBounds(t *testing.T) {
	r := strings.Repeat
	manyTags := r("<i>z</i>", 20) // enough start tags for the sentinels
	for _, tc := range []struct {
		name, in string
		converts bool
	}{
		{"bytes within", r("a", maxHTMLBytes), true},
		{"bytes beyond", r("a", maxHTMLBytes+1), false},
		{"tokens within", r("x<br>", maxHTMLTokens/2), true},
		{"tokens beyond", r("x<br>", maxHTMLTokens/2+1), false},
		{"depth within", manyTags + r("<div>", maxHTMLDepth) + "x", true},
		{"depth beyond", manyTags + r("<div>", maxHTMLDepth+1) + "x", false},
		{"depth within, few tags", r("<div>", 6) + "x", true},
		{"depth within, checked on the tree", r("<div>", maxHTMLDepth-2) + "x", true},
		{"depth beyond, checked on the tree", r("<div>", maxHTMLDepth+1) + "x", false},
		{"tables within", r("<table><tr><td>x</td></tr></table>", maxStackWalks/2), true},
		{"tables beyond", r("<table><tr><td>x</td></tr></table>", maxStackWalks/2+1), false},
		{"rendered beyond", r("&", maxRenderedBytes/5+1), false},
		{"markdown work beyond", r("<blockquote>", 10) + r("<br>x", 6000), false},
		{"text beyond", "<pre>" + r("`", maxTextBytes/3) + "</pre>", false},
		{"reparsed differently", `<a href="https://e.org/1">x<a href="https://e.org/2">y</a></a>` + r("<i>z</i>", 2000), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := htmlToText(tc.in)
			if converts := got != ""; converts != tc.converts {
				t.Errorf("converted %v (%d bytes), want %v", converts, len(got), tc.converts)
			}
		})
	}
}

// TestShallowMessagesSkipTheSentinelStack: a message whose estimated
// depth is small parses with one sentinel (no 478 elements to build) and
// has its depth checked on the tree; a deeper estimate fills the stack.
func TestShallowMessagesSkipTheSentinelStack(t *testing.T) {
	r := strings.Repeat
	for _, tc := range []struct {
		name      string
		in        string
		sentinels int
		check     bool
	}{
		{"plain", "<p>hello</p>", 1, false},
		{"one bold word (estimate 44)", "<p>a <strong>b</strong> c</p>", 1, true},
		{"nested divs within the estimate", r("<div>", maxHTMLDepth+1) + "x", 1, true},
		{"estimate beyond shallowDepth", r("<i>z</i>", 20) + "x", sentinelCount, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, sentinels, check, ok := prepareHTML(tc.in)
			if !ok || sentinels != tc.sentinels || check != tc.check {
				t.Fatalf("prepareHTML: %d sentinels, check %v, ok %v; want %d, %v, true", sentinels, check, ok, tc.sentinels, tc.check)
			}
		})
	}
	if got, want := htmlToText("<p>a <strong>b</strong> c</p>"), "a **b** c"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestHTMLToTextPreparedSame: the rewriting before parsing (escaped text,
// separated text runs, sentinels, renamed elements) gives the same text
// as parsing the message as it is.
func TestHTMLToTextPreparedSame(t *testing.T) {
	r := strings.Repeat
	for _, in := range []string{
		"a</i>b</i>c",
		"<table>a</i>b</table>c",
		"<table> </i> </table>c",
		"<p>a<td>b<th>c</p>",
		"x &lt;b&gt; &amp;amp; &#60;i&#62; y",
		"<xmp>a &amp; b</xmp>",
		"<textarea>a<b>c</textarea>after",
		"a<applet>dropped</applet>b<object>dropped</object>c",
		"<b>bold <i>both</b> italic</i>",
		"<p><b>open<p>still bold",
		"<!DOCTYPE html><html><head><title>t</title></head><body><p>x</p></body></html>",
		"<p>a<table><tr><td>cell</td></tr></table>b</p>",
		"<ul><li>one<li>two<ul><li>three</ul></ul>",
		"<pre>\n\nindented\n</pre>",
		"<svg><b>breaks out</b></svg>",
		r("<div>", 20) + "deep" + r("</div>", 20) + r("<b>x</b>", 50),
	} {
		if got, want := htmlToText(in), referenceHTMLToText(in); got != want {
			t.Errorf("htmlToText(%q)\n got %q\nwant %q", in, got, want)
		}
	}
	// A message cannot name the elements renamed for parsing.
	if got, want := htmlToText("<lisa-b>not bold</lisa-b> <lisa-lisa-i>x</lisa-lisa-i>"), "not bold x"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
