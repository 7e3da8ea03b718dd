package render

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/lisabot/lisa/testkit/golden"
)

// plainOf renders markdown and returns both formats of the answer alone.
func plainOf(t *testing.T, r *Renderer, md string) rendered {
	t.Helper()
	a, err := r.answer(cleanText(md))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestMarkdown(t *testing.T) {
	r := New()
	cases := []struct {
		name, in    string
		html, plain string
	}{
		{"paragraphs", "One\ntwo\n\nThree",
			"<p>One\ntwo</p>\n<p>Three</p>", "One\ntwo\n\nThree"},
		{"hard break", "a  \nb\\\nc",
			"<p>a<br>\nb<br>\nc</p>", "a\nb\nc"},
		{"headings", "# Top\n\nSetext\n------\n\n### *Three*",
			"<h1>Top</h1>\n<h2>Setext</h2>\n<h3><em>Three</em></h3>", "Top\n\nSetext\n\nThree"},
		{"emphasis", "**bold** *em* _u_ ~~gone~~",
			"<p><strong>bold</strong> <em>em</em> <em>u</em> <del>gone</del></p>", "bold em u ~~gone~~"},
		{"inline code", "run `go test` or ``a`b``",
			"<p>run <code>go test</code> or <code>a`b</code></p>", "run `go test` or ``a`b``"},
		{"nested lists", "- a\n- b\n  - c\n    1. d\n    2. e\n- f\n\n7. x\n8. y",
			"<ul>\n<li>a</li>\n<li>b\n<ul>\n<li>c\n<ol>\n<li>d</li>\n<li>e</li>\n</ol>\n</li>\n</ul>\n</li>\n<li>f</li>\n</ul>\n<ol start=\"7\">\n<li>x</li>\n<li>y</li>\n</ol>",
			"- a\n- b\n  - c\n    1. d\n    2. e\n- f\n\n7. x\n8. y"},
		{"loose list", "- one\n\n  more\n- two",
			"<ul>\n<li>\n<p>one</p>\n<p>more</p>\n</li>\n<li>\n<p>two</p>\n</li>\n</ul>", "- one\n\n  more\n\n- two"},
		{"fenced code with language", "```go\nfmt.Println(\"<hi>\")\n\n  x := 1\n```",
			"<pre><code class=\"language-go\">fmt.Println(&#34;&lt;hi&gt;&#34;)\n\n  x := 1\n</code></pre>",
			"```go\nfmt.Println(\"<hi>\")\n\n  x := 1\n```"},
		{"code containing fences", "````\n```\ninner\n```\n````",
			"<pre><code>```\ninner\n```\n</code></pre>", "````\n```\ninner\n```\n````"},
		{"hostile code language", "```go\"><script>\nx\n```",
			"<pre><code>x\n</code></pre>", "```go\"><script>\nx\n```"},
		{"indented code", "    a\n    b",
			"<pre><code>a\nb\n</code></pre>", "```\na\nb\n```"},
		{"nested quotes", "> outer\n>\n> > inner\n> > more\n>\n> back",
			"<blockquote>\n<p>outer</p>\n<blockquote>\n<p>inner\nmore</p>\n</blockquote>\n<p>back</p>\n</blockquote>",
			"> outer\n>\n> > inner\n> > more\n>\n> back"},
		{"quote in list", "- item\n\n  > quoted\n  > text",
			"<ul>\n<li>\n<p>item</p>\n<blockquote>\n<p>quoted\ntext</p>\n</blockquote>\n</li>\n</ul>",
			"- item\n\n  > quoted\n  > text"},
		{"thematic break", "a\n\n---\n\nb", "<p>a</p>\n<hr>\n<p>b</p>", "a\n\n---\n\nb"},
		{"safe links", "[site](https://example.org/a?b=1&c=2) [room](matrix:r/lisa:example.org) <https://auto.example> www.example.com [https://same.example](https://same.example)",
			`<p><a href="https://example.org/a?b=1&amp;c=2">site</a> <a href="matrix:r/lisa:example.org">room</a> <a href="https://auto.example">https://auto.example</a> <a href="http://www.example.com">www.example.com</a> <a href="https://same.example">https://same.example</a></p>`,
			"site (https://example.org/a?b=1&c=2) room (matrix:r/lisa:example.org) https://auto.example www.example.com https://same.example"},
		{"javascript link", "[click](javascript:alert(1))", "<p>click</p>", "click"},
		{"mixed case javascript", "[click](JaVaScRiPt:alert(1))", "<p>click</p>", "click"},
		{"entity-encoded javascript", "[click](&#106;avascript&#x3A;alert(1))", "<p>click</p>", "click"},
		{"whitespace-obfuscated javascript", "[a](&#x09;javascript:alert(1)) [b](<java script:alert(1)>) [c](jav&#x0A;ascript:alert(1))",
			"<p>a b c</p>", "a b c"},
		{"data link", "[x](data:text/html,<script>alert(1)</script>) [y](DATA:text/html;base64,PHNjcmlwdD4=)", "<p>x y</p>", "x y"},
		{"vbscript and file links", "[v](vbscript:msgbox(1)) [f](file:///etc/passwd)", "<p>v f</p>", "v f"},
		{"relative links", "[a](/path) [b](//evil.example/x) [c](#frag) [d](?q=1) [e](https:///nohost)", "<p>a b c d e</p>", "a b c d e"},
		{"unsafe reference link", "[x][r]\n\n[r]: javascript:alert(1)", "<p>x</p>", "x"},
		{"email autolink", "<me@example.org> and you@example.org", "<p>me@example.org and you@example.org</p>", "me@example.org and you@example.org"},
		{"emphasis in unsafe link", "[**bold** label](javascript:x)", "<p><strong>bold</strong> label</p>", "bold label"},
		{"raw script", "<script>alert(1)</script>",
			"<p>&lt;script&gt;alert(1)&lt;/script&gt;</p>", "<script>alert(1)</script>"},
		{"raw img onerror", "look <img src=x onerror=alert(1)> here",
			"<p>look &lt;img src=x onerror=alert(1)&gt; here</p>", "look <img src=x onerror=alert(1)> here"},
		{"raw html block", "<div onclick=\"x()\">\n<b>hi</b>\n</div>",
			"<p>&lt;div onclick=&#34;x()&#34;&gt;<br>\n&lt;b&gt;hi&lt;/b&gt;<br>\n&lt;/div&gt;</p>", "<div onclick=\"x()\">\n<b>hi</b>\n</div>"},
		{"image becomes alt text", "see ![a *cat*](https://example.org/cat.png) ![](https://example.org/x.png)",
			"<p>see a cat </p>", "see a cat"},
		{"image with hostile alt", "![<img src=x onerror=alert(1)>](javascript:x)",
			"<p>&lt;img src=x onerror=alert(1)&gt;</p>", "<img src=x onerror=alert(1)>"},
		{"entities", "AT&amp;T &copy; &#x3C;b&#x3E; &#169; \\*lit\\* 1 < 2 & \"q\" &bogus;",
			"<p>AT&amp;T © &lt;b&gt; © *lit* 1 &lt; 2 &amp; &#34;q&#34; &amp;bogus;</p>", "AT&T © <b> © *lit* 1 < 2 & \"q\" &bogus;"},
		{"table", "| a | b |\n|---|:-:|\n| 1 | **2** |\n| x\\|y | [l](https://e.example) |",
			"<table>\n<thead>\n<tr>\n<th>a</th>\n<th>b</th>\n</tr>\n</thead>\n<tbody>\n<tr>\n<td>1</td>\n<td><strong>2</strong></td>\n</tr>\n<tr>\n<td>x|y</td>\n<td><a href=\"https://e.example\">l</a></td>\n</tr>\n</tbody>\n</table>",
			"a | b\n1 | 2\nx|y | l (https://e.example)"},
		{"control characters", "a\x00b\x1b[31mc\r\nd\u0085e", "<p>ab[31mc\nde</p>", "ab[31mc\nde"},
		{"control character references", "a&#1;b&#x7f;c&#27;d", "<p>abcd</p>", "abcd"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := plainOf(t, r, c.in)
			if got.html != c.html {
				t.Errorf("HTML(%q)\n got %q\nwant %q", c.in, got.html, c.html)
			}
			if got.plain != c.plain {
				t.Errorf("plain(%q)\n got %q\nwant %q", c.in, got.plain, c.plain)
			}
			checkHTML(t, got.html)
		})
	}
}

