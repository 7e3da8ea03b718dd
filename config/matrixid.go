package config

import (
	"net/netip"
	"strconv"
	"strings"
)

// Matrix identifier checks. Each returns "" for a valid identifier or a
// message saying what is wrong. Messages never repeat the identifier, so
// callers may report them next to any key.

// userIDProblem checks a user ID "@localpart:server_name". The localpart
// must use the characters the current Matrix specification allows for new
// accounts: a-z, 0-9 and . _ = - / +.
func userIDProblem(id string) string {
	if id == "" {
		return "is required (a Matrix user ID such as @lisa:example.org)"
	}
	if len(id) > MaxMatrixIDBytes {
		return "is longer than " + strconv.Itoa(MaxMatrixIDBytes) + " bytes"
	}
	rest, ok := strings.CutPrefix(id, "@")
	if !ok {
		return "must be a Matrix user ID of the form @localpart:server"
	}
	local, server, ok := strings.Cut(rest, ":")
	if !ok {
		return "must be a Matrix user ID of the form @localpart:server (the :server part is missing)"
	}
	if local == "" {
		return "has an empty localpart (expected @localpart:server)"
	}
	for _, c := range []byte(local) {
		if !isUserLocalChar(c) {
			return "has a localpart with characters outside a-z 0-9 . _ = - / +"
		}
	}
	if msg := serverNameProblem(server); msg != "" {
		return "has an invalid server name: " + msg
	}
	return ""
}

func isUserLocalChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("._=-/+", c) >= 0
}

// roomIDProblem checks a room ID "!opaque:server_name". Room aliases are
// refused because an alias can be repointed at a different room.
func roomIDProblem(id string) string {
	if id == "" {
		return "is empty (expected a room ID such as !abc123:example.org)"
	}
	if strings.HasPrefix(id, "#") {
		return "is a room alias; aliases can be repointed to another room, so use the room ID (!opaque:server) instead"
	}
	if len(id) > MaxMatrixIDBytes {
		return "is longer than " + strconv.Itoa(MaxMatrixIDBytes) + " bytes"
	}
	rest, ok := strings.CutPrefix(id, "!")
	if !ok {
		return "must be a Matrix room ID of the form !opaque:server"
	}
	opaque, server, ok := strings.Cut(rest, ":")
	if !ok {
		return "must be a Matrix room ID of the form !opaque:server (the :server part is missing)"
	}
	if opaque == "" {
		return "has an empty opaque part (expected !opaque:server)"
	}
	for _, c := range []byte(opaque) {
		if c <= ' ' || c >= 0x7f {
			return "has whitespace, control or non-ASCII characters in its opaque part"
		}
	}
	if msg := serverNameProblem(server); msg != "" {
		return "has an invalid server name: " + msg
	}
	return ""
}

// serverNameProblem checks a Matrix server name: a DNS name, an IPv4
// address or a bracketed IPv6 literal, optionally followed by ":port".
func serverNameProblem(s string) string {
	if s == "" {
		return "it is empty"
	}
	var port string
	hasPort := false
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return "the IPv6 literal is missing its closing ]"
		}
		if addr, err := netip.ParseAddr(s[1:end]); err != nil || !addr.Is6() || addr.Zone() != "" {
			return "the bracketed part is not an IPv6 address"
		}
		if rest := s[end+1:]; rest != "" {
			p, ok := strings.CutPrefix(rest, ":")
			if !ok {
				return "unexpected characters after the IPv6 literal"
			}
			port, hasPort = p, true
		}
	} else {
		host := s
		if i := strings.LastIndexByte(s, ':'); i >= 0 {
			host, port, hasPort = s[:i], s[i+1:], true
		}
		if strings.IndexByte(host, ':') >= 0 {
			return "an IPv6 address must be written in brackets, as [::1]"
		}
		if host == "" {
			return "the host name is empty"
		}
		if msg := dnsNameProblem(host); msg != "" {
			return msg
		}
	}
	if hasPort {
		return portProblem(port)
	}
	return ""
}

// dnsNameProblem checks the dns-name (or IPv4) part of a server name.
func dnsNameProblem(host string) string {
	if len(host) > 255 {
		return "the host name is longer than 255 characters"
	}
	for _, c := range []byte(host) {
		ok := c == '-' || c == '.' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
		if !ok {
			return "the host name may only contain letters, digits, '-' and '.'"
		}
	}
	if strings.HasPrefix(host, ".") || strings.HasSuffix(host, ".") || strings.Contains(host, "..") {
		return "the host name has an empty label"
	}
	return ""
}

// portProblem checks the port after a server name's colon.
func portProblem(port string) string {
	if port == "" || len(port) > 5 {
		return "the port must be 1 to 5 digits"
	}
	for _, c := range []byte(port) {
		if c < '0' || c > '9' {
			return "the port must be 1 to 5 digits"
		}
	}
	if n, _ := strconv.Atoi(port); n < 1 || n > 65535 {
		return "the port must be between 1 and 65535"
	}
	return ""
}
