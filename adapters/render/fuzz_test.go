package render

import (
	"errors"
	"html"
	"strings"
	"testing"
)

// nastyMarkdown seeds FuzzRender with inputs aimed at the sanitiser.
func nastyMarkdown() []string {
	return []string{
		"Hello **there**",
		"<script>alert(1)</script>",
		"<SCRIPT SRC=//evil.example/x.js></SCRIPT>",
		"x <img src=x onerror=alert(1)> y",
		"<svg/onload=alert(1)>",
		"<a href=\"javascript:alert(1)\">x</a>",
		"<iframe src=\"https://evil.example\"></iframe>",
		"<!-- c --><style>*{display:none}</style>",
		"<div onmouseover=\"alert(1)\">\n\n*md*\n\n</div>",
		"[x](javascript:alert(1))",
		"[x](JaVaScRiPt:alert(1))",
		"[x](java\tscript:alert(1))",
		"[x](<java script:alert(1)>)",
		"[x](&#106;avascript:alert(1))",
		"[x](&#x6A;avascript&#x3A;alert(1))",
		"[x](jav&#x09;ascript:alert(1))",
		"[x](&#x09;javascript:alert(1))",
		"[x](  javascript:alert(1)  )",
		"[x](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
		"[x](DATA:text/html,<script>alert(1)</script>)",
		"[x](vbscript:msgbox(1))",
		"[x](file:///etc/passwd)",
		"[x](/relative) [y](//evil.example) [z](?q) [w](#frag)",
		"[x](https://e.example/\"onclick=\"alert(1))",
		"[x](https://e.example/\x00) [y](matrix:r/lisa:example.org)",
		"[x][r]\n\n[r]: javascript:alert(1)",
		"<javascript:alert(1)> <https://e.example/\"><script>>",
		"www.example.com/<script> foo@example.com",
		"![x](javascript:alert(1)) ![<img src=x onerror=alert(1)>](https://e.example/x.png)",
		"![a ![b](c) [d](javascript:e)](f)",
		"```\"><script>alert(1)</script>\ncode\n```",
		"``` onerror=alert(1)\nx\n```",
		"```go onclick=x\n</code></pre><script>alert(1)</script>\n```",
		"`</code><script>`",
		"&lt;script&gt; &#60;script&#62; &amp;lt;script&amp;gt; &#0; &#xD800; &#99999999;",
		"| a | <b onclick=x>b</b> |\n|---|---|\n| <script> | [l](javascript:x) |",
		"\x00\x01\x1b[31m\x7f\u0085\u202e\ufeff\r\n\r",
		"\xff\xfe invalid utf-8 \xc3",
		strings.Repeat("> ", 300) + "deep",
		strings.Repeat("- ", 300) + "deep",
		strings.Repeat("1. ", 300) + "deep",
		strings.Repeat("[", 2000) + strings.Repeat("](x)", 10),
		strings.Repeat("*a", 2000),
		strings.Repeat("<", 3000),
		strings.Repeat("`", 100) + "x",
		"---\n***\n___\n# h\n## h2\nSetext\n===",
		// Misleading links (issue #15 item 7).
		"[https://bank.example](https://evil.example)",
		"[bank.example](https://evil.example) [www.bank.example/login](https://evil.example)",
		"[Log in at bank.example](https://evil.example) [**bank**.example](https://evil.example)",
		"[bank`.`example](https://evil.example) [~~bank~~.example](https://evil.example)",
		"[https://bank.example](https://bank.example@evil.example) <https://bank.example@evil.example>",
		"[bank.example](https://bаnk.example) <https://bаnk.example/a> [ｂａｎｋ.example](https://bank.example)",
		"[bank。example](https://evil.example) [bank\u200b.example](https://bank.example) [bank.еxample](https://e.example)",
		"[https://bank.example](matrix:r/x:evil.example) [](https://evil.example) [192.168.1.1](https://e.example)",
		"[bank.example][r]\n\n[r]: https://evil.example",
		"[![bank.example](x)](https://evil.example) [x://bank.example://evil.example](https://evil.example)",
		"[the docs](https://evil.example) [https://bank.example](https://bank.example/other) www.bank.example",
		// Bidi controls and invisible characters.
		"invoice\u202etxt.exe and [pay\u202emoc.knab](https://e.example)",
		"a&#x202E;b [x](https://e.example/a&#x202E;b) [y](https://e.example/%E2%80%AE)",
		"[x](https://bank%E2%80%8B.example/) <https://bank\u200b.example/> one\u2028two\u2029three",
		"`a\u2067b` 👨\u200d👩\u200d👧",
	}
}

func FuzzRender(f *testing.F) {
	hostile := []struct{ url, title, sender, body string }{
		{"https://example.org/a", "A title", "@alice:example.org", "hi Lisa"},
		{"javascript:alert(1)", "</a><script>alert(1)</script>", "@a:b</blockquote><script>", "</mx-reply><script>alert(1)</script>"},
		{"https://e.example/\"><script>", "javascript:alert(1)", "<@x>", "> <@bob:x> old\n\nnew & <b>"},
		{"data:text/html,<script>alert(1)</script>", "\x00\n\u202e title", "", ""},
		{"http://user:pw@e.example/", strings.Repeat("é", 500), "@z:y", strings.Repeat("<&>", 400)},
		{" HTTPS://E.EXAMPLE/x#f ", "<img src=x onerror=alert(1)>", "@\u202e:evil", "\r\n\r\n"},
		{"https://evil.example/login", "https://bank.example/login", "@a:b", "q\u2067?"},
		{"https://bаnk.example/", "bank.example", "@a:b", "x"},
		{"https://e.example/\u202egpj.exe", "t", "@a:b", "x"},
		{"https://e.example/%E2%80%AE", "Title \u202ewith\u2066 bidi", "@a:b", "x"},
		{"https://bank\u200b.example/", "www.bank.example", "@a:b", "x"},
	}
	for i, md := range nastyMarkdown() {
		h := hostile[i%len(hostile)]
		f.Add(md, h.url, h.title, h.sender, h.body)
	}
	r := New()
	f.Fuzz(func(t *testing.T, md, srcURL, title, sender, body string) {
		a := Answer{
			Markdown:  md,
			Sources:   []Source{{URL: srcURL, Title: title}, {URL: "https://example.org/" + srcURL, Title: md}},
			InReplyTo: Invoking{EventID: "$ev", Sender: sender, Body: body},
		}
		b, err := r.Render(a)
		if err != nil {
			if errors.Is(err, ErrEmpty) {
				return
			}
			t.Fatalf("Render(%q): %v", md, err)
		}
		// checkContent also asserts the link rule: no bidi control
		// anywhere in the content, and no anchor whose text names another
		// host than its href's.
		c := checkContent(t, b, "$ev")
		// The body may show "javascript:" as text when the input spells it
		// with character references or control characters in between
		// (those are decoded or removed); it must never come from nowhere.
		// (An href with it is dropped by the sanitiser; checkHTML checks.)
		in := md + srcURL + title + body
		spelled := cleanText(html.UnescapeString(in)) + cleanText(html.UnescapeString(cleanText(in)))
		if strings.Contains(c.Body, "javascript:") && !strings.Contains(strings.ToLower(spelled), "javascript") {
			t.Fatalf("body invents a javascript: URL: %q", c.Body)
		}
		again, err := r.Render(a)
		if err != nil || string(again) != string(b) {
			t.Fatalf("not deterministic: %s vs %s (%v)", b, again, err)
		}
	})
}
