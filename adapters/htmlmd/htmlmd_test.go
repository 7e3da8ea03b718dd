package htmlmd

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"golang.org/x/net/html"

	"github.com/lisabot/lisa/messages"
	"github.com/lisabot/lisa/testkit/hostile"
)

func wantToolErr(t *testing.T, err error, code messages.ToolCode) *messages.ToolError {
	t.Helper()
	var te *messages.ToolError
	if !errors.As(err, &te) {
		t.Fatalf("error %v (%T) is not a *messages.ToolError", err, err)
	}
	if te.Code != code {
		t.Fatalf("got code %s (%q), want %s", te.Code, te.Message, code)
	}
	return te
}

// samplePage is an article with the parts Lisa's research reads: head
// matter, navigation, prose with links, lists, code, a table, a quote and
// the parts that must go (script, style, forms, an image's address).
const samplePage = `<!doctype html><html><head><title>T</title><meta charset=utf-8>
<script>alert("head script")</script><style>p { color: red }</style></head><body>
<nav><a href="/">Home</a> › <a href="/docs/">Docs</a></nav>
<h1>Main Title</h1>
<p>See <a href="https://example.test/page">the page</a>, <a href="../up.html">a relative one</a>,
<a href="javascript:alert(1)">a bad link</a> and <code>x := 1</code>.
<p>Second <b>bold</b>, <em>stressed</em>, <s>struck</s>. <img src="https://images.example/cat.png" alt="a cat">
<h2>Section</h2>
<ul><li>first item<li>second item</ul>
<ol start="3"><li>step three</li><li>step four</li></ol>
<pre><code class="language-go">func main() {
	println("hi")
}
</code></pre>
<table><thead><tr><th>Name</th><th align="right">Age</th></tr></thead>
<tbody><tr><td>Ann<td>31<tr><td>Bob</td><td>42</td></tr></tbody></table>
<blockquote><p>quoted words</blockquote>
<form><input name=q><select><option>Choose me</select><textarea>typed</textarea><button>Go</button></form>
<script>document.write("body script")</script><noscript>enable scripts</noscript>
<template><p>template text</template><svg><text>svg text</text></svg>
</body></html>`

func TestConvertSamplePage(t *testing.T) {
	md, err := New(Config{}).Convert(context.Background(), []byte(samplePage))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"[Home](/) › [Docs](/docs/)",
		"# Main Title",
		"See [the page](https://example.test/page), [a relative one](../up.html), a bad link and `x := 1`.",
		"Second **bold**, *stressed*, ~~struck~~. a cat",
		"## Section",
		"- first item\n- second item",
		"3. step three\n4. step four",
		"```go\nfunc main() {\n\tprintln(\"hi\")\n}\n```",
		"| Name | Age |\n|---|--:|\n| Ann | 31 |\n| Bob | 42 |",
		"> quoted words",
		"Go",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("output lacks %q:\n%s", want, md)
		}
	}
	for _, gone := range []string{"script", "alert", "color: red", "enable scripts", "Choose me", "typed",
		"template text", "svg text", "cat.png", "images.example", "<", "javascript"} {
		if strings.Contains(md, gone) {
			t.Errorf("output keeps %q:\n%s", gone, md)
		}
	}
}

func TestLinkTargets(t *testing.T) {
	for _, tc := range []struct {
		href, want string
	}{
		{"https://example.org/a?b=c#d", "https://example.org/a?b=c#d"},
		{"  http://example.org/  ", "http://example.org/"},
		{"HTTPS://Example.org/", "HTTPS://Example.org/"},
		{"/path/page.html", "/path/page.html"},
		{"../up", "../up"},
		{"page?x=1", "page?x=1"},
		{"//cdn.example/x", "//cdn.example/x"},
		{"#section", ""},
		{"", ""},
		{"javascript:alert(1)", ""},
		{"JavaScript:alert(1)", ""},
		{"data:text/html,<p>x", ""},
		{"file:///etc/passwd", ""},
		{"mailto:a@example.org", ""},
		{"ftp://example.org/", ""},
		{"http:///no-host", ""},
		{"java\x00script:x", ""},
		{"https://example.org/" + strings.Repeat("a", maxURLBytes), ""},
	} {
		got, ok := linkTarget(tc.href)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("linkTarget(%q) = %q, %v; want %q", tc.href, got, ok, tc.want)
		}
	}
}

