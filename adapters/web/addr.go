package web

import (
	"net/netip"

	"github.com/lisabot/lisa/messages"
)

// CheckAddr decides whether the downloader may connect to ip. It refuses
// every range of the IANA IPv4 and IPv6 special-purpose address registries
// that is not globally reachable, and a few that are but never host web
// pages:
//
//   - IPv4: "this network" (0.0.0.0/8), private (RFC 1918), shared CGNAT
//     (100.64.0.0/10), loopback, link-local (including the
//     169.254.169.254 metadata service), IETF protocol assignments
//     (192.0.0.0/24), documentation, the 6to4 relay anycast, benchmarking
//     (198.18.0.0/15), multicast, reserved (240.0.0.0/4) and broadcast.
//   - IPv6: unspecified, loopback, discard-only (100::/64), the dummy
//     prefix (100:0:0:1::/64), all IETF protocol assignments (2001::/23:
//     Teredo, benchmarking 2001:2::/48, ORCHID 2001:10::/28, ORCHIDv2,
//     drone DETs, and the anycast services there), documentation
//     (2001:db8::/32, 3fff::/20), SRv6 SIDs (5f00::/16), unique-local
//     (fc00::/7), link-local, site-local and multicast.
//
// IPv6 forms that carry an IPv4 address are handled as follows.
// IPv4-mapped addresses (::ffff:0:0/96) are unmapped and judged as the
// IPv4 address they carry, and so are NAT64 well-known-prefix
// (64:ff9b::/96, RFC 6052) and 6to4 (2002::/16) addresses: the translator
// or relay would deliver to that IPv4 address, so a public one is allowed
// and a refused one is refused. Forms whose IPv4 position is not fixed or
// that no public host uses are refused outright whatever they carry:
// local-use NAT64 (64:ff9b:1::/48, RFC 8215), SIIT IPv4-translated
// addresses (::ffff:0:0:0/96, RFC 2765), the deprecated IPv4-compatible
// range (::/96) and Teredo. Zones are ignored.
//
// A refusal is a *messages.ToolError with code blocked_address.
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
		"::ffff:0:0:0/96", // SIIT IPv4-translated (RFC 2765)
		"64:ff9b:1::/48",  // local-use NAT64 (RFC 8215)
		"100::/64",        // discard-only (RFC 6666)
		"100:0:0:1::/64",  // dummy prefix (RFC 9780)
		// IETF protocol assignments (RFC 2928), refused as a whole. It holds
		// Teredo 2001::/32, the PCP/TURN/DNS-SD anycast 2001:1::/125,
		// benchmarking 2001:2::/48, AMT 2001:3::/32, AS112-v6
		// 2001:4:112::/48, ORCHID 2001:10::/28, ORCHIDv2 2001:20::/28 and
		// drone DETs 2001:30::/28; none of them serves web pages.
		"2001::/23",
		"2001:db8::/32", // documentation
		"3fff::/20",     // documentation (RFC 9637)
		"5f00::/16",     // SRv6 SIDs (RFC 9602)
		"fec0::/10",     // site-local (deprecated)
	}
	ps := make([]netip.Prefix, len(cidrs))
	for i, c := range cidrs {
		ps[i] = netip.MustParsePrefix(c)
	}
	return ps
}
