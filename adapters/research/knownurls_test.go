package research

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lisabot/lisa/adapters/web"
	"github.com/lisabot/lisa/messages"
)

// TestFetchAllowsKnownURLs: every way a URL becomes known to an
// invocation lets fetch_web_page through, and only in that invocation.
func TestFetchAllowsKnownURLs(t *testing.T) {
	const (
		searched = "https://go.dev/"
		page     = "https://docs.example/guide"
		text     = "https://plain.example/notes.txt"
	)
	newSess := func() (*testSession, *pagesFetch) {
		fetch := &pagesFetch{pages: map[string]messages.WebPage{
			searched: {FinalURL: "https://go.dev/doc/", ContentType: "text/html", Body: []byte("<p>go</p>")},
			page:     {FinalURL: page, ContentType: "text/html", Body: []byte("<p>guide</p>")},
			text:     {FinalURL: text, ContentType: "text/plain", Body: []byte("mirror: https://mirror.example/notes.txt.")},
		}}
		s := newTestSession(t, Deps{
			Search: resultsSearch{{Title: "Go", URL: searched}},
			Fetch:  fetch,
			Convert: mapConvert{"<p>guide</p>": "See [the spec](https://spec.example/ref#types), " +
				"[next](/wiki/Go_(programming_language)), [up](../index.html) and <https://auto.example/x>."},
			MaxToolOutputCharacters: 4000,
		},
			// The invoking message and the room context, as the
			// invocation opens its session.
			"@lisa what does https://invoker.example/post?id=7&lang=en say? (see also HTTPS://Paren.Example/a_(b))",
			`<room_context room="!r:hs">`+"\n"+`<message sender="bob">`+
				"\nold link: https://context.example/a?b=1&amp;c=2, and docs at "+page+" (notes: "+text+")\n</message>\n</room_context>")
		return s, fetch
	}
	for _, c := range []struct {
		name  string
		setup []string // URLs fetched (and HTML converted) first
		url   string
	}{
		{name: "search result", url: searched},
		{name: "search result, trailing slash dropped", url: "https://go.dev"},
		{name: "redirect target of a fetch", setup: []string{searched}, url: "https://go.dev/doc"},
		{name: "invoking message", url: "https://invoker.example/post?id=7&lang=en"},
		{name: "invoking message, balanced parentheses", url: "https://paren.example/a_(b)"},
		{name: "room context, entity-escaped query", url: "https://context.example/a?b=1&c=2"},
		{name: "room context, as escaped", url: "https://context.example/a?b=1&amp;c=2"},
		{name: "room context, no trailing comma", url: page},
		{name: "absolute link in a converted page", setup: []string{page}, url: "https://spec.example/ref"},
		{name: "relative link in a converted page", setup: []string{page}, url: "https://docs.example/wiki/Go_(programming_language)"},
		{name: "dot-dot link in a converted page", setup: []string{page}, url: "https://docs.example/index.html"},
		{name: "autolink in a converted page", setup: []string{page}, url: "https://auto.example/x"},
		{name: "link in a plain-text page", setup: []string{text}, url: "https://mirror.example/notes.txt"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tools, fetch := newSess()
			call(t, tools, "web_search", map[string]string{"query": "q"})
			for _, u := range c.setup {
				r := call(t, tools, "fetch_web_page", map[string]string{"url": u})
				if !r.OK {
					t.Fatalf("setup fetch %s = %+v", u, r)
				}
				var meta struct {
					ArtifactID string `json:"artifact_id"`
				}
				if strings.Contains(r.Content, "html_to_markdown") {
					_ = jsonUnmarshal(r.Content, &meta)
					if r := call(t, tools, "html_to_markdown", map[string]string{"artifact_id": meta.ArtifactID}); !r.OK {
						t.Fatalf("setup convert = %+v", r)
					}
				}
			}
			before := len(fetch.requests())
			if r := call(t, tools, "fetch_web_page", map[string]string{"url": c.url}); !r.OK {
				t.Fatalf("fetch %s = %+v", c.url, r)
			}
			if got := fetch.requests(); len(got) != before+1 || got[before] != c.url {
				t.Fatalf("fetcher saw %q", got)
			}
			// A URL known to one invocation is unknown to the next.
			if c.setup != nil || c.name == "search result" {
				return
			}
			other := tools.another(t)
			if r := call(t, other, "fetch_web_page", map[string]string{"url": c.url}); r.OK || r.Code != string(ToolUnknownURL) {
				t.Fatalf("other invocation = %+v", r)
			}
		})
	}
}