func TestHTMLIsSanitized(t *testing.T) {
	r := New()
	cases := []struct {
		name, in      string
		want, notWant []string
	}{
		{"emphasis", "**bold** and `code`", []string{"<strong>bold</strong>", "<code>code</code>"}, nil},
		{"raw html escaped", "<script>alert(1)</script> hi", []string{"&lt;script&gt;"}, []string{"<script", "alert(1)</script>"}},
		{"javascript link dropped", "[x](javascript:alert(1))", nil, []string{"javascript:", "<a"}},
		{"https link kept", "[site](https://example.org/a)", []string{`href="https://example.org/a"`}, nil},
		{"matrix link kept", "[room](matrix:r/lisa:example.org)", []string{`href="matrix:r/lisa:example.org"`}, nil},
		{"image removed", "![x](https://example.org/x.png)", []string{"x"}, []string{"<img"}},
		{"code block language", "```go\nfmt.Println()\n```", []string{`class="language-go"`}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := r.HTML(c.in)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range c.want {
				if !strings.Contains(got, w) {
					t.Errorf("HTML(%q) = %q, missing %q", c.in, got, w)
				}
			}
			for _, w := range c.notWant {
				if strings.Contains(got, w) {
					t.Errorf("HTML(%q) = %q, contains %q", c.in, got, w)
				}
			}
		})
	}
}

