package render

import (
	"html"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Bounds on the Sources section.
const (
	// MaxSources is the most sources listed under one reply.
	MaxSources = 10
	// MaxSourceTitleRunes bounds each source title; longer titles are
	// cut at a rune boundary and end in an ellipsis.
	MaxSourceTitleRunes = 120
	// MaxSourceURLBytes bounds each source URL; longer URLs are dropped.
	MaxSourceURLBytes = 2048
)

// Source is one research source listed under an answer. Both fields are
// untrusted: the URL is validated and the title escaped before use.
type Source struct {
	// URL is the source's absolute http or https URL.
	URL string
	// Title is the page or search-result title; the URL is shown if empty.
	Title string
}

// acceptSources keeps the usable sources in first-use order: only
// absolute http(s) URLs without credentials or invisible characters, one
// entry per normalised URL, at most MaxSources, with titles reduced to one
// bounded line; a title that names another host than its URL's (or none
// at all) is replaced with the URL.
func acceptSources(in []Source) []Source {
	var out []Source
	seen := make(map[string]bool)
	for _, s := range in {
		if len(out) == MaxSources {
			break
		}
		u, key, ok := sourceURL(s.URL)
		if !ok || seen[key] {
			continue
		}
		seen[key] = true
		// The title is the text of a link to u: one that would mislead
		// (see showTarget) gives way to the URL itself.
		title := ellipsize(singleLine(s.Title), MaxSourceTitleRunes)
		if showTarget(title, u) {
			title = u
		}
		out = append(out, Source{URL: u, Title: title})
	}
	return out
}

// sourceURL validates a source URL and returns it trimmed, its host in
// IDNA (xn--) form, together with the key used to recognise duplicates:
// scheme and host compared without case, the fragment ignored and a
// trailing slash on the path ignored.
func sourceURL(raw string) (u, key string, ok bool) {
	s := strings.TrimSpace(raw)
	if s == "" || len(s) > MaxSourceURLBytes || !utf8.ValidString(s) || hasInvisible(s) {
		return "", "", false
	}
	for _, c := range s {
		if c <= ' ' || (c >= 0x7f && c <= 0x9f) || strings.ContainsRune("\"<>\\^`{|}", c) {
			return "", "", false
		}
	}
	p, err := url.Parse(s)
	if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" || p.User != nil || p.Opaque != "" {
		return "", "", false
	}
	a, ok := asciiHost(s, p)
	if !ok || len(a) > MaxSourceURLBytes {
		return "", "", false
	}
	if a != s {
		s = a
		if p, err = url.Parse(s); err != nil {
			return "", "", false
		}
	}
	key = p.Scheme + "://" + strings.ToLower(p.Host) + strings.TrimSuffix(p.EscapedPath(), "/")
	if p.RawQuery != "" {
		key += "?" + p.RawQuery
	}
	return s, key, true
}

// sourcesHTML renders the accepted sources as the HTML Sources section.
func sourcesHTML(srcs []Source) string {
	if len(srcs) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("<p><strong>Sources</strong></p><ol>")
	for _, s := range srcs {
		b.WriteString(`<li><a href="`)
		b.WriteString(html.EscapeString(s.URL))
		b.WriteString(`">`)
		b.WriteString(html.EscapeString(s.Title))
		b.WriteString("</a></li>")
	}
	b.WriteString("</ol>")
	return b.String()
}

// sourcesPlain renders the accepted sources as the plain Sources section.
func sourcesPlain(srcs []Source) string {
	if len(srcs) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("Sources:")
	for i, s := range srcs {
		b.WriteString("\n")
		b.WriteString(strconv.Itoa(i + 1))
		b.WriteString(". ")
		if s.Title != s.URL {
			b.WriteString(s.Title)
			b.WriteString(" — ")
		}
		b.WriteString(s.URL)
	}
	return b.String()
}
