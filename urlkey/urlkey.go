package urlkey

import (
	"net/url"
	"strings"
)

// Of returns the comparison form of u, an absolute http or https URL the
// caller has parsed and accepted, with its host in ASCII (IDNA) form:
// scheme and host in lower case, the host without a trailing dot, the
// default port (80 for http, 443 for https), user information and the
// fragment dropped, percent escapes of path and query in normal form (see
// [Escapes]), trailing slashes of the path removed (so "", "/" and "/a/"
// compare as "" , "" and "/a") and an empty query dropped. Everything
// else, including the order of query parameters and the case of the path,
// is kept: servers may tell those apart.
func Of(u *url.URL) string {
	host, port := strings.TrimSuffix(strings.ToLower(u.Hostname()), "."), u.Port()
	scheme := strings.ToLower(u.Scheme)
	if (scheme == "http" && port == "80") || (scheme == "https" && port == "443") {
		port = ""
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if port != "" {
		host += ":" + port
	}
	var b strings.Builder
	b.WriteString(scheme + "://" + host)
	b.WriteString(strings.TrimRight(Escapes(u.EscapedPath()), "/"))
	if q := Escapes(u.RawQuery); q != "" {
		b.WriteString("?" + q)
	}
	return b.String()
}

// Escapes rewrites the percent escapes of s, an escaped path or query, in
// the normal form of RFC 3986: escaped unreserved characters decoded,
// other escapes in upper-case hex; bytes that must be escaped (controls,
// space, non-ASCII) escaped.
func Escapes(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
			c = unhex(s[i+1])<<4 | unhex(s[i+2])
			i += 2
			if unreserved(c) {
				b.WriteByte(c)
				continue
			}
		} else if c > ' ' && c < 0x7f {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c >= 'a':
		return c - 'a' + 10
	case c >= 'A':
		return c - 'A' + 10
	}
	return c - '0'
}

// unreserved reports whether c is an unreserved character of RFC 3986.
func unreserved(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~'
}