func TestDeepNestingIsBounded(t *testing.T) {
	r := New()
	for _, in := range []string{
		strings.Repeat("> ", 2000) + "deep",
		strings.Repeat("- ", 2000) + "deep",
		strings.Repeat("1. ", 2000) + "deep",
		strings.Repeat("*", 3000) + "deep" + strings.Repeat("*", 3000),
		strings.Repeat("[", 500) + "deep" + strings.Repeat("](https://e.example)", 500),
		strings.Repeat("> - ", 500) + "deep",
	} {
		got := plainOf(t, r, in)
		checkHTML(t, got.html)
		if !strings.Contains(got.html, "deep") || !strings.Contains(got.plain, "deep") {
			t.Errorf("content lost for %.20q: %.200q / %.200q", in, got.html, got.plain)
		}
		if len(got.plain) > 4*len(in) {
			t.Errorf("plain body of %d bytes for %d bytes of %.20q", len(got.plain), len(in), in)
		}
	}
}

func TestReplyContent(t *testing.T) {
	b, err := New().Reply("Hello **there**\n\n- one\n- two", "$inv")
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	rel := c["m.relates_to"].(map[string]any)["m.in_reply_to"].(map[string]any)["event_id"]
	if rel != "$inv" || c[InvocationKey] != "$inv" || c["msgtype"] != "m.text" || c["format"] != "org.matrix.custom.html" {
		t.Fatalf("content = %s", b)
	}
	if body := c["body"].(string); body != "Hello there\n\n- one\n- two" {
		t.Fatalf("plain body = %q", body)
	}
	if m, ok := c["m.mentions"].(map[string]any); !ok || len(m) != 0 {
		t.Fatalf("m.mentions = %v", c["m.mentions"])
	}
	if _, err := New().Reply("   ", "$inv"); !errors.Is(err, ErrEmpty) {
		t.Fatalf("empty reply: err = %v", err)
	}
	for _, invisible := range []string{"[]()", "![](https://example.org/x.png)", "[a]: https://example.org", "&#32;"} {
		if _, err := New().Reply(invisible, "$inv"); !errors.Is(err, ErrEmpty) {
			t.Fatalf("Reply(%q): err = %v, want ErrEmpty", invisible, err)
		}
	}
	if _, err := New().Reply("hi", ""); err == nil {
		t.Fatal("reply without an event accepted")
	}
	// Deterministic: the same input gives byte-identical content.
	again, _ := New().Reply("Hello **there**\n\n- one\n- two", "$inv")
	if string(again) != string(b) {
		t.Fatal("rendering is not deterministic")
	}
	checkContent(t, b, "$inv")
	golden.Check(t, filepath.Join("testdata", "reply.golden"), indent(t, b))
}

