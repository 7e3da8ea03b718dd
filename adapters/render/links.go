package render

import (
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/yuin/goldmark/ast"
	gmhtml "github.com/yuin/goldmark/renderer/html"
	"github.com/yuin/goldmark/util"
	"golang.org/x/net/idna"
	"golang.org/x/net/publicsuffix"
)

// This file holds Lisa's rule against misleading links (issue #15 item 7):
//
//   - A link target (an answer's link or autolink, or a source URL) is
//     refused, and the link shown as its label only, when it carries
//     credentials ("https://bank.example@evil.example") or any invisible
//     or format character (bidi controls, zero-width characters, BOM,
//     line separators, variation selectors…), raw or percent-encoded.
//     An accepted http(s) target with a non-ASCII host is rewritten with
//     the host's IDNA (xn--) form, so it is shown and followed as such.
//   - A link whose visible text names a host (see namedHosts) that is not
//     the target's host (compared without case, a trailing dot or a
//     leading "www."), or names one with any non-ASCII or invisible
//     character in it, or has no visible text at all, is shown as its
//     target instead: the link's text becomes the (IDNA-normalised)
//     target URL, in the HTML and in the plain body alike. Text that is
//     exactly the target stays. A Source's title is treated as the text
//     of its link.
//
// Bidi controls are removed from all text by cleanText.

// kindShownTarget is the node kind of a link shown as its own target.
var kindShownTarget = ast.NewNodeKind("LisaShownTarget")

// shownTarget replaces a link whose text would mislead: it is rendered as
// a link to href whose text is href.
type shownTarget struct {
	ast.BaseInline
	href string
}

// Kind implements ast.Node.
func (n *shownTarget) Kind() ast.NodeKind { return kindShownTarget }

// Dump implements ast.Node.
func (n *shownTarget) Dump(source []byte, level int) {
	ast.DumpHelper(n, source, level, map[string]string{"Href": n.href}, nil)
}

// showTargets replaces every allowed link and autolink under parent whose
// target v does not verify with text (see verify.go), and every other one
// whose text must not be shown (see showTarget) with a shownTarget node.
// A nil v verifies every target. It runs after limitNesting, so the
// recursion is shallow.
func showTargets(parent ast.Node, src []byte, text gmhtml.Writer, v *linkVerifier) {
	var label *plainWriter
	var walk func(ast.Node)
	walk = func(parent ast.Node) {
		for c := parent.FirstChild(); c != nil; {
			next := c.NextSibling()
			href, ok, s := "", false, ""
			switch n := c.(type) {
			case *ast.Link:
				if href, ok = linkHref(n.Destination); ok {
					if label == nil {
						label = newPlainWriter(src, text)
						label.visible = true
					}
					s = label.inlineText(n)
				}
			case *ast.AutoLink:
				if href, ok = autoLinkHref(n, src); ok {
					s = string(n.Label(src))
				}
			}
			switch {
			case ok && !v.verified(href):
				shown := href
				if _, auto := c.(*ast.AutoLink); auto {
					shown = cleanText(s)
				}
				v.unlink(parent, c, s, shown)
			case ok && showTarget(s, href):
				parent.ReplaceChild(parent, c, &shownTarget{href: href})
			default:
				walk(c)
			}
			c = next
		}
	}
	walk(parent)
}

// showTarget reports whether a link to href (an allowed, normalised
// target) labelled text must show its target instead of text: the text is
// blank, or it names a host that is not the target's, or that is not
// plain ASCII. Text that is the target itself shows where the link goes,
// whatever hosts its path or a matrix: URI's server part mention.
func showTarget(text, href string) bool {
	text = cleanText(text) // what the reader will see
	if text == href {
		return false
	}
	if strings.TrimSpace(text) == "" {
		return true
	}
	key, hasHost := targetHostKey(href)
	mislead := false
	namedHosts(text, func(host string) bool {
		mislead = !hasHost || !isASCII(host) || hostKey(host) != key
		return !mislead
	})
	return mislead
}

// targetHostKey returns the comparison key of an allowed target's host;
// matrix: URIs have none.
func targetHostKey(href string) (string, bool) {
	u, err := url.Parse(href)
	if err != nil || u.Host == "" {
		return "", false
	}
	return hostKey(u.Hostname()), true
}

// hostKey is how hosts are compared: ASCII case folded, without a
// trailing dot or a leading "www.".
func hostKey(host string) string {
	h := strings.TrimSuffix(strings.ToLower(host), ".")
	return strings.TrimPrefix(h, "www.")
}

