package web

import (
	"net/netip"
	"testing"

	"github.com/lisabot/lisa/messages"
)

func TestCheckAddrRefuses(t *testing.T) {
	for _, s := range []string{
		"127.0.0.1", "127.255.255.254", "0.0.0.0", "0.1.2.3",
		"10.0.0.1", "10.255.255.255", "172.16.0.1", "172.31.255.255", "192.168.1.1",
		"100.64.0.1", "100.127.255.254",
		"169.254.169.254", "169.254.0.1",
		"224.0.0.1", "239.255.255.250", "255.255.255.255", "240.0.0.1",
		"192.0.0.8", "192.0.2.1", "198.51.100.7", "203.0.113.9", "198.18.0.1",
		"::", "::1", "fd00::1", "fc00::1", "fe80::1", "fe80::1%eth0", "fec0::1",
		"ff02::1", "ff05::2", "2001:db8::1", "3fff::1", "100::1",
		"::ffff:127.0.0.1", "::ffff:10.0.0.1", "::ffff:169.254.169.254", "::ffff:0.0.0.0",
		"::127.0.0.1", "::10.0.0.1", "::8.8.8.8",
		"64:ff9b::7f00:1", "64:ff9b::a9fe:a9fe", "64:ff9b:1::1",
		"2002:7f00:1::1", "2002:a00:1::", "2001::1",
	} {
		ip := netip.MustParseAddr(s)
		err := CheckAddr(ip)
		if err == nil {
			t.Errorf("CheckAddr(%s) allowed", s)
			continue
		}
		wantCode(t, err, messages.ToolBlockedAddress)
	}
	if CheckAddr(netip.Addr{}) == nil {
		t.Error("CheckAddr(zero Addr) allowed")
	}
}

func TestCheckAddrAllows(t *testing.T) {
	for _, s := range []string{
		"8.8.8.8", "1.1.1.1", "93.184.216.34", "100.63.255.255", "100.128.0.0",
		"172.15.255.255", "172.32.0.0", "192.167.255.255", "169.253.0.1", "223.255.255.255",
		"2606:4700:4700::1111", "2a00:1450:4001::200e",
		"::ffff:8.8.8.8", "64:ff9b::808:808", "2002:808:808::1",
	} {
		if err := CheckAddr(netip.MustParseAddr(s)); err != nil {
			t.Errorf("CheckAddr(%s) = %v", s, err)
		}
	}
}