// TestURLKeyNormalisation: URLs are compared after normalisation, and
// nothing that changes what the server receives is normalised away.
func TestURLKeyNormalisation(t *testing.T) {
	for _, c := range []struct {
		known, asked string
		same         bool
	}{
		{"HTTPS://Example.ORG/a", "https://example.org/a", true},
		{"https://example.org:443/a", "https://example.org/a", true},
		{"http://example.org:80/", "http://example.org", true},
		{"https://example.org/a#section", "https://example.org/a", true},
		{"https://example.org/a", "https://example.org/a#anything", true},
		{"https://example.org/a/", "https://example.org/a", true},
		{"https://example.org", "https://example.org/", true},
		{"https://example.org/a?", "https://example.org/a", true},
		{"https://example.org./a", "https://example.org/a", true},
		{"https://example.org/%7Euser", "https://example.org/~user", true},
		{"https://example.org/a?q=%2f", "https://example.org/a?q=%2F", true},
		{"https://example.org/wiki/Äpfel", "https://example.org/wiki/%c3%84pfel", true},
		{"https://example.org/?q=Äpfel", "https://example.org/?q=%C3%84pfel", true},
		{"https://bücher.example/", "https://xn--bcher-kva.example/", true},
		{"https://[0:0::1]:443/", "https://[::1]/", true},

		{"https://example.org/a", "http://example.org/a", false},
		{"https://example.org:8443/a", "https://example.org/a", false},
		{"https://example.org/a", "https://example.org/a/b", false},
		{"https://example.org/a", "https://example.org/A", false},
		{"https://example.org/a?q=1", "https://example.org/a", false},
		{"https://example.org/a", "https://example.org/a?q=1", false},
		{"https://example.org/a?q=1", "https://example.org/a?q=2", false},
		{"https://example.org/a?x=1&y=2", "https://example.org/a?y=2&x=1", false},
		{"https://example.org/a%2Fb", "https://example.org/a/b", false},
		{"https://example.org/", "https://sub.example.org/", false},
		{"https://example.org/", "https://user:pw@example.org/", false},
		{"https://example.org/", "ftp://example.org/", false},
	} {
		t.Run(c.known+" "+c.asked, func(t *testing.T) {
			k := newKnownURLs(10, web.ValidateURL)
			if !k.add(c.known) {
				t.Fatalf("%q was not added", c.known)
			}
			if got := k.has(c.asked); got != c.same {
				t.Fatalf("has(%q) = %v after add(%q), want %v", c.asked, got, c.known, c.same)
			}
		})
	}
	for _, bad := range []string{"", "https://user@example.org/", "file:///etc/passwd", "https:///nohost", "https://example.org/\x00",
		"https://example.org/" + strings.Repeat("a", web.MaxURLBytes)} {
		if k := newKnownURLs(10, web.ValidateURL); k.add(bad) || k.has(bad) {
			t.Errorf("%q was accepted", bad)
		}
	}
}

// TestKnownURLsBounded: the set stops growing at its limit (later URLs
// stay unknown: refused, never evicting earlier ones), one text adds at
// most maxURLsPerText, and a session never holds more than
// maxKnownURLs.
func TestKnownURLsBounded(t *testing.T) {
	k := newKnownURLs(3, web.ValidateURL)
	for i := range 5 {
		k.add(fmt.Sprintf("https://example.org/%d", i))
	}
	if k.len() != 3 || !k.has("https://example.org/0") || !k.has("https://example.org/2") || k.has("https://example.org/3") {
		t.Fatalf("bounded set holds %d, has(3) = %v", k.len(), k.has("https://example.org/3"))
	}
	if k.add("https://example.org/1") != true {
		t.Fatal("re-adding a known URL to a full set failed")
	}

	var b strings.Builder
	for i := range 3 * maxURLsPerText {
		fmt.Fprintf(&b, "https://example.org/%d ", i)
	}
	s := newTestSession(t, Deps{})
	s.state().allowURLsIn(b.String())
	if n := s.state().known.len(); n != maxURLsPerText {
		t.Fatalf("one text added %d URLs, want %d", n, maxURLsPerText)
	}
	for i := range 4 * maxKnownURLs / maxURLsPerText {
		b.Reset()
		for j := range maxURLsPerText {
			fmt.Fprintf(&b, "https://e%d.example/%d ", i, j)
		}
		s.state().allowURLsIn(b.String())
	}
	if n := s.state().known.len(); n != maxKnownURLs {
		t.Fatalf("the session holds %d URLs, want the limit %d", n, maxKnownURLs)
	}
	fetch := &pagesFetch{}
	s = newTestSession(t, Deps{Fetch: fetch}, b.String()) // the last batch: fits an empty session
	if r := call(t, s, "fetch_web_page", map[string]string{"url": "https://e0.example/0"}); r.OK || r.Code != string(ToolUnknownURL) {
		t.Fatalf("fetch = %+v", r)
	}
	if len(fetch.requests()) != 0 {
		t.Fatal("an unknown URL reached the fetcher")
	}
}

