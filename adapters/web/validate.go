package web

import (
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"unicode"

	"golang.org/x/net/idna"

	"github.com/lisabot/lisa/messages"
)

// MaxURLBytes bounds the length of a URL ValidateURL accepts.
const MaxURLBytes = 4096

// DNS name limits (RFC 1035).
const (
	maxHostBytes  = 253
	maxLabelBytes = 63
)

func invalidURL(msg string) *messages.ToolError {
	return &messages.ToolError{Code: messages.ToolInvalidURL, Message: msg}
}

// ValidateURL checks that raw is an absolute http or https URL that is safe
// to request and returns it normalised: scheme and host in lower case, DNS
// names converted to their IDNA ASCII form, IPv6 literals in canonical form,
// redundant port syntax removed and the fragment dropped. It refuses user
// information, missing or malformed hosts, ports outside 1–65535,
// whitespace and control characters, malformed percent escapes and URLs
// longer than MaxURLBytes. Failures are *messages.ToolError with code
// invalid_url.
func ValidateURL(raw string) (*url.URL, error) {
	if raw == "" {
		return nil, invalidURL("URL is empty")
	}
	if len(raw) > MaxURLBytes {
		return nil, invalidURL("URL is too long")
	}
	for _, r := range raw {
		if r == unicode.ReplacementChar || unicode.IsSpace(r) || unicode.IsControl(r) {
			return nil, invalidURL("URL contains whitespace or control characters")
		}
	}
	if !validEscapes(raw) {
		return nil, invalidURL("URL contains a malformed percent escape")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, invalidURL("URL could not be parsed")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, invalidURL("only http and https URLs can be fetched")
	}
	if u.Opaque != "" || u.Host == "" {
		return nil, invalidURL("URL has no host")
	}
	if u.User != nil {
		return nil, invalidURL("URL must not contain user information")
	}
	host, err := normalizeHost(u.Hostname())
	if err != nil {
		return nil, err
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return nil, invalidURL("URL port is out of range")
		}
		host += ":" + strconv.Itoa(n)
	}
	u.Host = host
	u.Fragment, u.RawFragment = "", ""
	return u, nil
}

// normalizeHost validates a host as given by url.URL.Hostname and returns
// it in the form used in URL.Host (without port).
func normalizeHost(h string) (string, error) {
	if h == "" {
		return "", invalidURL("URL has no host")
	}
	if strings.Contains(h, ":") || strings.Contains(h, "%") {
		// Only an IPv6 literal may contain colons; zones are meaningless
		// for a remote fetch.
		a, err := netip.ParseAddr(h)
		if err != nil || !a.Is6() || a.Zone() != "" {
			return "", invalidURL("URL host is malformed")
		}
		return "[" + a.String() + "]", nil
	}
	if a, err := netip.ParseAddr(h); err == nil {
		return a.String(), nil
	}
	ascii, err := idna.Lookup.ToASCII(h)
	if err != nil {
		return "", invalidURL("URL host is not a valid domain name")
	}
	name := strings.TrimSuffix(ascii, ".")
	if name == "" || len(name) > maxHostBytes {
		return "", invalidURL("URL host is not a valid domain name")
	}
	labels := strings.Split(name, ".")
	for _, l := range labels {
		if l == "" || len(l) > maxLabelBytes {
			return "", invalidURL("URL host is not a valid domain name")
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return "", invalidURL("URL host is not a valid domain name")
			}
		}
	}
	// A name whose last label is numeric is read as an IPv4 address in
	// shorthand (127.1, 0x7f.1) by browsers and some resolvers; refuse the
	// ambiguity.
	if numericLabel(labels[len(labels)-1]) {
		return "", invalidURL("URL host is a malformed IP address")
	}
	return ascii, nil
}

func numericLabel(l string) bool {
	digits := l
	if strings.HasPrefix(l, "0x") {
		digits = l[2:]
		if digits == "" {
			return true
		}
		return strings.Trim(digits, "0123456789abcdef") == ""
	}
	return strings.Trim(digits, "0123456789") == ""
}

// validEscapes reports whether every '%' in s starts a two-digit hex
// escape. url.Parse checks this for the host and path but not the query.
func validEscapes(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			continue
		}
		if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
			return false
		}
		i += 2
	}
	return true
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}
