package web

import (
	"net/netip"

	"github.com/lisabot/lisa/messages"
)

// CheckAddr decides whether the downloader may connect to ip. It refuses
// loopback, private (RFC 1918), shared CGNAT (100.64.0.0/10), link-local
// (including the 169.254.169.254 metadata service), multicast, unspecified,
// broadcast, documentation, benchmarking and reserved IPv4 space; and IPv6
// loopback, unspecified, unique-local (fc00::/7), link-local, site-local,
// multicast, documentation and discard ranges. IPv4-mapped addresses are
// judged as the IPv4 address they carry, as are NAT64 (64:ff9b::/96) and
// 6to4 (2002::/16) addresses; the deprecated IPv4-compatible range ::/96
// and Teredo are refused outright. A refusal is a *messages.ToolError with
// code blocked_address.
func CheckAddr(ip netip.Addr) error {
	if !ip.IsValid() {
		return blocked()
	}
	ip = ip.WithZone("").Unmap()
	if ip.Is6() {
		b := ip.As16()
		switch {
		case netip.MustParsePrefix("64:ff9b::/96").Contains(ip): // NAT64
			return CheckAddr(netip.AddrFrom4([4]byte(b[12:16])))
		case netip.MustParsePrefix("2002::/16").Contains(ip): // 6to4
			return CheckAddr(netip.AddrFrom4([4]byte(b[2:6])))
		}
	}
	if ip.IsLoopback() || ip.IsUnspecified() || ip.IsPrivate() || ip.IsMulticast() ||
		ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() || ip.IsInterfaceLocalMulticast() {
		return blocked()
	}
	for _, p := range refusedPrefixes() {
		if p.Contains(ip) {
			return blocked()
		}
	}
	return nil
}

func blocked() error {
	return &messages.ToolError{Code: messages.ToolBlockedAddress, Message: "the address is not reachable for downloads"}
}

// refusedPrefixes lists the ranges CheckAddr refuses beyond those the
// netip predicates already cover. It is rebuilt per call so the package
// keeps no mutable state; the cost is negligible next to a download.
func refusedPrefixes() []netip.Prefix {
	cidrs := [...]string{
		"0.0.0.0/8",       // "this network"
		"100.64.0.0/10",   // shared address space (CGNAT)
		"169.254.0.0/16",  // link-local, cloud metadata
		"192.0.0.0/24",    // IETF protocol assignments
		"192.0.2.0/24",    // TEST-NET-1
		"192.88.99.0/24",  // 6to4 relay anycast
		"198.18.0.0/15",   // benchmarking
		"198.51.100.0/24", // TEST-NET-2
		"203.0.113.0/24",  // TEST-NET-3
		"240.0.0.0/4",     // reserved, including 255.255.255.255
		"::/96",           // IPv4-compatible (deprecated)
		"64:ff9b:1::/48",  // local-use NAT64
		"100::/64",        // discard-only
		"2001::/32",       // Teredo
		"2001:db8::/32",   // documentation
		"3fff::/20",       // documentation (RFC 9637)
		"fec0::/10",       // site-local (deprecated)
	}
	ps := make([]netip.Prefix, len(cidrs))
	for i, c := range cidrs {
		ps[i] = netip.MustParsePrefix(c)
	}
	return ps
}