func TestRenderFull(t *testing.T) {
	a := Answer{
		Markdown: "## Continuwuity\n\nIt is a **Matrix** homeserver written in Rust; see [the docs](https://continuwuity.org/docs) " +
			"and ignore [this](javascript:alert(1)).\n\n- fast\n- small\n\n```toml\nserver_name = \"example.org\"\n```\n\n> quoted <b>text</b>",
		Sources: []Source{
			{URL: "https://continuwuity.org/", Title: "Continuwuity — a Matrix homeserver"},
			{URL: "https://continuwuity.org#about", Title: "duplicate"},
			{URL: "javascript:alert(1)", Title: "bad"},
			{URL: "https://example.org/a?x=1&y=2", Title: "</a><script>alert(1)</script>\nsecond line"},
		},
		InReplyTo: Invoking{EventID: "$invoking", Sender: "@alice:example.org", Body: "@lisa what is <b>Continuwuity</b> & why?\nthanks"},
	}
	b, err := New().Render(a)
	if err != nil {
		t.Fatal(err)
	}
	c := checkContent(t, b, "$invoking")
	wantBody := "> <@alice:example.org> @lisa what is <b>Continuwuity</b> & why?\n> thanks\n\n" +
		"Continuwuity\n\nIt is a Matrix homeserver written in Rust; see the docs (https://continuwuity.org/docs) and ignore this.\n\n" +
		"- fast\n- small\n\n```toml\nserver_name = \"example.org\"\n```\n\n> quoted <b>text</b>\n\n" +
		"Sources:\n1. Continuwuity — a Matrix homeserver — https://continuwuity.org/\n" +
		"2. </a><script>alert(1)</script> second line — https://example.org/a?x=1&y=2"
	if c.Body != wantBody {
		t.Errorf("body\n got %q\nwant %q", c.Body, wantBody)
	}
	wantHTMLPrefix := "<mx-reply><blockquote>In reply to @alice:example.org<br>@lisa what is &lt;b&gt;Continuwuity&lt;/b&gt; &amp; why?<br>thanks</blockquote></mx-reply><h2>Continuwuity</h2>"
	wantHTMLSuffix := "\n<p><strong>Sources</strong></p><ol><li><a href=\"https://continuwuity.org/\">Continuwuity — a Matrix homeserver</a></li>" +
		"<li><a href=\"https://example.org/a?x=1&amp;y=2\">&lt;/a&gt;&lt;script&gt;alert(1)&lt;/script&gt; second line</a></li></ol>"
	if !strings.HasPrefix(c.FormattedBody, wantHTMLPrefix) || !strings.HasSuffix(c.FormattedBody, wantHTMLSuffix) {
		t.Errorf("formatted_body = %q", c.FormattedBody)
	}
	golden.Check(t, filepath.Join("testdata", "render_full.golden"), indent(t, b))
}

