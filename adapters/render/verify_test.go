package render

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestUnverifiedLinks covers issue #32 item 1: a link or bare URL of the
// answer whose URL did not appear in the invocation is shown as text and
// counted; a known one (compared after normalisation) stays a link, and
// Matrix links keep the rules of links.go.
func TestUnverifiedLinks(t *testing.T) {
	known := []string{
		"https://fetched.example/page",
		"HTTPS://Search.Example:443/Result/?q=a%2fb#top",
		"http://xn--mnchen-3ya.example/stadt",
		"https://room.example/from-the-question",
	}
	cases := []struct {
		name, in    string
		html, plain string
		unverified  int
	}{
		{"invented inline link", "See [the report](https://invented.example/report).",
			"<p>See the report.</p>", "See the report.", 1},
		{"known inline link", "See [the page](https://fetched.example/page).",
			`<p>See <a href="https://fetched.example/page">the page</a>.</p>`, "See the page (https://fetched.example/page).", 0},
		{"known after normalisation", "[r](https://search.example/Result?q=a%2Fb) and [s](https://fetched.example/page/#part)",
			`<p><a href="https://search.example/Result?q=a%2Fb">r</a> and <a href="https://fetched.example/page/#part">s</a></p>`,
			"r (https://search.example/Result?q=a%2Fb) and s (https://fetched.example/page/#part)", 0},
		{"path case counts", "[r](https://search.example/result?q=a%2Fb)", "<p>r</p>", "r", 1},
		{"added query counts", "[p](https://fetched.example/page?ref=x)", "<p>p</p>", "p", 1},
		{"idn host known in xn-- form", "[Stadt](http://münchen.example/stadt)",
			`<p><a href="http://xn--mnchen-3ya.example/stadt">Stadt</a></p>`, "Stadt (http://xn--mnchen-3ya.example/stadt)", 0},
		{"bare url invented", "Read https://invented.example/x now.",
			"<p>Read <code>https://invented.example/x</code> now.</p>", "Read https://invented.example/x now.", 1},
		{"bare url known", "Read https://fetched.example/page now.",
			`<p>Read <a href="https://fetched.example/page">https://fetched.example/page</a> now.</p>`, "Read https://fetched.example/page now.", 0},
		{"www linkified invented", "Try www.invented.example today.",
			"<p>Try <code>www.invented.example</code> today.</p>", "Try www.invented.example today.", 1},
		{"autolink invented", "<https://invented.example/a>",
			"<p><code>https://invented.example/a</code></p>", "https://invented.example/a", 1},
		{"empty label invented", "[](https://invented.example/a)",
			"<p><code>https://invented.example/a</code></p>", "https://invented.example/a", 1},
		{"label with emphasis kept", "[**bold** report](https://invented.example/)",
			"<p><strong>bold</strong> report</p>", "bold report", 1},
		{"misleading label on an invented target", "[fetched.example](https://invented.example/)",
			"<p>fetched.example</p>", "fetched.example", 1},
		{"misleading label on a known target shows the target", "[bank.example](https://fetched.example/page)",
			`<p><a href="https://fetched.example/page">https://fetched.example/page</a></p>`, "https://fetched.example/page", 0},
		{"from the question", "As you said: https://room.example/from-the-question",
			`<p>As you said: <a href="https://room.example/from-the-question">https://room.example/from-the-question</a></p>`,
			"As you said: https://room.example/from-the-question", 0},
		{"matrix room link kept", "[the room](https://matrix.to/#/#lisa:example.org) or [here](matrix:r/lisa:example.org)",
			`<p><a href="https://matrix.to/#/%23lisa:example.org">the room</a> or <a href="matrix:r/lisa:example.org">here</a></p>`,
			"the room (https://matrix.to/#/#lisa:example.org) or here (matrix:r/lisa:example.org)", 0},
		{"matrix user link stays text as before", "[Bob](https://matrix.to/#/@bob:example.org)",
			"<p>Bob</p>", "Bob", 0},
		{"not allowed target stays text uncounted", "[x](javascript:alert(1))", "<p>x</p>", "x", 0},
		{"two invented", "[a](https://a.example) [b](https://b.example)", "<p>a b</p>", "a b", 2},
		{"image alt unchanged", "![pic](https://invented.example/p.png)", "<p>pic</p>", "pic", 0},
	}
	r := New()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := r.RenderReply(Answer{Markdown: c.in, InReplyTo: Invoking{EventID: "$q"}, CheckLinks: true, KnownURLs: known})
			if err != nil {
				t.Fatal(err)
			}
			var got content
			if err := json.Unmarshal(out.Content, &got); err != nil {
				t.Fatal(err)
			}
			if got.FormattedBody != c.html || got.Body != c.plain {
				t.Errorf("got\n html  %s\n plain %s\nwant\n html  %s\n plain %s", got.FormattedBody, got.Body, c.html, c.plain)
			}
			if out.LinksUnverified != c.unverified {
				t.Errorf("LinksUnverified = %d, want %d", out.LinksUnverified, c.unverified)
			}
			if c.unverified > 0 && strings.Contains(got.FormattedBody, "invented.example\"") {
				t.Errorf("an invented URL is still a link: %s", got.FormattedBody)
			}
		})
	}
}

// TestLinksUncheckedByDefault: without CheckLinks (the persona's texts,
// which the operator wrote) every allowed link stays, and nothing is
// counted.
func TestLinksUncheckedByDefault(t *testing.T) {
	out, err := New().RenderReply(Answer{Markdown: "[help](https://help.example/faq)", InReplyTo: Invoking{EventID: "$q"}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out.Content), `<a href=\"https://help.example/faq\">help</a>`) &&
		!strings.Contains(string(out.Content), `<a href="https://help.example/faq">help</a>`) {
		t.Fatalf("link lost: %s", out.Content)
	}
	if out.LinksUnverified != 0 {
		t.Fatalf("LinksUnverified = %d", out.LinksUnverified)
	}
}

// TestLinkKey pins the normal form URLs are compared in, which must
// agree with the research tools' known-URL form (adapters/research
// urlKey) on what they produce.
func TestLinkKey(t *testing.T) {
	for in, want := range map[string]string{
		"HTTPS://Ex.Example:443/a/b/?x=%7e&y=%2f#f": "https://ex.example/a/b?x=~&y=%2F",
		"http://ex.example:80":                      "http://ex.example",
		"http://ex.example./":                       "http://ex.example",
		"https://ex.example:8443/A":                 "https://ex.example:8443/A",
		"https://münchen.example/":                  "https://xn--mnchen-3ya.example",
		"https://[::1]:8080/x?":                     "https://[::1]:8080/x",
	} {
		got, ok := linkKey(in)
		if !ok || got != want {
			t.Errorf("linkKey(%q) = %q, %v; want %q", in, got, ok, want)
		}
		if again, _ := linkKey(got); again != got {
			t.Errorf("linkKey is not idempotent on %q: %q", got, again)
		}
	}
	for _, bad := range []string{"", "ftp://ex.example/", "https://user@ex.example/", "matrix:r/x:y", "/relative"} {
		if k, ok := linkKey(bad); ok {
			t.Errorf("linkKey(%q) = %q, want none", bad, k)
		}
	}
}