// namedHosts calls yield with each host name text shows a reader, in
// order, until yield returns false. Text is split into runs of host
// characters (letters, digits, marks, "-", "_", dots and invisible
// characters); a run names a host when it follows "://" (any run), starts
// with "www.", is a dotted IPv4 address, or is a domain name whose
// top-level label is a known (ICANN) or special-use top-level domain or
// is not ASCII. A run right after a single "/" that follows a host
// character ("docs/README.md", a URL's path) is a path segment, not a
// host. Known top-level domains that double as file extensions (".md",
// ".py", ".zip") make such file names count as hosts: the link then
// shows its target, which is safe.
func namedHosts(text string, yield func(host string) bool) {
	for i := 0; i < len(text); {
		c, n := utf8.DecodeRuneInString(text[i:])
		if !isHostRune(c) {
			i += n
			continue
		}
		j := i + n
		for j < len(text) {
			c, n := utf8.DecodeRuneInString(text[j:])
			if !isHostRune(c) {
				break
			}
			j += n
		}
		if h, ok := namedHost(text[i:j], text[:i]); ok && !yield(h) {
			return
		}
		i = j
	}
}

// namedHost decides whether run, a maximal run of host characters
// preceded by before, names a host, and returns it without leading or
// trailing punctuation.
func namedHost(run, before string) (string, bool) {
	run = strings.TrimFunc(run, func(c rune) bool {
		return !unicode.IsLetter(c) && !unicode.IsNumber(c) && !unicode.IsMark(c) && !isInvisible(c)
	})
	if run == "" {
		return "", false
	}
	if strings.HasSuffix(before, "://") {
		return run, true
	}
	if p, ok := strings.CutSuffix(before, "/"); ok && p != "" && !strings.HasSuffix(p, "/") {
		if c, _ := utf8.DecodeLastRuneInString(p); isHostRune(c) {
			return "", false // a path segment
		}
	}
	// Compare the shape as the reader sees it: invisible characters
	// removed, full-width and ideographic dots as dots.
	shape := strings.Map(func(c rune) rune {
		switch {
		case isInvisible(c):
			return -1
		case c == '。' || c == '．' || c == '｡':
			return '.'
		}
		return c
	}, run)
	if len(shape) > 4 && strings.EqualFold(shape[:4], "www.") {
		return run, true
	}
	labels := strings.Split(shape, ".")
	if len(labels) < 2 {
		return "", false
	}
	for _, l := range labels {
		if l == "" {
			return "", false
		}
	}
	if isIPv4(labels) {
		return run, true
	}
	tld := labels[len(labels)-1]
	if !isASCII(tld) {
		return run, true // an IDN top-level domain, or a look-alike of one
	}
	if len(tld) < 2 {
		return "", false
	}
	for i := 0; i < len(tld); i++ {
		if c := tld[i] | 0x20; c < 'a' || c > 'z' {
			return "", false
		}
	}
	tld = strings.ToLower(tld)
	if specialTLDs[tld] {
		return run, true
	}
	suffix, icann := publicsuffix.PublicSuffix(tld)
	return run, icann && suffix == tld
}

// specialTLDs are special-use and reserved top-level names (RFC 2606,
// 6761, 6762, 7686, 9476 and ICANN's ".internal") that the public suffix
// list does not hold but a reader takes for hosts.
var specialTLDs = map[string]bool{
	"example": true, "test": true, "invalid": true, "localhost": true,
	"local": true, "onion": true, "alt": true, "internal": true,
}

func isIPv4(labels []string) bool {
	if len(labels) != 4 {
		return false
	}
	for _, l := range labels {
		if len(l) > 3 {
			return false
		}
		for i := 0; i < len(l); i++ {
			if l[i] < '0' || l[i] > '9' {
				return false
			}
		}
	}
	return true
}

// isHostRune reports whether c can be part of a host name as displayed.
func isHostRune(c rune) bool {
	switch {
	case c < utf8.RuneSelf:
		return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.'
	case c == '。' || c == '．' || c == '｡':
		return true
	}
	return unicode.IsLetter(c) || unicode.IsNumber(c) || unicode.IsMark(c) || isInvisible(c)
}