func TestSources(t *testing.T) {
	long := strings.Repeat("é", 300)
	var many []Source
	for i := range 15 {
		many = append(many, Source{URL: fmt.Sprintf("https://example.org/%d", i), Title: fmt.Sprint("t", i)})
	}
	cases := []struct {
		name string
		in   []Source
		want []Source
	}{
		{"none", nil, nil},
		{"exact duplicate", []Source{{"https://a.example/x", "A"}, {"https://a.example/x", "B"}}, []Source{{"https://a.example/x", "A"}}},
		{"normalised duplicates keep first use",
			[]Source{{"https://a.example/x/", "A"}, {"HTTPS://A.EXAMPLE/x", "B"}, {"https://a.example/x#part", "C"}, {"https://a.example/x?q=1", "D"}, {"http://a.example/x", "E"}},
			[]Source{{"https://a.example/x/", "A"}, {"https://a.example/x?q=1", "D"}, {"http://a.example/x", "E"}}},
		{"only absolute http and https", []Source{
			{"javascript:alert(1)", "js"}, {"JavaScript:alert(1)", "js"}, {"data:text/html,x", "data"}, {"vbscript:x", "vb"},
			{"ftp://a.example/", "ftp"}, {"matrix:r/x:y", "matrix"}, {"/relative", "rel"}, {"//a.example/x", "proto-relative"},
			{"https://", "no host"}, {"https://user:pw@a.example/", "credentials"}, {"https://a.example/\"><script>", "quote"},
			{"https://a.example/a b", "space"}, {"https://a.example/\x00", "nul"}, {"https://a.example/" + strings.Repeat("a", MaxSourceURLBytes), "too long"},
			{"\xff\xfe", "invalid"}, {"  https://ok.example/  ", "ok"},
		}, []Source{{"https://ok.example/", "ok"}}},
		{"bounded count", many, many[:MaxSources]},
		{"title cleaned and bounded", []Source{
			{"https://a.example/1", long},
			{"https://a.example/2", "  Line\none\t\u202eevil\x00  "},
			{"https://a.example/3", ""},
		}, []Source{
			{"https://a.example/1", strings.Repeat("é", MaxSourceTitleRunes) + "…"},
			{"https://a.example/2", "Line one evil"},
			{"https://a.example/3", "https://a.example/3"},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := acceptSources(c.in)
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Fatalf("acceptSources\n got %q\nwant %q", got, c.want)
			}
			for _, s := range got {
				if !utf8.ValidString(s.Title) || utf8.RuneCountInString(s.Title) > MaxSourceTitleRunes+1 {
					t.Fatalf("title %q", s.Title)
				}
			}
		})
	}
}

func TestSourcesRendering(t *testing.T) {
	b, err := New().Render(Answer{
		Markdown: "Answer.",
		Sources: []Source{
			{"https://a.example/x?a=1&b=2", "</a><script>alert(1)</script>"},
			{"javascript:alert(1)", "evil"},
			{"https://b.example/", "javascript:alert(1)"},
			{"https://c.example/", "<img src=x onerror=alert(1)>"},
		},
		InReplyTo: Invoking{EventID: "$e"},
	})
	if err != nil {
		t.Fatal(err)
	}
	c := checkContent(t, b, "$e")
	wantHTML := "<p>Answer.</p>\n<p><strong>Sources</strong></p><ol>" +
		"<li><a href=\"https://a.example/x?a=1&amp;b=2\">&lt;/a&gt;&lt;script&gt;alert(1)&lt;/script&gt;</a></li>" +
		"<li><a href=\"https://b.example/\">javascript:alert(1)</a></li>" +
		"<li><a href=\"https://c.example/\">&lt;img src=x onerror=alert(1)&gt;</a></li></ol>"
	if c.FormattedBody != wantHTML {
		t.Errorf("formatted_body\n got %q\nwant %q", c.FormattedBody, wantHTML)
	}
	wantBody := "Answer.\n\nSources:\n1. </a><script>alert(1)</script> — https://a.example/x?a=1&b=2\n" +
		"2. javascript:alert(1) — https://b.example/\n3. <img src=x onerror=alert(1)> — https://c.example/"
	if c.Body != wantBody {
		t.Errorf("body\n got %q\nwant %q", c.Body, wantBody)
	}
	if strings.Contains(c.FormattedBody, "evil") {
		t.Error("a javascript: source was rendered")
	}
}

