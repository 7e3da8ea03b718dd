package roomctx

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestHTMLToText(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"paragraphs and breaks", "<p>one</p><p>two<br>three</p>", "one\n\ntwo\nthree"},
		{"emphasis", "<em>a</em> <i>b</i> <strong>c</strong> <b>d</b> <del>e</del>", "_a_ _b_ **c** **d** ~~e~~"},
		{"inline code", "use <code>a &lt; b</code>", "use `a < b`"},
		{"inline code with backticks", "<code>a`b</code>", "``a`b``"},
		{"code block keeps tabs and language", "<pre><code class=\"language-go\">if x {\n\treturn\n}\n</code></pre>", "```go\nif x {\n\treturn\n}\n```"},
		{"code block with fence inside", "<pre><code>```\nx\n```\n</code></pre>", "````\n```\nx\n```\n````"},
		{"code language cannot break the fence", "<pre><code class=\"language-go x\">y</code></pre>", "```\ny\n```"},
		{"lists", "<ol start=\"3\"><li>c</li><li>d<ul><li>e</li></ul></li></ol>", "3. c\n4. d\n   * e"},
		{"quote", "<blockquote><p>q1</p><p>q2</p></blockquote>", "> q1\n>\n> q2"},
		{"heading and rule", "<h2>Title</h2><hr><p>x</p>", "## Title\n\n---\n\nx"},
		{"links", `<a href="https://e.org/a">text</a> <a href="https://e.org/b">https://e.org/b</a>`, "[text](https://e.org/a) <https://e.org/b>"},
		{"unsafe links keep text only", `<a href="javascript:alert(1)">js</a> <a href="data:text/html,x">data</a> <a href=" JAVASCRIPT:x">j2</a>`, "js data j2"},
		{"user pill", `hi <a href="https://matrix.to/#/@alice:hs">Alice</a>`, "hi Alice (@alice:hs)"},
		{"script and style vanish with content", `a<script>evil()</script><style>p{}</style><noscript>ns</noscript>b`, "ab"},
		{"media and forms vanish", `a<img src="mxc://x" alt="ALT"><video>V</video><audio>A</audio><iframe>I</iframe><input value="IN"><textarea>TA</textarea><select><option>O</option></select><button>B</button>b`, "ab"},
		{"form wrappers keep text", `<form><fieldset><legend>L</legend><label>name</label></fieldset></form>`, "Lname"},
		{"svg vanishes", `a<svg><text>SVG</text><script>x</script></svg>b`, "ab"},
		{"unknown tags keep text", `<marquee>m</marquee> <custom-el>c</custom-el> <font color="red">f</font>`, "m c f"},
		{"event handlers never show", `<b onclick="evil()" onmouseover="x()">bold</b>`, "**bold**"},
		{"comments vanish", "a<!-- hidden -->b", "ab"},
		{"reply fallback anywhere", `<mx-reply><blockquote>OLD</blockquote></mx-reply>new<mx-reply>X</mx-reply>`, "new"},
		{"entities decoded", "&lt;b&gt; &amp; &quot; &#x1F642;", "<b> & \" 🙂"},
		{"table", "<table><caption>Cap</caption><thead><tr><th>h1</th><th>h2</th></tr></thead><tbody><tr><td>a</td><td><b>b</b></td></tr></tbody></table>", "Cap\n| h1 | h2 |\n| --- | --- |\n| a | **b** |"},
		{"table without header", "<table><tr><td>1</td><td>2</td></tr><tr><td>3</td></tr></table>", "| 1 | 2 |\n| 3 |"},
		{"spoiler", `<span data-mx-spoiler="why">secret</span>`, "||why|secret||"},
		{"blank runs collapse", "<p>a</p><p></p><p></p><p>b</p>", "a\n\nb"},
		{"only dropped content", "<script>x</script>", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := htmlToText(tc.in); got != tc.want {
				t.Fatalf("htmlToText(%q)\n got %q\nwant %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestMessageTextFallsBackToBody(t *testing.T) {
	for _, tc := range []struct {
		name         string
		body, html   string
		trimFallback bool
		want         string
	}{
		{"html preferred", "plain", "<b>rich</b>", false, "**rich**"},
		{"empty html uses body", "plain", "<img src=x>", false, "plain"},
		{"reply fallback trimmed", "> <@a:hs> quoted\n\nanswer", "", true, "answer"},
		{"quote kept without reply", "> <@a:hs> quoted\n\nanswer", "", false, "> <@a:hs> quoted\n\nanswer"},
		{"line ends and blank lines", "a\r\nb\r\rc\n\n\n\nd  \n", "", false, "a\nb\n\nc\n\nd"},
		{"invalid utf-8", "a\xffb", "", false, "a\uFFFDb"},
		{"html nested too deep uses body", "plain", strings.Repeat("<b>", 600) + "x", false, "plain"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg := newMsg(tc.body, tc.html)
			if got := messageText(msg, tc.trimFallback, nil); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestCapText(t *testing.T) {
	for _, tc := range []struct {
		in        string
		max       int
		want      string
		chars     int
		truncated bool
	}{
		{"hello", 5, "hello", 5, false},
		{"hello", 4, "hell" + truncMarker, 4, true},
		{"héllo wörld", 7, "héllo w" + truncMarker, 7, true},
		{"ab 🙂🙂🙂", 4, "ab 🙂" + truncMarker, 4, true},
		{"ab    cd", 4, "ab" + truncMarker, 2, true},
		{"日本語テキスト", 3, "日本語" + truncMarker, 3, true},
		{"e\u0301e\u0301", 1, "e" + truncMarker, 1, true},
		// Budgets count the escaped form: & costs 5 (&amp;), < costs 4.
		{"&&&&", 12, "&&" + truncMarker, 10, true},
		{"a<b", 6, "a<b", 6, false},
		{"a<b", 5, "a<" + truncMarker, 5, true},
	} {
		got, chars, tr := capText(tc.in, tc.max)
		if got != tc.want || chars != tc.chars || tr != tc.truncated {
			t.Errorf("capText(%q, %d) = %q %d %v, want %q %d %v", tc.in, tc.max, got, chars, tr, tc.want, tc.chars, tc.truncated)
		}
		if !utf8.ValidString(got) {
			t.Errorf("capText(%q, %d) split a rune", tc.in, tc.max)
		}
	}
}

func TestEscape(t *testing.T) {
	in := "a&b<c>d\"e'f\ng\th\r\x00\x1b\uFFFE]]>"
	var text, attr strings.Builder
	escape(&text, in, false)
	escape(&attr, in, true)
	if want := "a&amp;b&lt;c>d\"e'f\ng\th&#13;\uFFFD\uFFFD\uFFFD]]&gt;"; text.String() != want {
		t.Errorf("text: got %q, want %q", text.String(), want)
	}
	if want := "a&amp;b&lt;c&gt;d&quot;e&#39;f&#10;g&#9;h&#13;\uFFFD\uFFFD\uFFFD]]&gt;"; attr.String() != want {
		t.Errorf("attr: got %q, want %q", attr.String(), want)
	}
}

func TestCleanName(t *testing.T) {
	for in, want := range map[string]string{
		"  Alice  ":               "Alice",
		"Bob\n\tthe\u202eBuilder": "Bob the Builder",
		"":                        "",
		"\u2066\u2069":            "",
		strings.Repeat("x", 100):  strings.Repeat("x", maxNameChars-1) + "…",
		"bad\xffutf8":             "bad\uFFFDutf8",
		"👩\u200d💻 coder":          "👩\u200d💻 coder",
	} {
		if got := cleanName(in); got != want {
			t.Errorf("cleanName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestValidEventID(t *testing.T) {
	for in, want := range map[string]bool{
		"$abc":                         true,
		"$abc:server.org":              true,
		"$a+b/c=":                      true,
		"":                             false,
		"$":                            false,
		"abc":                          false,
		"$a b":                         false,
		"$a\nb":                        false,
		"$" + strings.Repeat("a", 300): false,
	} {
		if got := validEventID(eventID(in)); got != want {
			t.Errorf("validEventID(%q) = %v", in, got)
		}
	}
}
