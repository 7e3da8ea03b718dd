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

// parseFinal validates the model's final text. On failure it returns a
// short description of the problem for the repair request. Reasoning
// before the answer (<think>…</think>, see [messages.StripReasoning]) is
// removed first; reasoning that never closes leaves no answer.
func parseFinal(content string, maxChars int) (markdown string, urls []string, problem string) {
	s := stripFence(strings.TrimSpace(messages.StripReasoning(content)))
	if s == "" {
		return "", nil, "the reply was empty"
	}
	var fa finalAnswer
	if err := json.Unmarshal([]byte(s), &fa); err != nil || !strings.HasPrefix(s, "{") {
		return "", nil, "the reply was not a single JSON object"
	}
	if fa.Markdown == nil {
		return "", nil, `the "markdown" field was missing or not a string`
	}
	md := strings.TrimSpace(*fa.Markdown)
	if md == "" {
		return "", nil, `the "markdown" field was empty`
	}
	if n := utf8.RuneCountInString(md); n > maxChars {
		return "", nil, fmt.Sprintf(`the "markdown" field had %d characters, more than the limit of %d`, n, maxChars)
	}
	if len(fa.SourceURLs) > 0 && string(fa.SourceURLs) != "null" {
		if err := json.Unmarshal(fa.SourceURLs, &urls); err != nil {
			return "", nil, `the "source_urls" field was not a list of strings`
		}
	}
	return md, urls, ""
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