func TestReplyFallback(t *testing.T) {
	cases := []struct {
		name      string
		inv       Invoking
		html, txt string
	}{
		{"no sender, no fallback", Invoking{EventID: "$e", Body: "hi"}, "", ""},
		{"escaped", Invoking{EventID: "$e", Sender: "@a:b", Body: "<b>x</b> & </blockquote></mx-reply><script>\nline two\n\nafter blank"},
			"<mx-reply><blockquote>In reply to @a:b<br>&lt;b&gt;x&lt;/b&gt; &amp; &lt;/blockquote&gt;&lt;/mx-reply&gt;&lt;script&gt;<br>line two<br><br>after blank</blockquote></mx-reply>",
			"> <@a:b> <b>x</b> & </blockquote></mx-reply><script>\n> line two\n>\n> after blank"},
		{"hostile sender", Invoking{EventID: "$e", Sender: "@x\n<script>\u202e:y", Body: "hi"},
			"<mx-reply><blockquote>In reply to @x &lt;script&gt;:y<br>hi</blockquote></mx-reply>",
			"> <@x <script>:y> hi"},
		{"empty body", Invoking{EventID: "$e", Sender: "@a:b", Body: " \n "},
			"<mx-reply><blockquote>In reply to @a:b</blockquote></mx-reply>", "> <@a:b>"},
		{"nested fallback stripped", Invoking{EventID: "$e", Sender: "@a:b", Body: "> <@c:d> earlier\n> more\n\nactual question"},
			"<mx-reply><blockquote>In reply to @a:b<br>actual question</blockquote></mx-reply>", "> <@a:b> actual question"},
		{"genuine quote kept", Invoking{EventID: "$e", Sender: "@a:b", Body: "> quoted\n\nmine"},
			"<mx-reply><blockquote>In reply to @a:b<br>&gt; quoted<br><br>mine</blockquote></mx-reply>", "> <@a:b> > quoted\n>\n> mine"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fb := replyFallback(c.inv)
			if fb.html != c.html || fb.plain != c.txt {
				t.Fatalf("fallback\n got %q / %q\nwant %q / %q", fb.html, fb.plain, c.html, c.txt)
			}
			b, err := New().Render(Answer{Markdown: "ok", InReplyTo: c.inv})
			if err != nil {
				t.Fatal(err)
			}
			got := checkContent(t, b, "$e")
			if !strings.HasPrefix(got.FormattedBody, c.html+"<p>ok</p>") {
				t.Fatalf("formatted_body = %q", got.FormattedBody)
			}
			wantBody := "ok"
			if c.txt != "" {
				wantBody = c.txt + "\n\nok"
			}
			if got.Body != wantBody {
				t.Fatalf("body = %q, want %q", got.Body, wantBody)
			}
		})
	}
}

func TestReplyFallbackIsBounded(t *testing.T) {
	body := strings.Repeat("ü<&>", 1000)
	fb := replyFallback(Invoking{EventID: "$e", Sender: "@" + strings.Repeat("s", 1000) + ":x", Body: body})
	quoted := strings.TrimPrefix(fb.plain, "> <@"+strings.Repeat("s", maxSenderBytes-1)+"> ")
	if quoted == fb.plain {
		t.Fatalf("sender not bounded: %.300q", fb.plain)
	}
	if n := utf8.RuneCountInString(quoted); n != MaxFallbackRunes+1 || !strings.HasSuffix(quoted, "…") {
		t.Fatalf("excerpt has %d runes: %q", n, quoted)
	}
	if strings.Count(fb.html, "&lt;") != MaxFallbackRunes/4 || strings.Contains(fb.html, "<&") {
		t.Fatalf("html excerpt not escaped and bounded: %q", fb.html)
	}
}

