package hostguard

import (
	"net"
	"net/netip"
	"strings"
)

// Local reports whether host, a request's Host header (with or without a
// port), is a loopback IP literal (127.0.0.0/8, ::1), "localhost", or
// listenHost, the host part of the address the server listens on. Any
// other name, such as one a web site controls, is refused.
func Local(host, listenHost string) bool {
	h := host
	if sh, _, err := net.SplitHostPort(host); err == nil {
		h = sh
	} else if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
		h = h[1 : len(h)-1]
	}
	if h == "" {
		return false
	}
	if strings.EqualFold(h, "localhost") {
		return true
	}
	if listenHost != "" && strings.EqualFold(h, strings.Trim(listenHost, "[]")) {
		return true
	}
	ip, err := netip.ParseAddr(h)
	return err == nil && ip.Zone() == "" && ip.Unmap().IsLoopback()
}