// TestExtractURLs: the extractor finds http(s) URLs in chat text and
// Markdown, trims the punctuation around them, and resolves relative
// Markdown links against the page.
func TestExtractURLs(t *testing.T) {
	base, _ := url.Parse("https://docs.example/guide/start.html")
	for _, c := range []struct {
		name, text string
		base       *url.URL
		want       []string
	}{
		{"none", "no links here, just http and https: words", nil, nil},
		{"sentence", "see https://a.example/x.", nil, []string{"https://a.example/x"}},
		{"case", "HTTP://A.example/Path", nil, []string{"HTTP://A.example/Path"}},
		{"parenthesised", "(see https://a.example/x)", nil, []string{"https://a.example/x"}},
		{"balanced parentheses", "https://en.wikipedia.org/wiki/Go_(lang), ok", nil, []string{"https://en.wikipedia.org/wiki/Go_(lang)"}},
		{"quoted", `"https://a.example/q?x=1&y=2"`, nil, []string{"https://a.example/q?x=1&y=2"}},
		{"angle brackets", "<https://a.example/>", nil, []string{"https://a.example/"}},
		{"markdown link", "[text](https://a.example/x \"t\")", nil, []string{"https://a.example/x"}},
		{"markdown link text is a URL", "[https://a.example](https://b.example)", nil, []string{"https://a.example", "https://b.example"}},
		{"ipv6", "http://[::1]:8080/x", nil, []string{"http://[::1]:8080/x"}},
		{"unicode path, ideographic space", "https://a.example/Äpfel\u3000next", nil, []string{"https://a.example/Äpfel"}},
		{"scheme only", "https:// http://", nil, nil},
		{"relative links", "[a](/x) [b](y.html) [c](../z) [d](#top) [e](mailto:x@y) [f](<p q.html>)", base, []string{
			"https://docs.example/x", "https://docs.example/guide/y.html", "https://docs.example/z",
			"https://docs.example/guide/start.html#top", "https://docs.example/guide/p%20q.html"}},
		{"relative links without a base", "[a](/x)", nil, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := extractURLs(c.text, c.base, 100)
			if !slices.Equal(got, c.want) {
				t.Fatalf("extractURLs(%q) = %q, want %q", c.text, got, c.want)
			}
		})
	}
}

// TestExtractURLsBounded: hostile text costs linear time and yields at
// most max URLs.
func TestExtractURLsBounded(t *testing.T) {
	var b strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&b, "https://a.example/%d ", i)
	}
	if got := extractURLs(b.String(), nil, 7); len(got) != 7 || got[6] != "https://a.example/6" {
		t.Fatalf("%q, want the first 7", got)
	}
	// Repeats are collected once, so they cannot use up the cap.
	if got := extractURLs(strings.Repeat("https://a.example/ ", 1000)+"https://b.example/", nil, 2); len(got) != 2 {
		t.Fatalf("%q, want both URLs", got)
	}
	for _, hostile := range []string{
		strings.Repeat("http", 1<<18),
		strings.Repeat("https://", 1<<17),
		"https://a.example/" + strings.Repeat(")", 1<<20),
		"https://a.example/" + strings.Repeat("(", 1<<20),
		strings.Repeat("](", 1<<19),
		strings.Repeat("](/", 1<<18),
		strings.Repeat("&amp;", 1<<18),
	} {
		start := time.Now()
		extractURLs(hostile, &url.URL{Scheme: "https", Host: "a.example"}, maxURLsPerText)
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("%d bytes of %q… took %v", len(hostile), hostile[:8], d)
		}
	}
}

// TestUnknownURLCode: the refusal uses its own stable code.
func TestUnknownURLCode(t *testing.T) {
	if ToolUnknownURL == messages.ToolInvalidURL || ToolUnknownURL != "unknown_url" {
		t.Fatal(ToolUnknownURL)
	}
}

// TestURLBoundMatchesFetcher: the extractor keeps exactly the URLs the
// fetcher could request.
func TestURLBoundMatchesFetcher(t *testing.T) {
	if maxURLBytes != web.MaxURLBytes {
		t.Fatalf("maxURLBytes = %d, web.MaxURLBytes = %d", maxURLBytes, web.MaxURLBytes)
	}
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }

// TestKnownURLsListed: KnownURLs lists what the session knows — the
// invoking message, search results, a fetched page's final URL and its
// links — in normal form, and nothing the model wrote; a closed or
// unknown session has none (issue #32 item 1: the answer's links are
// verified against it).
func TestKnownURLsListed(t *testing.T) {
	fetch := &pagesFetch{pages: map[string]messages.WebPage{
		"https://go.dev/": {FinalURL: "https://go.dev/doc/", ContentType: "text/plain", Body: []byte("see https://spec.example/ref")},
	}}
	s := newTestSession(t, Deps{Search: resultsSearch{{Title: "Go", URL: "https://go.dev/"}}, Fetch: fetch, MaxToolOutputCharacters: 4000},
		"@lisa what about HTTPS://Asked.Example:443/q/ ?")
	call(t, s, "web_search", map[string]string{"query": "q"})
	if r := call(t, s, "fetch_web_page", map[string]string{"url": "https://go.dev/"}); !r.OK {
		t.Fatalf("fetch = %+v", r)
	}
	// A URL the model asks for without its being known stays unknown.
	call(t, s, "fetch_web_page", map[string]string{"url": "https://invented.example/"})
	want := []string{"https://asked.example/q", "https://go.dev", "https://go.dev/doc", "https://spec.example/ref"}
	if got := s.svc.KnownURLs(s.id); !slices.Equal(got, want) {
		t.Fatalf("KnownURLs = %q, want %q", got, want)
	}
	s.svc.Close(s.id)
	if got := s.svc.KnownURLs(s.id); got != nil {
		t.Fatalf("closed session lists %q", got)
	}
}