func TestSizeBound(t *testing.T) {
	const mb = 1 << 20
	fill := func(unit string) string { return strings.Repeat(unit, mb/len(unit)+1)[:mb] }
	bigSources := func(n int, unit string, size int) []Source {
		var s []Source
		for i := range n {
			s = append(s, Source{
				URL:   fmt.Sprintf("https://example.org/%d?", i) + strings.Repeat(unit, size)[:size-30],
				Title: strings.Repeat("<é>", 100),
			})
		}
		return s
	}
	cases := []struct {
		name    string
		md      string
		sources []Source
		minSrc  int
		sparse  bool // renders to little: no minimum size
	}{
		{"paragraphs", fill("Lorem ipsum dolor sit amet, consectetur.\n\n"), bigSources(3, "a", MaxSourceURLBytes), 3, false},
		{"one long line", fill("word "), nil, 0, false},
		{"escape expansion", fill("<&\""), bigSources(MaxSources, "&", 300), MaxSources, false},
		{"control characters", fill("\x01x\u2028"), nil, 0, false},
		{"links", fill("[a](https://e.example/&&&&&&) "), nil, 0, false},
		{"nested lists", fill("- a\n  - b\n    - c\n      > d\n"), nil, 0, false},
		{"deep quote", fill("> "), nil, 0, true},
		{"deep quote with text", fill("> x "), nil, 0, false},
		{"fenced code", "```\n" + fill("x := \"<>\"\n"), nil, 0, false},
		{"table", "| a | b |\n|---|---|\n" + fill("| <x> | & |\n"), nil, 0, false},
		{"multibyte", fill("日本語テキスト"), nil, 0, false},
		{"huge sources", "short", bigSources(MaxSources, "&", MaxSourceURLBytes), 1, true},
	}
	r := New()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := Answer{Markdown: c.md, Sources: c.sources,
				InReplyTo: Invoking{EventID: "$e", Sender: "@a:b", Body: strings.Repeat("<&>", 1000)}}
			b, err := r.Render(a)
			if err != nil {
				t.Fatal(err)
			}
			if len(b) > MaxContentBytes || len(b) >= 64<<10 {
				t.Fatalf("content is %d bytes", len(b))
			}
			got := checkContent(t, b, "$e")
			if len(c.md) >= mb && (!strings.Contains(got.Body, TruncatedMarker) || !strings.Contains(got.FormattedBody, "<p>"+TruncatedMarker+"</p>")) {
				t.Fatal("no truncation marker")
			}
			if n := strings.Count(got.FormattedBody, "<li><a href="); n < c.minSrc || n > MaxSources {
				t.Fatalf("%d sources listed, want at least %d", n, c.minSrc)
			}
			// The budget is used, not squandered: a cut answer still
			// fills a good part of it.
			if !c.sparse && len(b) < MaxContentBytes/2 {
				t.Fatalf("content is only %d bytes", len(b))
			}
		})
	}
}