// TestCheckAddrSpecialPurpose walks the IANA IPv4 and IPv6 special-purpose
// address registries (plus the embedding formats that carry an IPv4
// address inside IPv6) one row at a time: every range that is not
// globally reachable, or that smuggles a refused IPv4 address, is refused;
// the neighbouring public addresses are not.
func TestCheckAddrSpecialPurpose(t *testing.T) {
	for _, c := range []struct {
		name  string
		addr  string
		allow bool
	}{
		// IPv4 special-purpose registry.
		{"this network 0.0.0.0/8", "0.255.255.255", false},
		{"private 10/8", "10.1.2.3", false},
		{"CGNAT 100.64.0.0/10 low", "100.64.0.0", false},
		{"CGNAT 100.64.0.0/10 high", "100.127.255.255", false},
		{"loopback 127/8", "127.1.2.3", false},
		{"link-local 169.254/16", "169.254.1.1", false},
		{"private 172.16/12", "172.20.0.1", false},
		{"IETF protocol assignments 192.0.0.0/24", "192.0.0.1", false},
		{"DS-Lite 192.0.0.0/29", "192.0.0.2", false},
		{"PCP anycast 192.0.0.9", "192.0.0.9", false},
		{"TEST-NET-1 192.0.2.0/24", "192.0.2.255", false},
		{"6to4 relay anycast 192.88.99.0/24", "192.88.99.1", false},
		{"private 192.168/16", "192.168.0.1", false},
		{"benchmarking 198.18.0.0/15 low", "198.18.0.0", false},
		{"benchmarking 198.18.0.0/15 high", "198.19.255.255", false},
		{"TEST-NET-2 198.51.100.0/24", "198.51.100.1", false},
		{"TEST-NET-3 203.0.113.0/24", "203.0.113.1", false},
		{"multicast 224/4", "233.252.0.1", false},
		{"reserved 240/4", "250.1.2.3", false},
		{"limited broadcast", "255.255.255.255", false},
		{"public next to benchmarking", "198.20.0.0", true},
		{"public next to 192.0.0.0/24", "192.0.1.1", true},

		// IPv4-mapped ::ffff:0:0/96: judged as the IPv4 address.
		{"mapped loopback", "::ffff:127.0.0.1", false},
		{"mapped CGNAT", "::ffff:100.64.0.1", false},
		{"mapped 192.0.0.0/24", "::ffff:192.0.0.8", false},
		{"mapped benchmarking", "::ffff:198.18.0.1", false},
		{"mapped reserved", "::ffff:240.0.0.1", false},
		{"mapped broadcast", "::ffff:255.255.255.255", false},
		{"mapped this-network", "::ffff:0.1.2.3", false},
		{"mapped with zone", "::ffff:10.0.0.1%eth0", false},
		{"mapped public", "::ffff:93.184.216.34", true},

		// SIIT IPv4-translated ::ffff:0:0:0/96 (RFC 2765): refused outright.
		{"SIIT translated loopback", "::ffff:0:7f00:1", false},
		{"SIIT translated private", "::ffff:0:a00:1", false},
		{"SIIT translated public", "::ffff:0:808:808", false},
		{"SIIT range low", "::ffff:0:0:0", false},
		{"SIIT range high", "::ffff:0:ffff:ffff", false},

		// IPv4-compatible ::/96 (deprecated): refused outright.
		{"IPv4-compatible public", "::8.8.8.8", false},

		// NAT64 well-known prefix 64:ff9b::/96: judged as the embedded IPv4.
		{"NAT64 loopback", "64:ff9b::127.0.0.1", false},
		{"NAT64 CGNAT", "64:ff9b::100.64.0.1", false},
		{"NAT64 metadata", "64:ff9b::169.254.169.254", false},
		{"NAT64 benchmarking", "64:ff9b::198.18.0.1", false},
		{"NAT64 reserved", "64:ff9b::240.0.0.1", false},
		{"NAT64 this-network", "64:ff9b::", false},
		{"NAT64 public", "64:ff9b::93.184.216.34", true},
		// Local-use NAT64 64:ff9b:1::/48 (RFC 8215): refused outright, the
		// embedding position depends on the operator's prefix length.
		{"local NAT64 low", "64:ff9b:1::", false},
		{"local NAT64 public-looking", "64:ff9b:1:ffff::808:808", false},

		// Discard-only and dummy prefixes.
		{"discard-only 100::/64", "100::ffff", false},
		{"dummy prefix 100:0:0:1::/64", "100:0:0:1::1", false},

		// IETF protocol assignments 2001::/23, every row of it.
		{"Teredo 2001::/32", "2001:0:4136:e378:8000:63bf:3fff:fdd2", false},
		{"PCP anycast 2001:1::1", "2001:1::1", false},
		{"TURN anycast 2001:1::2", "2001:1::2", false},
		{"benchmarking 2001:2::/48", "2001:2::1", false},
		{"benchmarking 2001:2::/48 high", "2001:2:0:ffff:ffff:ffff:ffff:ffff", false},
		{"AMT 2001:3::/32", "2001:3::1", false},
		{"AS112-v6 2001:4:112::/48", "2001:4:112::1", false},
		{"ORCHID 2001:10::/28", "2001:10::1", false},
		{"ORCHID 2001:10::/28 high", "2001:1f:ffff::1", false},
		{"ORCHIDv2 2001:20::/28", "2001:20::1", false},
		{"Drone DETs 2001:30::/28", "2001:30::1", false},
		{"IETF assignments end", "2001:1ff:ffff:ffff::1", false},
		{"public after 2001::/23", "2001:200::1", true},
		{"public Google DNS", "2001:4860:4860::8888", true},

		// Documentation.
		{"documentation 2001:db8::/32", "2001:db8:ffff::1", false},
		{"documentation 3fff::/20", "3fff:fff::1", false},

		// 6to4 2002::/16: judged as the embedded IPv4.
		{"6to4 loopback", "2002:7f00:1::1", false},
		{"6to4 private", "2002:c0a8:101::1", false},
		{"6to4 CGNAT", "2002:6440:1::1", false},
		{"6to4 metadata", "2002:a9fe:a9fe::1", false},
		{"6to4 TEST-NET-1", "2002:c000:201::1", false},
		{"6to4 benchmarking", "2002:c612:1::1", false},
		{"6to4 this-network", "2002::1", false},
		{"6to4 public", "2002:5db8:d822::1", true},

		// SRv6 SIDs 5f00::/16 (RFC 9602).
		{"SRv6 SID 5f00::/16", "5f00::1", false},
		{"SRv6 SID high", "5f00:ffff:ffff::1", false},

		// Unique-local, link-local, site-local, multicast.
		{"ULA fc00::/7", "fc12::1", false},
		{"ULA fd00::/8", "fdff::1", false},
		{"link-local fe80::/10", "febf::1", false},
		{"site-local fec0::/10", "feff::1", false},
		{"multicast ff00::/8", "ff0e::1", false},
		{"public next to multicast ranges", "2a00:1450:4001::200e", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := CheckAddr(netip.MustParseAddr(c.addr))
			switch {
			case c.allow && err != nil:
				t.Errorf("CheckAddr(%s) = %v, want allowed", c.addr, err)
			case !c.allow && err == nil:
				t.Errorf("CheckAddr(%s) allowed, want blocked_address", c.addr)
			case !c.allow:
				wantCode(t, err, messages.ToolBlockedAddress)
			}
		})
	}
}