// TestNeverReadsFilesOrTheNetwork: addresses in a page (images, styles,
// scripts, frames, a base URL, links) are never requested or opened, and
// the package links no network or process code.
func TestNeverReadsFilesOrTheNetwork(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		fmt.Fprint(w, "SERVED-CONTENT")
	}))
	defer srv.Close()
	page := fmt.Sprintf(`<html><head><base href="%[1]s/base/"><link rel=stylesheet href="%[1]s/style.css">
<script src="%[1]s/app.js"></script><link rel=icon href="file:///etc/passwd"></head><body>
<img src="%[1]s/cat.png" alt="cat"><img src="file:///etc/passwd" alt="passwd">
<iframe src="%[1]s/frame"></iframe><object data="%[1]s/obj"></object><embed src="%[1]s/embed">
<video src="%[1]s/v.mp4" poster="%[1]s/poster.png"></video><picture><source srcset="%[1]s/s.png"></picture>
<p><a href="%[1]s/linked">a link</a> <a href="relative">a relative link</a></p></body></html>`, srv.URL)
	md, err := New(Config{}).Convert(context.Background(), []byte(page))
	if err != nil {
		t.Fatal(err)
	}
	if n := requests.Load(); n != 0 {
		t.Fatalf("the converter made %d requests", n)
	}
	if strings.Contains(md, "SERVED-CONTENT") || strings.Contains(md, "root:") || strings.Contains(md, "/base/") {
		t.Fatalf("output carries fetched, read or resolved content:\n%s", md)
	}
	if !strings.Contains(md, "[a link]("+srv.URL+"/linked)") || !strings.Contains(md, "[a relative link](relative)") {
		t.Fatalf("links lost or resolved:\n%s", md)
	}
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		switch dep {
		case "net", "net/http", "os/exec", "plugin":
			t.Errorf("the converter links %s", dep)
		}
	}
}

// TestDeadlineStopsTheWork: a conversion that runs out of time returns
// soon after its deadline, and, as it runs on the caller's goroutine,
// that means its work stopped too. Pages as large as the input bound: one
// whose tokens alone outlast the deadline, one whose tree is quick to
// build but long to render, and one long text, which meets only the
// library's passes that cannot be interrupted (linear, so the input bound
// bounds them).
func TestDeadlineStopsTheWork(t *testing.T) {
	pages := map[string][]byte{
		"many tokens":   []byte(strings.Repeat("<i>x</i>", DefaultMaxInputBytes/8)),
		"long render":   []byte(strings.Repeat("<blockquote><ul><li>", 3) + strings.Repeat("<p><a href='https://a.example/'>a <b>link</b></a> and words\n", DefaultMaxInputBytes/70)),
		"one long text": []byte(strings.Repeat("word ", DefaultMaxInputBytes/5)),
	}
	for name, page := range pages {
		t.Run(name, func(t *testing.T) {
			const timeout = 20 * time.Millisecond
			c := New(Config{Timeout: timeout, MaxOutputBytes: 256 << 20})
			start := time.Now()
			_, err := c.Convert(context.Background(), page)
			elapsed := time.Since(start)
			wantToolErr(t, err, messages.ToolTimeout)
			if elapsed > timeout+time.Second {
				t.Fatalf("returned %v after a %v deadline", elapsed, timeout)
			}
			t.Logf("%d bytes: stopped after %v", len(page), elapsed)
		})
	}
}

// TestQuotesStopAtTheDeadline: seven quotes around a <pre> of newlines
// as large as the input bound spend their time in the quote passes, which
// check the deadline; the library's own passes did not, and returned 1 s
// after a 100 ms deadline.
func TestQuotesStopAtTheDeadline(t *testing.T) {
	page := []byte(strings.Repeat("<blockquote>", 7) + "<pre>" + strings.Repeat("\n", DefaultMaxInputBytes-100))
	const timeout = 100 * time.Millisecond
	// The <pre>'s own rendering (one split of its text) cannot be
	// interrupted; the race detector slows it tenfold.
	margin := 300 * time.Millisecond
	if hostile.RaceEnabled {
		margin *= 10
	}
	start := time.Now()
	_, err := New(Config{Timeout: timeout}).Convert(context.Background(), page)
	elapsed := time.Since(start)
	wantToolErr(t, err, messages.ToolTimeout)
	if elapsed > timeout+margin {
		t.Fatalf("returned %v after a %v deadline", elapsed, timeout)
	}
}

