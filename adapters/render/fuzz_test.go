package render

import (
	"errors"
	"fmt"
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

// hostileBytes is the size of a hostile answer: as much as the model can
// be made to echo of one hostile Matrix event (testkit/hostile builds
// bodies of about this size).
const hostileBytes = 60_000

// fill repeats unit after prefix until the whole, suffix included, is
// close to hostileBytes (never above it).
func fill(prefix, unit, suffix string) string {
	k := (hostileBytes - len(prefix) - len(suffix)) / len(unit)
	return prefix + strings.Repeat(unit, max(k, 0)) + suffix
}

// lines joins line(0), line(1), … while the whole stays within
// hostileBytes.
func lines(line func(i int) string) string {
	var b strings.Builder
	for i := 0; ; i++ {
		l := line(i) + "\n"
		if b.Len()+len(l) > hostileBytes {
			return b.String()
		}
		b.WriteString(l)
	}
}

// hostileMarkdown returns Markdown worst cases for goldmark, each about
// hostileBytes long: the markdown_* shapes of testkit/hostile and others
// aimed at block nesting, delimiter and bracket processing, raw HTML and
// entity scanning, code spans, tables, link reference definitions and
// linkify.
func hostileMarkdown() []struct{ name, md string } {
	say := "Lisa: what is this?"
	backtickRuns := func() string {
		var b strings.Builder
		b.WriteString(say + " ")
		for i := 1; b.Len()+i+1 <= hostileBytes; i++ {
			b.WriteString(strings.Repeat("`", i) + " ")
		}
		return b.String()
	}
	table := func(cols int) string {
		return say + "\n\n" + strings.Repeat("|a", cols) + "|\n" + strings.Repeat("|-", cols) + "|\n" + strings.Repeat("|b", cols) + "|"
	}
	return []struct{ name, md string }{
		// The shapes of testkit/hostile.
		{"markdown_quotes", fill(say+"\n", "> ", "x")},
		{"markdown_brackets", fill(say+" ", "[", "")},
		{"markdown_emphasis", fill(say+" ", "*_", "")},
		{"markdown_links", fill(say+" ", "[https://bank.example](https://evil.example) ", "")},
		{"markdown_backticks", fill(say+" ", "`", "")},
		// Block nesting.
		{"bullets", fill(say+"\n", "- ", "x")},
		{"ordered", fill(say+"\n", "1. ", "x")},
		{"quoted_bullets", fill(say+"\n", "> - ", "x")},
		{"plus_star_bullets", fill(say+"\n", "+ * ", "x")},
		{"quote_tabs", fill(say+"\n", ">\t", "x")},
		{"quote_no_space", fill(say+"\n", ">", "x")},
		{"deep_quote_lines", lines(func(int) string { return strings.Repeat("> ", 200) + "x" })},
		{"deep_bullet_lines", lines(func(int) string { return strings.Repeat("- ", 200) + "x" })},
		{"indented_bullets", lines(func(i int) string { return strings.Repeat("  ", i) + "- x" })},
		{"indented_ordered", lines(func(i int) string { return strings.Repeat("   ", i) + "1. x" })},
		{"empty_items", fill(say+"\n", "-\n", "")},
		// Brackets, links and images.
		{"closing_brackets", fill(say+" ", "]", "")},
		{"images", fill(say+" ", "![", "")},
		{"nested_links", say + " " + strings.Repeat("[", 7000) + "x" + strings.Repeat("](https://e.example)", 2600)},
		{"label_spans", fill(say+" "+strings.Repeat("[", 64), "`a` ", strings.Repeat("]", 64))},
		{"label_delimiters", fill(say+" "+strings.Repeat("[", 64), "*a_ ", strings.Repeat("]", 64))},
		{"open_destinations", fill(say+" ", "[a](", "")},
		{"open_angle_destinations", fill(say+" ", "[a](<", "")},
		{"destination_parens", fill(say+" [a](", "(", "")},
		{"open_titles", fill(say+" ", `[a](b "`, "")},
		{"open_paren_titles", fill(say+" ", "[a](b (", "")},
		{"open_paren_title_lines", fill(say+" ", "[a](b (\n", "")},
		{"open_ref_labels", fill(say+" ", "[a][", "")},
		{"undefined_refs", fill(say+" ", "[a]", "")},
		{"link_refs", lines(func(i int) string { return fmt.Sprintf("[r%d]: https://e.example/%d", i, i) })},
		{"ref_uses", fill("[a]: https://e.example\n\n"+say+" ", "[a]", "")},
		{"full_ref_uses", fill("[a]: https://e.example\n\n"+say+" ", "[x][a]", "")},
		{"open_refs", fill(say+"\n\n", "[a]: ", "")},
		// Emphasis and strikethrough delimiters.
		{"stars", fill(say+" ", "*", "")},
		{"star_words", fill(say+" ", "a*", "")},
		{"star_prefixes", fill(say+" ", "*a ", "")},
		{"underscore_words", fill(say+" ", " _a", "")},
		{"mixed_runs", fill(say+" ", "**a__", "")},
		{"openers_closers", fill(say+" ", "*a_ ", "")},
		{"mixed_run_lines", fill(say+" ", "**a__\n", "")},
		{"rule_of_three", fill(say+" ", "a***b**", "")},
		{"tildes", fill(say+" ", "~", "")},
		{"tilde_words", fill(say+" ", "~~a", "")},
		// Raw HTML (off, shown as text), entities and escapes.
		{"less_than", fill(say+" ", "<", "")},
		{"raw_tags", fill(say+" ", "<b>", "")},
		{"autolinks", fill(say+" ", "<ab:c>", "")},
		{"open_tags", fill(say+" ", "<a ", "")},
		{"open_attributes", fill(say+" <a", ` b="`, "")},
		{"open_comments", fill(say+" ", "<!--", "")},
		{"open_declarations", fill(say+" ", "<!X ", "")},
		{"open_cdata", fill(say+" ", "<![CDATA[", "")},
		{"open_instructions", fill(say+" ", "<?", "")},
		{"open_bangs", fill(say+" ", "<!", "")},
		{"open_autolinks", fill(say+" ", "<http:", "")},
		{"html_blocks", fill(say+"\n", "<div>\n", "")},
		{"ampersands", fill(say+" ", "&", "")},
		{"open_entities", fill(say+" ", "&#x", "")},
		{"entities", fill(say+" ", "&#x202E;", "")},
		{"backslashes", fill(say+" ", `\`, "")},
		// Code.
		{"backtick_runs", backtickRuns()},
		{"code_spans", fill(say+" ", "`a` ", "")},
		{"fences", fill(say+"\n", "```\n", "")},
		// Tables.
		{"pipes", fill(say+"\n\n", "|", "")},
		{"table_columns", table(9900)},
		{"table_rows", fill(say+"\n\n|a|b|\n|-|-|\n", "|x|y|\n", "")},
		{"table_cells", fill(say+"\n\n"+strings.Repeat("|a", 50)+"|\n"+strings.Repeat("|-", 50)+"|\n", strings.Repeat("|b", 50)+"|\n", "")},
		// Headings and breaks.
		{"headings", fill(say+"\n", "# x\n", "")},
		{"hashes", fill(say+"\n", "#", "")},
		{"setext", fill(say+"\n", "a\n=\n", "")},
		{"breaks", fill(say+"\n", "***\n", "")},
		// Linkify.
		{"www", fill(say+" ", "www.", "")},
		{"schemes", fill(say+" ", "http://", "")},
		{"emails", fill(say+" ", "a@b.", "")},
		{"urls", fill(say+" ", "www.e.example ", "")},
		{"paren_www", fill(say+" ", "(www.e.example", "")},
		{"paren_schemes", fill(say+" ", "(https://e.example/", "")},
		{"star_www", fill(say+" ", "*www.e.example", "")},
		{"underscore_www", fill(say+" ", "_www.e.example", "")},
		{"tilde_www", fill(say+" ", "~www.e.example", "")},
		{"paren_emails", fill(say+" ", "(a@e.example", "")},
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
	// Markdown that makes goldmark's work explode (see bounds.go).
	for _, c := range hostileMarkdown() {
		f.Add(c.md, "https://example.org/a", "A title", "@alice:example.org", "hi Lisa")
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
