package render

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// allowedAttrs returns the attributes element tag may carry in a reply,
// and false if the element is not allowed at all.
func allowedAttrs(tag string) ([]string, bool) {
	switch tag {
	case "mx-reply", "p", "br", "hr", "strong", "b", "em", "i", "del", "s", "u", "pre", "blockquote",
		"ul", "li", "h1", "h2", "h3", "h4", "h5", "h6", "table", "thead", "tbody", "tr", "th", "td", "sup", "sub":
		return nil, true
	case "code":
		return []string{"class"}, true
	case "ol":
		return []string{"start"}, true
	case "a":
		return []string{"href"}, true
	}
	return nil, false
}

// onlyOf reports whether s is 1 to n bytes, each in chars.
func onlyOf(s string, n int, chars string) bool {
	if s == "" || len(s) > n {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !strings.ContainsRune(chars, rune(s[i])) {
			return false
		}
	}
	return true
}

// checkHTML fails t unless s, parsed as a browser would, contains only
// allowlisted elements and attributes, no comments, no event handlers,
// no bidi controls, only http, https or matrix link targets, and no link
// whose text names another host than its target's (see checkLinkText).
func checkHTML(t testing.TB, s string) {
	t.Helper()
	if strings.Contains(strings.ToLower(s), "<script") {
		t.Fatalf("HTML contains <script: %q", s)
	}
	checkNoBidi(t, s)
	body := &html.Node{Type: html.ElementNode, Data: "body", DataAtom: atom.Body}
	nodes, err := html.ParseFragment(strings.NewReader(s), body)
	if err != nil {
		t.Fatalf("parse %q: %v", s, err)
	}
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		switch n.Type {
		case html.ElementNode:
			attrs, ok := allowedAttrs(n.Data)
			if !ok {
				t.Fatalf("element <%s> not allowed in %q", n.Data, s)
			}
			hasHref := false
			for _, a := range n.Attr {
				key := strings.ToLower(a.Key)
				if strings.HasPrefix(key, "on") {
					t.Fatalf("event handler %s=%q in %q", a.Key, a.Val, s)
				}
				allowed := false
				for _, k := range attrs {
					allowed = allowed || k == key
				}
				if !allowed || a.Namespace != "" {
					t.Fatalf("attribute %s on <%s> not allowed in %q", a.Key, n.Data, s)
				}
				switch key {
				case "href":
					hasHref = true
					checkHref(t, a.Val, s)
				case "class":
					lang, ok := strings.CutPrefix(a.Val, "language-")
					if !ok || !onlyOf(lang, 32, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_+-") {
						t.Fatalf("class %q in %q", a.Val, s)
					}
				case "start":
					if !onlyOf(a.Val, 6, "0123456789") {
						t.Fatalf("start %q in %q", a.Val, s)
					}
				}
			}
			if n.Data == "a" && !hasHref {
				t.Fatalf("dangling <a> in %q", s)
			}
			if n.Data == "a" {
				checkLinkText(t, n, s)
			}
		case html.CommentNode, html.DoctypeNode:
			t.Fatalf("markup node %q in %q", n.Data, s)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	for _, n := range nodes {
		walk(n)
	}
}

// checkNoBidi fails t if s holds a bidi control character.
func checkNoBidi(t testing.TB, s string) {
	t.Helper()
	for i, c := range s {
		switch {
		case c == 0x061c, c == 0x200e, c == 0x200f, c >= 0x202a && c <= 0x202e, c >= 0x2066 && c <= 0x2069:
			t.Fatalf("bidi control %U at %d in %q", c, i, s)
		}
	}
}

// visibleText is the text a reader sees inside n.
func visibleText(n *html.Node) string {
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return b.String()
}

// checkLinkText fails t when the visible text of a, an anchor in s, names
// a host (as namedHosts finds them) that is not its target's, or one with
// a non-ASCII character, or when any "://" in it is followed by another
// host than the target's. The second check does not rely on the code
// under test: the run of ASCII host characters after "://" must be the
// target's host (case, a trailing dot and a leading "www." aside) and end
// there. Text that is the target URL itself passes.
func checkLinkText(t testing.TB, a *html.Node, s string) {
	t.Helper()
	var href string
	for _, at := range a.Attr {
		if at.Key == "href" {
			href = at.Val
		}
	}
	u, err := url.Parse(href)
	if err != nil {
		t.Fatalf("href %q in %q: %v", href, s, err)
	}
	key := strings.TrimPrefix(strings.TrimSuffix(strings.ToLower(u.Hostname()), "."), "www.")
	text := visibleText(a)
	if strings.TrimSpace(text) == "" {
		t.Fatalf("link to %q without text in %q", href, s)
	}
	if text == href {
		return
	}
	if tu, err := url.Parse(text); err == nil && tu.String() == u.String() {
		return // the same URL, percent-encoded differently
	}
	namedHosts(text, func(host string) bool {
		if u.Host == "" || !isASCII(host) || hostKey(host) != key {
			t.Fatalf("link text %q names host %q, target %q in %q", text, host, href, s)
		}
		return true
	})
	for rest := text; ; {
		i := strings.Index(rest, "://")
		if i < 0 {
			break
		}
		rest = rest[i+3:]
		j := 0
		for j < len(rest) && strings.IndexByte("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_", rest[j]) >= 0 {
			j++
		}
		host := strings.Trim(rest[:j], ".-_")
		if host == "" {
			continue
		}
		if next, _ := utf8.DecodeRuneInString(rest[j:]); j < len(rest) && next >= utf8.RuneSelf {
			t.Fatalf("link text %q: host %q runs on into %q, target %q in %q", text, host, next, href, s)
		}
		if u.Host == "" || strings.TrimPrefix(strings.ToLower(host), "www.") != key {
			t.Fatalf("link text %q shows host %q, target %q in %q", text, host, href, s)
		}
	}
}

func checkHref(t testing.TB, href, in string) {
	t.Helper()
	squeezed := strings.Map(func(c rune) rune {
		if c <= ' ' || c == 0x7f {
			return -1
		}
		return c
	}, strings.ToLower(href))
	for _, bad := range []string{"javascript:", "data:", "vbscript:", "file:"} {
		if strings.HasPrefix(squeezed, bad) {
			t.Fatalf("href %q in %q", href, in)
		}
	}
	u, err := url.Parse(href)
	if err != nil {
		t.Fatalf("unparseable href %q in %q", href, in)
	}
	switch u.Scheme {
	case "http", "https":
		if u.Host == "" {
			t.Fatalf("href %q without host in %q", href, in)
		}
	case "matrix":
	default:
		t.Fatalf("href %q scheme not allowed in %q", href, in)
	}
}

// parsed is the decoded content of a reply.
type parsed struct {
	MsgType       string `json:"msgtype"`
	Body          string `json:"body"`
	Format        string `json:"format"`
	FormattedBody string `json:"formatted_body"`
	RelatesTo     struct {
		InReplyTo struct {
			EventID string `json:"event_id"`
		} `json:"m.in_reply_to"`
	} `json:"m.relates_to"`
	Mentions   map[string]any `json:"m.mentions"`
	Invocation string         `json:"org.lisabot.invocation"`
}

// checkContent fails t unless b is a well-formed, bounded, safe reply to
// eventID, and returns it decoded.
func checkContent(t testing.TB, b []byte, eventID string) parsed {
	t.Helper()
	if len(b) > MaxContentBytes {
		t.Fatalf("content is %d bytes, over the %d budget", len(b), MaxContentBytes)
	}
	if !json.Valid(b) {
		t.Fatalf("invalid JSON: %q", b)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"msgtype", "body", "format", "formatted_body", "m.relates_to", "m.mentions", InvocationKey} {
		if _, ok := raw[k]; !ok {
			t.Fatalf("content lacks %q: %s", k, b)
		}
	}
	if len(raw) != 7 {
		t.Fatalf("unexpected fields: %s", b)
	}
	var c parsed
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	if c.MsgType != "m.text" || c.Format != "org.matrix.custom.html" {
		t.Fatalf("msgtype/format: %s", b)
	}
	if c.RelatesTo.InReplyTo.EventID != eventID || c.Invocation != eventID {
		t.Fatalf("relation: %s", b)
	}
	checkMentions(t, c, b)
	if c.Body == "" || !utf8.ValidString(c.Body) || !utf8.ValidString(c.FormattedBody) {
		t.Fatalf("bad bodies: %q", b)
	}
	for _, r := range c.Body {
		if (r < 0x20 && r != '\n' && r != '\t') || (r >= 0x7f && r <= 0x9f) {
			t.Fatalf("control character %U in body %q", r, c.Body)
		}
	}
	checkNoBidi(t, string(b))
	checkNoBidi(t, c.Body)
	checkHTML(t, c.FormattedBody)
	return c
}

// checkMentions fails t unless m.mentions is empty or names only the
// invoking sender quoted at the start of the fallback, and the HTML links
// to no user, which clients would show as a pill. Which senders are named
// is TestMentionsAsker's business.
func checkMentions(t testing.TB, c parsed, b []byte) {
	t.Helper()
	if c.Mentions == nil {
		t.Fatalf("m.mentions missing: %s", b)
	}
	ids, has := c.Mentions["user_ids"]
	if len(c.Mentions) > 1 || (len(c.Mentions) == 1 && !has) {
		t.Fatalf("m.mentions has other fields: %s", b)
	}
	if has {
		list, ok := ids.([]any)
		if !ok || len(list) != 1 {
			t.Fatalf("m.mentions = %v, want one user: %s", c.Mentions, b)
		}
		asker, _ := list[0].(string)
		if asker == "" || !strings.HasPrefix(c.Body, "> <"+asker+">") {
			t.Fatalf("m.mentions = %v names someone other than the quoted sender: %s", c.Mentions, b)
		}
	}
	low := strings.ToLower(c.FormattedBody)
	for _, pill := range []string{`href="https://matrix.to/#/@`, `href="https://matrix.to/#/%40`, `href="matrix:u/`, `href="matrix:user/`} {
		if strings.Contains(low, pill) {
			t.Fatalf("a pill (%s) in formatted_body: %s", pill, b)
		}
	}
}