// isInvisible reports whether c is invisible or a format control that
// has no business in a URL or host name: every format character (Cf:
// bidi controls, zero-width space, joiners, word joiner, BOM, soft
// hyphen, tags…), line and paragraph separators, variation selectors,
// the combining grapheme joiner and the Hangul fillers. In ordinary text
// only bidi controls are removed (see cleanText); the others carry
// meaning there (a zero-width joiner inside an emoji sequence).
func isInvisible(c rune) bool {
	if c < 0xa0 {
		return false
	}
	switch {
	case c == 0x2028, c == 0x2029, c == 0x034f, c == 0x115f, c == 0x1160, c == 0x3164, c == 0xffa0:
		return true
	case c >= 0x180b && c <= 0x180f, c >= 0xfe00 && c <= 0xfe0f, c >= 0xe0100 && c <= 0xe01ef:
		return true
	}
	return unicode.Is(unicode.Cf, c)
}

// hasInvisible reports whether the URL s contains an invisible character
// (see isInvisible), raw or percent-encoded as UTF-8.
func hasInvisible(s string) bool {
	for _, c := range s {
		if isInvisible(c) {
			return true
		}
	}
	if strings.IndexByte(s, '%') < 0 {
		return false
	}
	dec := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
			dec = append(dec, unhex(s[i+1])<<4|unhex(s[i+2]))
			i += 2
			continue
		}
		dec = append(dec, s[i])
	}
	for len(dec) > 0 {
		c, n := utf8.DecodeRune(dec)
		if isInvisible(c) {
			return true
		}
		dec = dec[n:]
	}
	return false
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c|0x20 >= 'a' && c|0x20 <= 'f'
}

func unhex(c byte) byte {
	if c <= '9' {
		return c - '0'
	}
	return (c | 0x20) - 'a' + 10
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// maxHrefBytes bounds a single link target; longer ones are kept as text.
const maxHrefBytes = 4096

// safeHref returns s as the target of a link in an answer, and whether it
// may be one: an absolute http or https URL with a host and without
// credentials, or a matrix: URI; links to users (matrix:u/… URIs and
// matrix.to/#/@… permalinks, which clients show as pills) are not.
// Anything else (javascript:, data:,
// vbscript:, relative or protocol-relative references, unparseable text,
// embedded white space, controls or invisible characters) is not. A
// non-ASCII http(s) host is replaced with its IDNA form; one that has
// none is refused.
func safeHref(s string) (string, bool) {
	if s == "" || len(s) > maxHrefBytes {
		return "", false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c == 0x7f {
			return "", false
		}
	}
	if hasInvisible(s) {
		return "", false
	}
	u, err := url.Parse(s)
	if err != nil {
		return "", false
	}
	switch u.Scheme { // url.Parse lower-cases the scheme
	case "http", "https":
		if u.Host == "" || u.User != nil || userPermalink(u) {
			return "", false
		}
		return asciiHost(s, u)
	case "matrix":
		o := strings.ToLower(u.Opaque)
		// A link to a user is a pill: it would name someone other than
		// the asker, whom m.mentions alone names.
		return s, o != "" && !strings.HasPrefix(o, "u/") && !strings.HasPrefix(o, "user/")
	}
	return "", false
}

// userPermalink reports whether u is a matrix.to link to a user, which
// clients show as a pill mentioning them.
func userPermalink(u *url.URL) bool {
	if hostKey(u.Hostname()) != "matrix.to" {
		return false
	}
	f := strings.TrimLeft(u.Fragment, "/")
	return strings.HasPrefix(f, "@")
}

// asciiHost returns the http(s) URL s, parsed as u, with its host in IDNA
// (xn--) form, and false if the host has no such form.
func asciiHost(s string, u *url.URL) (string, bool) {
	host := u.Hostname()
	if isASCII(host) {
		return s, true
	}
	ascii, err := idna.Lookup.ToASCII(host)
	if err != nil || ascii == "" || !isASCII(ascii) {
		return "", false
	}
	i := strings.Index(s, "//") + 2
	j := strings.IndexAny(s[i:], "/?#")
	if j < 0 {
		j = len(s)
	} else {
		j += i
	}
	if p := u.Port(); p != "" {
		ascii += ":" + p
	}
	return s[:i] + ascii + s[j:], true
}

// linkHref returns the href goldmark would write for a link destination
// (escapes and character references resolved, unsafe bytes
// percent-encoded), normalised by safeHref, and whether Lisa allows it.
func linkHref(dest []byte) (string, bool) {
	return safeHref(string(util.URLEscape(dest, true)))
}

// autoLinkHref is linkHref for an autolink or a linkified URL; e-mail
// autolinks become mailto: URLs, which are not allowed.
func autoLinkHref(n *ast.AutoLink, source []byte) (string, bool) {
	if n.AutoLinkType == ast.AutoLinkEmail {
		return "", false
	}
	return safeHref(string(util.URLEscape(n.URL(source), false)))
}