func TestTruncationAtBlockBoundary(t *testing.T) {
	r := New()
	r.budget = 4096
	var md strings.Builder
	for i := range 200 {
		fmt.Fprintf(&md, "Paragraph %d has some words in it.\n\n", i)
	}
	b, err := r.Render(Answer{Markdown: md.String(), InReplyTo: Invoking{EventID: "$e"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > r.budget {
		t.Fatalf("%d bytes over a %d budget", len(b), r.budget)
	}
	var c parsed
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	paras := strings.Split(c.Body, "\n\n")
	if paras[len(paras)-1] != TruncatedMarker || len(paras) < 20 {
		t.Fatalf("body = %q", c.Body)
	}
	for _, p := range paras[:len(paras)-1] {
		if !strings.HasPrefix(p, "Paragraph ") || !strings.HasSuffix(p, " in it.") {
			t.Fatalf("cut inside a paragraph: %q", p)
		}
	}
	if !strings.HasSuffix(c.FormattedBody, "in it.</p>\n<p>"+TruncatedMarker+"</p>") {
		t.Fatalf("formatted_body = %q", c.FormattedBody)
	}
}

func TestCutMarkdown(t *testing.T) {
	cases := []struct {
		in   string
		n    int
		want string
	}{
		{"abc", 10, "abc"},
		{"aaaa\n\nbbbb\n\ncccc", 13, "aaaa\n\nbbbb"},
		{"aaaaaaaa\nbbbb", 11, "aaaaaaaa"},
		{"aaaaaaaaaaaa", 5, "aaaaa"},
		{"ééééé", 5, "éé"}, // never splits a rune
		{"ab", 0, ""},
	}
	for _, c := range cases {
		if got := cutMarkdown(c.in, c.n); got != c.want {
			t.Errorf("cutMarkdown(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}

func TestRenderConcurrent(t *testing.T) {
	r := New()
	a := Answer{Markdown: "# x\n\n- [a](https://a.example) *b*\n\n```go\nx\n```", Sources: []Source{{"https://s.example", "S"}},
		InReplyTo: Invoking{EventID: "$e", Sender: "@a:b", Body: "q"}}
	want, err := r.Render(a)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				got, err := r.Render(a)
				if err != nil || !bytes.Equal(got, want) {
					t.Errorf("concurrent render differs: %s (%v)", got, err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// indent pretty-prints JSON content for a golden file; indentation leaves
// every string value byte-for-byte as rendered.
func indent(t *testing.T, b []byte) string {
	t.Helper()
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		t.Fatal(err)
	}
	return out.String() + "\n"
}

// TestMentionsAsker: a reply's m.mentions names the invoking sender, and
// only them, so their client notifies them; a sender that is not a user
// ID, or no sender (persona replies through Reply), names nobody. Links
// to users stay text, so the bodies carry no pill for anyone else.
func TestMentionsAsker(t *testing.T) {
	r := New()
	for _, c := range []struct {
		sender string
		want   []string
	}{
		{"@alice:example.org", []string{"@alice:example.org"}},
		{"@a:b", []string{"@a:b"}},
		{"@bob:[::1]:8448", []string{"@bob:[::1]:8448"}},
		{"", nil},
		{"@:evil", nil},
		{"alice:example.org", nil},
		{"@alice", nil},
		{"@a b:example.org", nil},
		{"@a:b</blockquote><script>", nil},
		{"@a:b\n", nil},
		{"@" + strings.Repeat("a", 250) + ":example.org", nil},
	} {
		b, err := r.Render(Answer{Markdown: "Ask [Bob](https://matrix.to/#/@bob:example.org), " +
			"[Carol](matrix:u/carol:example.org) or <https://matrix.to/#/%40dave:example.org>; [the room](matrix:r/lisa:example.org) knows.",
			InReplyTo: Invoking{EventID: "$e", Sender: c.sender, Body: "who knows?"}})
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			Mentions      map[string][]string `json:"m.mentions"`
			FormattedBody string              `json:"formatted_body"`
		}
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.Mentions["user_ids"], c.want) || (c.want == nil && len(got.Mentions) != 0) {
			t.Errorf("sender %q: m.mentions = %v, want user_ids %v", c.sender, got.Mentions, c.want)
		}
		if strings.Contains(got.FormattedBody, `href="https://matrix.to`) || strings.Contains(got.FormattedBody, `href="matrix:u/`) {
			t.Errorf("sender %q: a user link in %s", c.sender, got.FormattedBody)
		}
		if !strings.Contains(got.FormattedBody, `href="matrix:r/lisa:example.org"`) {
			t.Errorf("room link lost: %s", got.FormattedBody)
		}
		checkContent(t, b, "$e")
	}
	b, err := r.Reply("Sorry.", "$e")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"m.mentions":{}`) {
		t.Errorf("Reply without a sender: %s", b)
	}
}

// TestRenderThread: a reply to an invocation in a thread is sent in that
// thread — rel_type m.thread with the root, is_falling_back false (it is
// a real reply) and m.in_reply_to the invoking event; a main-timeline
// reply has m.in_reply_to alone; an implausible root is ignored.
func TestRenderThread(t *testing.T) {
	r := New()
	inv := Invoking{EventID: "$invoking", Sender: "@alice:example.org", Body: "@lisa what time is it?", ThreadRoot: "$root"}
	b, err := r.Render(Answer{Markdown: "Time for **tea**.", InReplyTo: inv})
	if err != nil {
		t.Fatal(err)
	}
	checkContent(t, b, "$invoking")
	var got struct {
		RelatesTo map[string]json.RawMessage `json:"m.relates_to"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"rel_type": `"m.thread"`, "event_id": `"$root"`, "is_falling_back": "false", "m.in_reply_to": `{"event_id":"$invoking"}`}
	if len(got.RelatesTo) != len(want) {
		t.Fatalf("m.relates_to = %s", b)
	}
	for k, v := range want {
		if string(got.RelatesTo[k]) != v {
			t.Errorf("m.relates_to.%s = %s, want %s", k, got.RelatesTo[k], v)
		}
	}
	golden.Check(t, filepath.Join("testdata", "render_thread.golden"), indent(t, b))

	for _, root := range []string{"", "root", "$", "$a b", "$a\n", "$" + strings.Repeat("x", 255)} {
		inv.ThreadRoot = root
		b, err := r.Render(Answer{Markdown: "Main timeline.", InReplyTo: inv})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), `"m.relates_to":{"m.in_reply_to":{"event_id":"$invoking"}}`) {
			t.Errorf("root %q: %s", root, b)
		}
	}
}