// TestQuotesRenderAsTheLibraryDoes: the quote renderer gives the
// commonmark plugin's Markdown.
func TestQuotesRenderAsTheLibraryDoes(t *testing.T) {
	for page, want := range map[string]string{
		"<blockquote><p>a</p><p>b</p></blockquote>":                            "> a\n> \n> b",
		"<blockquote><blockquote>x</blockquote>y</blockquote>":                 "> > x\n> \n> y",
		"<blockquote>a<br><br><br><br>b</blockquote>":                          "> a\n> \n> b",
		"<blockquote><pre>" + strings.Repeat("\n", 5) + "x</pre></blockquote>": "> ```\n> \n\n\nx\n> ```",
		"<blockquote></blockquote><p>z</p>":                                    "z",
	} {
		md, err := New(Config{}).Convert(context.Background(), []byte(page))
		if err != nil || md != want {
			t.Errorf("%s: %q, %v; want %q", page, md, err, want)
		}
	}
}

func TestCallerCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := New(Config{}).Convert(ctx, []byte("<p>x</p>"))
	wantToolErr(t, err, messages.ToolConversionFailed)

	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	start := time.Now()
	_, err = New(Config{Timeout: time.Minute, MaxInputBytes: 64 << 20, MaxOutputBytes: 256 << 20}).Convert(ctx, []byte(strings.Repeat("<i>x</i>", 6<<20)))
	te := wantToolErr(t, err, messages.ToolConversionFailed)
	if !strings.Contains(te.Message, "cancelled") || time.Since(start) > 2*time.Second {
		t.Fatalf("%q after %v", te.Message, time.Since(start))
	}
}

func TestInputAndOutputBounds(t *testing.T) {
	c := New(Config{MaxInputBytes: 100, MaxOutputBytes: 50})
	_, err := c.Convert(context.Background(), []byte("<p>"+strings.Repeat("a", 98)))
	wantToolErr(t, err, messages.ToolOutputTooLarge)
	if md, err := c.Convert(context.Background(), []byte("<p>"+strings.Repeat("a", 50))); err != nil || len(md) != 50 {
		t.Fatalf("50 bytes out: %d %v", len(md), err)
	}
	_, err = c.Convert(context.Background(), []byte("<p>"+strings.Repeat("a", 51)))
	wantToolErr(t, err, messages.ToolOutputTooLarge)
	if New(Config{}).cfg.MaxInputBytes != DefaultMaxInputBytes || New(Config{}).cfg.Timeout != DefaultTimeout {
		t.Fatal("defaults not applied")
	}
}

// elements counts the element nodes below n, and returns the deepest
// element nesting and the deepest nesting of elements that copy.
func elements(n *html.Node) (count, depth, nesting int) {
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if c.Type != html.ElementNode {
			continue
		}
		k, d, m := elements(c)
		count += 1 + k
		depth = max(depth, d+1)
		if copies(c.Data) {
			m++
		}
		nesting = max(nesting, m)
	}
	return count, depth, nesting
}

// body returns the body of a built document.
func body(t *testing.T, doc *html.Node) *html.Node {
	t.Helper()
	if doc.FirstChild == nil || doc.FirstChild.Data != "html" || doc.FirstChild.FirstChild == nil || doc.FirstChild.FirstChild.Data != "body" {
		t.Fatal("document is not html > body")
	}
	return doc.FirstChild.FirstChild
}

