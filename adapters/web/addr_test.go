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
