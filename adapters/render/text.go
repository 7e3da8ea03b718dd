package render

import (
	"strings"
	"unicode/utf8"
)

// cleanText makes untrusted text safe to carry in a message: invalid UTF-8
// becomes U+FFFD, CR, CRLF and the Unicode line and paragraph separators
// become LF, and every other C0 or C1 control character (except tab and
// newline), DEL and every bidi control (see isBidiControl) is removed.
// Other invisible characters stay: in text they carry meaning (a
// zero-width joiner inside an emoji sequence); links are judged
// separately (see links.go).
func cleanText(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if strings.IndexByte(s, '\r') >= 0 {
		s = strings.ReplaceAll(s, "\r\n", "\n")
	}
	return strings.Map(func(c rune) rune {
		switch {
		case c == '\r', c == 0x2028, c == 0x2029:
			return '\n'
		case c == '\n' || c == '\t':
			return c
		case c < 0x20 || (c >= 0x7f && c <= 0x9f):
			return -1
		case isBidiControl(c):
			return -1
		}
		return c
	}, s)
}

// isBidiControl reports whether c is a bidi control (the embeddings and
// overrides U+202A–U+202E, the isolates U+2066–U+2069 and the marks
// U+200E, U+200F and U+061C). They change the display order of the text
// around them, so "txt.exe" can show as "exe.txt" or a URL can hide.
func isBidiControl(c rune) bool {
	switch {
	case c == 0x061c, c == 0x200e, c == 0x200f:
		return true
	case c >= 0x202a && c <= 0x202e:
		return true
	case c >= 0x2066 && c <= 0x2069:
		return true
	}
	return false
}

// singleLine reduces untrusted text to one trimmed line: control and bidi
// control characters go (see cleanText), and every run of white space
// (newlines, tabs, Unicode line and paragraph separators, no-break
// spaces) becomes a single space.
func singleLine(s string) string {
	s = cleanText(s)
	var b strings.Builder
	b.Grow(len(s))
	space := false
	for _, c := range s {
		switch {
		case c == '\n' || c == '\t' || c == ' ' || c == 0xa0:
			space = b.Len() > 0
			continue
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		b.WriteRune(c)
	}
	return b.String()
}

// truncateRunes returns s cut to at most n runes and whether it was cut.
func truncateRunes(s string, n int) (string, bool) {
	if n <= 0 {
		return "", s != ""
	}
	if len(s) <= n { // fewer bytes than n means fewer runes too
		return s, false
	}
	i := 0
	for pos := range s {
		if i == n {
			return s[:pos], true
		}
		i++
	}
	return s, false
}

// truncateBytes returns the longest prefix of s that has at most n bytes
// and ends on a rune boundary.
func truncateBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n <= 0 {
		return ""
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// ellipsize bounds s to n runes, marking a cut with a trailing ellipsis.
func ellipsize(s string, n int) string {
	if cut, ok := truncateRunes(s, n); ok {
		return strings.TrimRight(cut, " ") + "…"
	}
	return s
}