func TestTreeBounds(t *testing.T) {
	for _, tc := range []struct {
		name                     string
		page                     string
		maxCount, depth, nesting int
		wantText                 string
	}{
		{"deep divs", strings.Repeat("<div>", 1000) + "deep text", MaxDepth, MaxDepth, 0, "deep text"},
		{"deep quotes", strings.Repeat("<blockquote>", 1000) + "quoted", MaxNesting, MaxNesting, MaxNesting, "quoted"},
		{"deep lists", strings.Repeat("<ul><li>", 1000) + "item", MaxNesting, MaxNesting, MaxNesting, "item"},
		{"mixed", strings.Repeat("<div><b>", 1000) + "mixed", MaxDepth, MaxDepth, MaxNesting, "mixed"},
		{"many elements", strings.Repeat("<p>x", 3*MaxElements), MaxElements, 1, 0, "xxx"},
		{"formatting bomb", "<p>" + strings.Repeat("<b>", 500) + strings.Repeat("<p>x", 5000), 5000 + 1 + MaxNesting, MaxNesting + 1, MaxNesting, "x"},
		{"unclosed cells", "<table>" + strings.Repeat("<td>", 1000), MaxTableColumns + 2, 3, 2, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc, err := buildTree(context.Background(), []byte(tc.page))
			if err != nil {
				t.Fatal(err)
			}
			count, depth, nesting := elements(body(t, doc))
			if count > tc.maxCount || depth != tc.depth || nesting != tc.nesting {
				t.Errorf("elements %d (at most %d), depth %d (want %d), nesting %d (want %d)", count, tc.maxCount, depth, tc.depth, nesting, tc.nesting)
			}
			var text strings.Builder
			for n := range body(t, doc).Descendants() {
				if n.Type == html.TextNode {
					if n.PrevSibling != nil && n.PrevSibling.Type == html.TextNode {
						t.Fatal("adjacent text nodes")
					}
					text.WriteString(n.Data)
				}
			}
			if !strings.Contains(text.String(), tc.wantText) {
				t.Errorf("text %q lacks %q", text.String(), tc.wantText)
			}
		})
	}
}

func TestTables(t *testing.T) {
	c := New(Config{})
	for _, tc := range []struct {
		name, page, want string
	}{
		{"implied rows and cells", "<table><td>a<td>b<tr><td>c<td>d</table>", "| a | b |\n|---|---|\n| c | d |"},
		{"spans are capped", `<table><tr><th colspan=99999>wide<th>x<tr><td>1<td>2<td>3<td>4<td>5</table>`, "| wide |  |  |  | x |\n|---|---|---|---|---|\n| 1 | 2 | 3 | 4 | 5 |"},
		{"sections", "<table><thead><tr><th>h<tbody><tr><td>b<tfoot><tr><td>f</table>", "| h |\n|---|\n| b |\n| f |"},
		{"cell outside a table", "<td>alone</td>", "alone"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			md, err := c.Convert(context.Background(), []byte(tc.page))
			if err != nil || md != tc.want {
				t.Fatalf("got %q (%v), want %q", md, err, tc.want)
			}
		})
	}
	// Too wide a row: later cells join the last one.
	doc, err := buildTree(context.Background(), []byte("<table><tr>"+strings.Repeat("<td>c", 2*MaxTableColumns)+"</table>"))
	if err != nil {
		t.Fatal(err)
	}
	cells := 0
	for n := range doc.Descendants() {
		if n.Data == "td" {
			cells++
		}
	}
	if cells != MaxTableColumns {
		t.Fatalf("%d cells, want %d", cells, MaxTableColumns)
	}
	// A sparse grid too large to pad is laid out as blocks.
	sparse := "<table><tr>" + strings.Repeat("<td>w", MaxTableColumns) + strings.Repeat("<tr><td>r", MaxTableCells/MaxTableColumns+1) + "</table>"
	md, err := c.Convert(context.Background(), []byte(sparse))
	if err != nil || strings.Contains(md, "|") || !strings.Contains(md, "w\n\nw") || !strings.Contains(md, "r\n\nr") {
		t.Fatalf("sparse table: %v\n%.300s", err, md)
	}
}

func TestCheck(t *testing.T) {
	v, err := New(Config{}).Check(context.Background())
	if err != nil || !strings.HasPrefix(v, "built-in (html-to-markdown") {
		t.Fatalf("%q %v", v, err)
	}
}

// TestConcurrentConversions: one converter serves the tool pool's workers
// at once (run with -race).
func TestConcurrentConversions(t *testing.T) {
	c := New(Config{})
	want, err := c.Convert(context.Background(), []byte(samplePage))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 5 {
				if got, err := c.Convert(context.Background(), []byte(samplePage)); err != nil || got != want {
					t.Errorf("concurrent conversion differs: %v", err)
				}
			}
		})
	}
	wg.Wait()
}

func TestClean(t *testing.T) {
	in := "# T\r\n\r\nline\x00 one\x1b[31m\x7f\u0085\tend\rnext\n\n\n\n\n\npara\n   \n\t\n \n \nlast\xff\n\n"
	want := "# T\n\nline one[31m\tend\nnext\n\n\npara\n\n\nlast\uFFFD"
	got := clean([]byte(in))
	if got != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
	if !utf8.ValidString(got) || clean(nil) != "" || clean([]byte("\n\n")) != "" {
		t.Fatal("clean")
	}
}
