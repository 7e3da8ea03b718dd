package invocation

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/lisabot/lisa/messages"
)

// maxURLLength bounds a source URL.
const maxURLLength = 2048

// sourceSet is a run's registry of URLs returned by successful tool calls,
// keyed by normalized form.
type sourceSet struct {
	byKey  map[string]string
	titles map[string]string // by registered URL
}

func newSourceSet() *sourceSet {
	return &sourceSet{byKey: map[string]string{}, titles: map[string]string{}}
}

// title returns the first title a tool reported for a registered URL.
func (s *sourceSet) title(u string) string { return s.titles[u] }

// addTitles remembers titles for registered URLs (first one wins).
func (s *sourceSet) addTitles(titles map[string]string) {
	for u, t := range titles {
		key, ok := normalizeURL(u)
		if !ok {
			continue
		}
		if reg, known := s.byKey[key]; known && s.titles[reg] == "" && strings.TrimSpace(t) != "" {
			s.titles[reg] = strings.TrimSpace(t)
		}
	}
}

// add registers the valid URLs of one successful result and returns them,
// deduplicated and bounded, for the model to see.
func (s *sourceSet) add(urls []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, u := range urls {
		if len(out) == maxSourcesPerResult {
			break
		}
		key, ok := normalizeURL(u)
		if !ok || seen[key] {
			continue
		}
		seen[key] = true
		if _, known := s.byKey[key]; !known {
			s.byKey[key] = strings.TrimSpace(u)
		}
		out = append(out, s.byKey[key])
	}
	return out
}

// filter keeps the proposed URLs that the registry holds, in order and
// without duplicates, in the form the tool returned them.
// len reports how many sources successful tool results returned.
func (s *sourceSet) len() int { return len(s.byKey) }

func (s *sourceSet) filter(proposed []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, u := range proposed {
		key, ok := normalizeURL(u)
		if !ok || seen[key] {
			continue
		}
		if reg, known := s.byKey[key]; known {
			seen[key] = true
			out = append(out, reg)
		}
	}
	return out
}

// normalizeURL returns the comparison form of an absolute http or https
// URL: scheme and host lower-cased, fragment dropped, empty path as "/".
// URLs with user information are refused.
func normalizeURL(raw string) (string, bool) {
	raw = strings.TrimSpace(raw)
	if raw == "" || len(raw) > maxURLLength {
		return "", false
	}
	u, err := url.Parse(raw)
	if err != nil || u.User != nil || u.Host == "" || u.Opaque != "" {
		return "", false
	}
	u.Scheme = strings.ToLower(u.Scheme)
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", false
	}
	u.Host = strings.ToLower(u.Host)
	u.Fragment, u.RawFragment = "", ""
	if u.Path == "" && u.RawPath == "" {
		u.Path = "/"
	}
	return u.String(), true
}

// finalAnswer is the JSON contract of the model's final reply.
type finalAnswer struct {
	Markdown   *string         `json:"markdown"`
	SourceURLs json.RawMessage `json:"source_urls"`
}

// finalReply is what parseFinal made of the model's final text.
type finalReply struct {
	// markdown and urls are the answer, when problem is "".
	markdown string
	urls     []string
	// problem says what was wrong, for the repair request.
	problem string
	// prose is the text to post when the repair did not help either:
	// the whole reply when it is plain prose (not cut off, not a broken
	// JSON object, within the size limit); "" otherwise.
	prose string
}

// parseFinal validates the model's final text. The answer is the first
// top-level JSON object in it that parses and has a "markdown" string:
// the whole text, inside a code fence, or wrapped in prose. Reasoning
// before the answer (<think>…</think>, see [messages.StripReasoning]) is
// removed first, and so are special tokens the server left in the text
// (<|im_end|> and the like, see [messages.StripSpecialTokens]); reasoning
// that never closes leaves no answer. finish is
// the server's finish reason: a reply cut off at the token limit is never
// prose.
func parseFinal(content, finish string, maxChars int) finalReply {
	s := strings.TrimSpace(messages.StripSpecialTokens(messages.StripReasoning(content)))
	if s == "" {
		if finish == messages.FinishLength {
			return finalReply{problem: "the reply was cut off at the output token limit before any answer; answer more briefly"}
		}
		return finalReply{problem: "the reply was empty"}
	}
	fa, found := findAnswer(stripFence(s))
	if !found {
		fa, found = findAnswer(s)
	}
	if !found {
		out := finalReply{problem: "the reply was not a single JSON object"}
		switch {
		case finish == messages.FinishLength:
			out.problem = "the reply was cut off at the output token limit before the JSON object was complete; send a shorter answer"
		case !strings.HasPrefix(stripFence(s), "{") && utf8.RuneCountInString(s) <= maxChars:
			out.prose = s
		}
		return out
	}
	md := strings.TrimSpace(*fa.Markdown)
	if md == "" {
		return finalReply{problem: `the "markdown" field was empty`}
	}
	if n := utf8.RuneCountInString(md); n > maxChars {
		return finalReply{problem: fmt.Sprintf(`the "markdown" field had %d characters, more than the limit of %d`, n, maxChars)}
	}
	var urls []string
	if len(fa.SourceURLs) > 0 && string(fa.SourceURLs) != "null" {
		if err := json.Unmarshal(fa.SourceURLs, &urls); err != nil {
			return finalReply{problem: `the "source_urls" field was not a list of strings`}
		}
	}
	return finalReply{markdown: md, urls: urls}
}

// findAnswer returns the first top-level JSON object of s that parses and
// has a "markdown" string. Objects nested in another are not candidates;
// one that does not parse is skipped as a whole.
func findAnswer(s string) (finalAnswer, bool) {
	for i := 0; i < len(s); {
		start := strings.IndexByte(s[i:], '{')
		if start < 0 {
			break
		}
		start += i
		end := matchBrace(s, start)
		if end < 0 {
			break
		}
		var fa finalAnswer
		if json.Unmarshal([]byte(s[start:end+1]), &fa) == nil && fa.Markdown != nil {
			return fa, true
		}
		i = end + 1
	}
	return finalAnswer{}, false
}

// matchBrace returns the index of the brace that closes the object
// opening at s[start], honouring JSON strings and their escapes, or -1.
func matchBrace(s string, start int) int {
	depth, inString, escaped := 0, false, false
	for i := start; i < len(s); i++ {
		c := s[i]
		switch {
		case inString && escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case inString && c == '"':
			inString = false
		case inString:
		case c == '"':
			inString = true
		case c == '{':
			depth++
		case c == '}':
			depth--
			if depth == 0 {
				return i
			}
		}
	}
	return -1
}

// stripFence removes a Markdown code fence (``` or ```json) around s.
func stripFence(s string) string {
	if !strings.HasPrefix(s, "```") || !strings.HasSuffix(s, "```") || len(s) < 6 {
		return s
	}
	body := strings.TrimSuffix(s, "```")
	nl := strings.IndexByte(body, '\n')
	if nl < 0 {
		return s
	}
	lang := strings.TrimSpace(body[3:nl])
	if lang != "" && !strings.EqualFold(lang, "json") {
		return s
	}
	return strings.TrimSpace(body[nl+1:])
}
