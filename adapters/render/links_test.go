package render

import (
	"strings"
	"testing"
)

// TestMisleadingLinks covers issue #15 item 7(a): a link whose visible
// text names a host other than its target's is shown as its target.
func TestMisleadingLinks(t *testing.T) {
	r := New()
	const evil = `<p><a href="https://evil.example">https://evil.example</a></p>`
	cases := []struct {
		name, in    string
		html, plain string
	}{
		// Text naming another host: the real target is shown instead.
		{"url text", "[https://bank.example](https://evil.example)", evil, "https://evil.example"},
		{"bare domain text", "[bank.example](https://evil.example)", evil, "https://evil.example"},
		{"www text with path", "[www.bank.example/login](https://evil.example)", evil, "https://evil.example"},
		{"host in a sentence", "[Log in at bank.example now](https://evil.example)", evil, "https://evil.example"},
		{"host in parentheses", "[Bank (bank.example).](https://evil.example)", evil, "https://evil.example"},
		{"host across emphasis", "[**bank**.example](https://evil.example)", evil, "https://evil.example"},
		{"host across code span", "[bank`.`example](https://evil.example)", evil, "https://evil.example"},
		{"host across strikethrough", "[~~bank~~.example](https://evil.example)", evil, "https://evil.example"},
		{"host as image alt", "[![bank.example](https://e.example/x.png)](https://evil.example)", evil, "https://evil.example"},
		{"host after a colon", "[see:bank.example](https://evil.example)", evil, "https://evil.example"},
		{"e-mail address text", "[support@bank.example](https://evil.example)", evil, "https://evil.example"},
		{"ipv4 text", "[192.168.1.1](https://evil.example)", evil, "https://evil.example"},
		{"localhost url text", "[http://localhost:8080/](https://evil.example)", evil, "https://evil.example"},
		{"subdomain of the target is another host", "[bank.example.evil.example](https://evil.example)", evil, "https://evil.example"},
		{"reference link", "[bank.example][r]\n\n[r]: https://evil.example", evil, "https://evil.example"},
		{"target path kept", "[https://bank.example/login](https://evil.example/login?x=1&y=2)",
			`<p><a href="https://evil.example/login?x=1&amp;y=2">https://evil.example/login?x=1&amp;y=2</a></p>`,
			"https://evil.example/login?x=1&y=2"},
		{"matrix target", "[https://bank.example](matrix:r/lisa:evil.example)",
			`<p><a href="matrix:r/lisa:evil.example">matrix:r/lisa:evil.example</a></p>`, "matrix:r/lisa:evil.example"},
		{"empty label", "[](https://evil.example)", evil, "https://evil.example"},
		{"file name with a country-code extension", "[README.md](https://github.com/o/r/blob/main/README.md)",
			`<p><a href="https://github.com/o/r/blob/main/README.md">https://github.com/o/r/blob/main/README.md</a></p>`,
			"https://github.com/o/r/blob/main/README.md"},
		{"only the link changes", "Pay at [bank.example](https://evil.example) or [the docs](https://d.example).",
			`<p>Pay at <a href="https://evil.example">https://evil.example</a> or <a href="https://d.example">the docs</a>.</p>`,
			"Pay at https://evil.example or the docs (https://d.example)."},

		// Credentials in a target make "https://bank.example@evil.example":
		// never a link.
		{"userinfo target", "[https://bank.example](https://bank.example@evil.example)",
			"<p>https://bank.example</p>", "https://bank.example"},
		{"userinfo autolink", "<https://bank.example@evil.example/>",
			"<p>https://bank.example@evil.example/</p>", "https://bank.example@evil.example/"},

		// Look-alikes: a non-ASCII host is shown in its xn-- form.
		{"cyrillic target", "[bank.example](https://bаnk.example)",
			`<p><a href="https://xn--bnk-6cd.example">https://xn--bnk-6cd.example</a></p>`, "https://xn--bnk-6cd.example"},
		{"cyrillic text and target", "[https://bаnk.example](https://bаnk.example/a)",
			`<p><a href="https://xn--bnk-6cd.example/a">https://xn--bnk-6cd.example/a</a></p>`, "https://xn--bnk-6cd.example/a"},
		{"cyrillic autolink", "<https://bаnk.example/a>",
			`<p><a href="https://xn--bnk-6cd.example/a">https://xn--bnk-6cd.example/a</a></p>`, "https://xn--bnk-6cd.example/a"},
		{"cyrillic top-level domain", "[bank.еxample](https://evil.example)", evil, "https://evil.example"},
		{"full-width text", "[ｂａｎｋ.example](https://bank.example)",
			`<p><a href="https://bank.example">https://bank.example</a></p>`, "https://bank.example"},
		{"ideographic full stop", "[bank。example](https://evil.example)", evil, "https://evil.example"},
		{"zero-width space in text host", "[bank\u200b.example](https://bank.example)",
			`<p><a href="https://bank.example">https://bank.example</a></p>`, "https://bank.example"},
		{"idn target with word label", "[Stadt](https://münchen.example/x)",
			`<p><a href="https://xn--mnchen-3ya.example/x">Stadt</a></p>`, "Stadt (https://xn--mnchen-3ya.example/x)"},

		// Not misleading: unchanged.
		{"words", "[the docs](https://evil.example)",
			`<p><a href="https://evil.example">the docs</a></p>`, "the docs (https://evil.example)"},
		{"same host other path", "[https://bank.example](https://bank.example/other)",
			`<p><a href="https://bank.example/other">https://bank.example</a></p>`, "https://bank.example (https://bank.example/other)"},
		{"case and www ignored", "[WWW.Bank.Example/login](https://bank.example./x)",
			`<p><a href="https://bank.example./x">WWW.Bank.Example/login</a></p>`, "WWW.Bank.Example/login (https://bank.example./x)"},
		{"port ignored", "[bank.example:8443](https://bank.example:8443/x)",
			`<p><a href="https://bank.example:8443/x">bank.example:8443</a></p>`, "bank.example:8443 (https://bank.example:8443/x)"},
		{"punycode text matching the target", "[xn--bnk-6cd.example](https://bаnk.example)",
			`<p><a href="https://xn--bnk-6cd.example">xn--bnk-6cd.example</a></p>`, "xn--bnk-6cd.example (https://xn--bnk-6cd.example)"},
		{"dotted words that are no domain", "[Node.js and v1.2.3, e.g. main.go](https://nodejs.org)",
			`<p><a href="https://nodejs.org">Node.js and v1.2.3, e.g. main.go</a></p>`, "Node.js and v1.2.3, e.g. main.go (https://nodejs.org)"},
		{"autolink", "<https://bank.example/a>",
			`<p><a href="https://bank.example/a">https://bank.example/a</a></p>`, "https://bank.example/a"},
		{"linkified www", "www.bank.example/a",
			`<p><a href="http://www.bank.example/a">www.bank.example/a</a></p>`, "www.bank.example/a"},
		{"unsafe target stays text", "[bank.example](javascript:alert(1))", "<p>bank.example</p>", "bank.example"},
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

// TestBidiControls covers issue #15 item 7(b): bidi controls never reach
// a reply, URLs hiding one (or an invisible character) are not links,
// and legitimate invisible characters in text survive.
func TestBidiControls(t *testing.T) {
	r := New()
	cases := []struct {
		name, in    string
		html, plain string
	}{
		{"rlo in text", "invoice\u202Etxt.exe", "<p>invoicetxt.exe</p>", "invoicetxt.exe"},
		{"every bidi control", "a\u202Ab\u202Bc\u202Cd\u202De\u202Ef\u2066g\u2067h\u2068i\u2069j\u200Ek\u200Fl\u061Cm",
			"<p>abcdefghijklm</p>", "abcdefghijklm"},
		{"character reference", "a&#x202E;b&#8238;c&#x2067;d", "<p>abcd</p>", "abcd"},
		{"in code", "`a\u202Eb` and\n\n```\nif x\u2067 {\n```", "<p><code>ab</code> and</p>\n<pre><code>if x {\n</code></pre>",
			"`ab` and\n\n```\nif x {\n```"},
		{"in link text", "[pay\u202Emoc.knab](https://e.example)", `<p><a href="https://e.example">paymoc.knab</a></p>`,
			"paymoc.knab (https://e.example)"},
		{"encoded in link text", "[pay&#x202E;moc.knab](https://e.example)", `<p><a href="https://e.example">paymoc.knab</a></p>`,
			"paymoc.knab (https://e.example)"},
		{"percent-encoded in url", "[x](https://e.example/a%E2%80%AEb) [y](https://e.example/%e2%81%a6)", "<p>x y</p>", "x y"},
		{"encoded in url", "[x](https://e.example/a&#x202E;b)", "<p>x</p>", "x"},
		{"zero-width in url host", "[x](https://bank%E2%80%8B.example/) [y](https://bank.example/%EF%BB%BF)", "<p>x y</p>", "x y"},
		{"zero-width in autolink", "<https://bank\u200B.example/>", "<p>https://bank\u200B.example/</p>", "https://bank\u200B.example/"},
		{"line separators", "one\u2028two\u2029three", "<p>one\ntwo\nthree</p>", "one\ntwo\nthree"},
		{"zwj emoji survives", "family: 👨\u200D👩\u200D👧 and 🏳\uFE0F\u200D🌈",
			"<p>family: 👨\u200D👩\u200D👧 and 🏳\uFE0F\u200D🌈</p>", "family: 👨\u200D👩\u200D👧 and 🏳\uFE0F\u200D🌈"},
		{"zwnj in persian text survives", "می\u200Cخواهم", "<p>می\u200Cخواهم</p>", "می\u200Cخواهم"},
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

// TestSourcesAreNotMisleading applies both rules to the Sources section,
// which the renderer writes itself from untrusted search results.
func TestSourcesAreNotMisleading(t *testing.T) {
	b, err := New().Render(Answer{
		Markdown: "Answer\u202E.",
		Sources: []Source{
			{"https://e.example/\u202Egpj.exe", "bidi in the URL"},
			{"https://e.example/%E2%80%AE", "encoded bidi in the URL"},
			{"https://bank\u200B.example/", "zero-width in the host"},
			{"https://evil.example/login", "https://bank.example/login"},
			{"https://bаnk.example/", "Bank"},
			{"https://xn--bnk-6cd.example/#dup", "duplicate of the previous"},
			{"https://d.example/", "Title \u202Ewith\u2066 bidi"},
			{"https://bank.example/", "bank.example — home"},
		},
		InReplyTo: Invoking{EventID: "$e", Sender: "@a\u202E:b", Body: "q\u2067?"},
	})
	if err != nil {
		t.Fatal(err)
	}
	c := checkContent(t, b, "$e")
	wantBody := "> <@a:b> q?\n\nAnswer.\n\nSources:\n" +
		"1. https://evil.example/login\n" +
		"2. Bank — https://xn--bnk-6cd.example/\n" +
		"3. Title with bidi — https://d.example/\n" +
		"4. bank.example — home — https://bank.example/"
	if c.Body != wantBody {
		t.Errorf("body\n got %q\nwant %q", c.Body, wantBody)
	}
	wantHTML := "<mx-reply><blockquote>In reply to @a:b<br>q?</blockquote></mx-reply><p>Answer.</p>\n" +
		"<p><strong>Sources</strong></p><ol>" +
		`<li><a href="https://evil.example/login">https://evil.example/login</a></li>` +
		`<li><a href="https://xn--bnk-6cd.example/">Bank</a></li>` +
		`<li><a href="https://d.example/">Title with bidi</a></li>` +
		`<li><a href="https://bank.example/">bank.example — home</a></li></ol>`
	if c.FormattedBody != wantHTML {
		t.Errorf("formatted_body\n got %q\nwant %q", c.FormattedBody, wantHTML)
	}
}

// TestNoBidiInAnyOutput renders hostile input through every path (answer,
// sources, fallback) and checks the whole content for bidi controls.
func TestNoBidiInAnyOutput(t *testing.T) {
	const rlo = "\u202E"
	md := "# h" + rlo + "\n\n- i" + rlo + "\n\n> q" + rlo + "\n\n| a" + rlo + " |\n|---|\n| b" + rlo + " |\n\n" +
		"<b" + rlo + ">\n\n[l" + rlo + "](https://e.example/" + rlo + ") <https://e.example/" + rlo + "> ![i" + rlo + "](x)"
	b, err := New().Render(Answer{
		Markdown:  md,
		Sources:   []Source{{URL: "https://s.example/", Title: "t" + rlo}},
		InReplyTo: Invoking{EventID: "$e", Sender: "@s" + rlo + ":x", Body: "b" + rlo},
	})
	if err != nil {
		t.Fatal(err)
	}
	c := checkContent(t, b, "$e")
	for _, s := range []string{string(b), c.Body, c.FormattedBody} {
		if i := strings.IndexFunc(s, isBidiControl); i >= 0 {
			t.Fatalf("bidi control at %d of %q", i, s)
		}
	}
}
