package web

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lisabot/lisa/messages"
)

// guardedConfig has the address guard on. Its Dial reaches loopback only
// and counts calls, so even a broken guard sends nothing off this host.
func guardedConfig(t *testing.T, dials *atomic.Int64) Config {
	cfg := testConfig()
	cfg.AllowPrivateAddresses = false
	cfg.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		ap, err := netip.ParseAddrPort(addr)
		if err != nil || !ap.Addr().IsLoopback() {
			t.Errorf("guard let a dial through to %q", addr)
			return nil, errors.New("refused by test")
		}
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
	return cfg
}

// failDial fails the test if it is ever called.
func failDial(t *testing.T) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		t.Errorf("dial to %q must not happen", addr)
		return nil, errors.New("refused by test")
	}
}

// lookupTable resolves test names from a map and fails on anything else.
func lookupTable(t *testing.T, names map[string][]string) func(context.Context, string) ([]netip.Addr, error) {
	return func(_ context.Context, host string) ([]netip.Addr, error) {
		ss, ok := names[host]
		if !ok {
			t.Errorf("unexpected lookup of %q", host)
			return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
		}
		var out []netip.Addr
		for _, s := range ss {
			out = append(out, netip.MustParseAddr(s))
		}
		return out, nil
	}
}

func TestGuardRefusesLoopbackServers(t *testing.T) {
	hs := newHitServer(t)
	var dials atomic.Int64
	cfg := guardedConfig(t, &dials)
	cfg.LookupIP = lookupTable(t, map[string][]string{
		"internal.test": {"127.0.0.1"},
		"mixed.test":    {"93.184.216.34", "127.0.0.1"},
		"localhost":     {"127.0.0.1", "::1"},
	})
	f := newFetcher(t, cfg)
	urls := []string{
		"http://127.0.0.1:" + hs.port() + "/",
		"http://127.0.0.2:" + hs.port() + "/",
		"http://[::ffff:127.0.0.1]:" + hs.port() + "/",
		"http://[::ffff:7f00:1]:" + hs.port() + "/",
		"http://[::1]:" + hs.port() + "/",
		"http://internal.test:" + hs.port() + "/",
		"http://mixed.test:" + hs.port() + "/",
		"http://localhost:" + hs.port() + "/",
	}
	if ln6, err := net.Listen("tcp6", "[::1]:0"); err == nil {
		hs6 := &hitServer{}
		srv6 := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hs6.hits.Add(1) })}
		go func() { _ = srv6.Serve(ln6) }()
		t.Cleanup(func() { _ = srv6.Close() })
		urls = append(urls, "http://"+ln6.Addr().String()+"/")
		t.Cleanup(func() {
			if n := hs6.hits.Load(); n != 0 {
				t.Errorf("IPv6 loopback server got %d hits", n)
			}
		})
	}
	for _, u := range urls {
		_, err := f.Fetch(context.Background(), u)
		wantCode(t, err, messages.ToolBlockedAddress)
	}
	if n := hs.hits.Load(); n != 0 {
		t.Errorf("loopback server got %d hits", n)
	}
	if n := dials.Load(); n != 0 {
		t.Errorf("%d dials happened", n)
	}
}

func TestGuardRefusesPrivateRangesWithoutDialling(t *testing.T) {
	addrs := []string{
		"10.0.0.1", "172.16.0.1", "192.168.1.1", "100.64.0.1", "169.254.169.254",
		"0.0.0.0", "255.255.255.255", "224.0.0.1", "fd00::1", "fe80::1", "::ffff:10.0.0.1", "::ffff:169.254.169.254",
	}
	names := map[string][]string{}
	cfg := testConfig()
	cfg.AllowPrivateAddresses = false
	cfg.Dial = failDial(t)
	cfg.LookupIP = lookupTable(t, names)
	f := newFetcher(t, cfg)
	for i, a := range addrs {
		name := "host" + string(rune('a'+i)) + ".test"
		names[name] = []string{a}
		for _, u := range []string{
			"http://" + net.JoinHostPort(a, "80") + "/latest/meta-data/",
			"https://" + name + "/",
		} {
			_, err := f.Fetch(context.Background(), u)
			if err == nil {
				t.Errorf("%s fetched", u)
				continue
			}
			wantCode(t, err, messages.ToolBlockedAddress)
		}
	}
}

// publicDial pretends 93.184.216.34 is a public web server by connecting
// to a loopback listener instead; nothing leaves the host. Other loopback
// addresses are dialled for real (the guard must stop them first), and
// anything else fails the test.
func publicDial(t *testing.T, publicTarget string, dials *atomic.Int64) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		ap, err := netip.ParseAddrPort(addr)
		var d net.Dialer
		switch {
		case err != nil:
			t.Errorf("dial got %q, want an IP literal", addr)
		case ap.Addr() == netip.MustParseAddr("93.184.216.34"):
			return d.DialContext(ctx, network, publicTarget)
		case ap.Addr().IsLoopback():
			return d.DialContext(ctx, network, addr)
		default:
			t.Errorf("unexpected dial to %q", addr)
		}
		return nil, errors.New("refused by test")
	}
}

func TestGuardRefusesRedirectToLoopback(t *testing.T) {
	victim := newHitServer(t)
	redirector := server(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/literal":
			http.Redirect(w, r, "http://127.0.0.1:"+victim.port()+"/admin", http.StatusFound)
		case "/name":
			http.Redirect(w, r, "http://internal.test:"+victim.port()+"/admin", http.StatusFound)
		case "/mapped":
			http.Redirect(w, r, "http://[::ffff:127.0.0.1]:"+victim.port()+"/", http.StatusTemporaryRedirect)
		case "/metadata":
			http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusFound)
		}
	})
	var dials atomic.Int64
	cfg := testConfig()
	cfg.AllowPrivateAddresses = false
	cfg.LookupIP = lookupTable(t, map[string][]string{
		"public.test":   {"93.184.216.34"},
		"internal.test": {"127.0.0.1"},
	})
	cfg.Dial = publicDial(t, redirector.Listener.Addr().String(), &dials)
	f := newFetcher(t, cfg)
	for _, path := range []string{"/literal", "/name", "/mapped", "/metadata"} {
		_, err := f.Fetch(context.Background(), "http://public.test/"+path[1:])
		wantCode(t, err, messages.ToolBlockedAddress)
	}
	if n := victim.hits.Load(); n != 0 {
		t.Errorf("victim got %d hits", n)
	}
	if n := dials.Load(); n != 4 {
		t.Errorf("%d dials, want one per fetch to the public host", n)
	}
}

func TestGuardSurvivesDNSRebinding(t *testing.T) {
	victim := newHitServer(t)
	redirector := server(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://rebind.test:"+victim.port()+"/", http.StatusFound)
	})
	var (
		mu      sync.Mutex
		lookups int
		dials   atomic.Int64
	)
	cfg := testConfig()
	cfg.AllowPrivateAddresses = false
	cfg.LookupIP = func(_ context.Context, host string) ([]netip.Addr, error) {
		mu.Lock()
		defer mu.Unlock()
		lookups++
		if lookups == 1 {
			return []netip.Addr{netip.MustParseAddr("93.184.216.34")}, nil
		}
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}
	cfg.Dial = publicDial(t, redirector.Listener.Addr().String(), &dials)
	_, err := newFetcher(t, cfg).Fetch(context.Background(), "http://rebind.test/")
	wantCode(t, err, messages.ToolBlockedAddress)
	if n := victim.hits.Load(); n != 0 {
		t.Errorf("victim got %d hits", n)
	}
	if lookups != 2 {
		t.Errorf("%d lookups, want 2", lookups)
	}
}

func TestGuardAllowsPublicAddress(t *testing.T) {
	target := server(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte("<title>public</title>"))
	})
	var dials atomic.Int64
	cfg := testConfig()
	cfg.AllowPrivateAddresses = false
	cfg.LookupIP = lookupTable(t, map[string][]string{"public.test": {"93.184.216.34"}})
	cfg.Dial = publicDial(t, target.Listener.Addr().String(), &dials)
	p, err := newFetcher(t, cfg).Fetch(context.Background(), "http://public.test/")
	if err != nil || p.Title != "public" {
		t.Errorf("got %+v, %v", p, err)
	}
}

func TestAllowPrivateAddressesReachesLoopback(t *testing.T) {
	hs := newHitServer(t)
	cfg := testConfig() // AllowPrivateAddresses: true, real dialer
	cfg.LookupIP = lookupTable(t, map[string][]string{"internal.test": {"127.0.0.1"}})
	f := newFetcher(t, cfg)
	for _, u := range []string{hs.URL, "http://internal.test:" + hs.port() + "/"} {
		p, err := f.Fetch(context.Background(), u)
		if err != nil || string(p.Body) != "internal secret" {
			t.Errorf("%s: %q, %v", u, p.Body, err)
		}
	}
	if n := hs.hits.Load(); n != 2 {
		t.Errorf("hits = %d, want 2", n)
	}
}

func TestDefaultDialerRechecksAddress(t *testing.T) {
	// With the seams nil, the real dialer's Control hook also refuses a
	// blocked address (the transport guard is bypassed by calling dial
	// directly).
	hs := newHitServer(t)
	f := NewFetcher(Config{})
	_, err := f.dial(context.Background(), "tcp", "127.0.0.1:"+hs.port())
	wantCode(t, err, messages.ToolBlockedAddress)
	if n := hs.hits.Load(); n != 0 {
		t.Errorf("hits = %d", n)
	}
}

func TestLookupFailure(t *testing.T) {
	cfg := testConfig()
	cfg.Dial = failDial(t)
	cfg.LookupIP = lookupTable(t, map[string][]string{"empty.test": nil})
	f := newFetcher(t, cfg)
	_, err := f.Fetch(context.Background(), "http://empty.test/")
	wantCode(t, err, messages.ToolHTTPError)
	cfg.LookupIP = func(context.Context, string) ([]netip.Addr, error) {
		return nil, &net.DNSError{Err: "no such host", Name: "nx.test", IsNotFound: true}
	}
	_, err = newFetcher(t, cfg).Fetch(context.Background(), "http://nx.test/")
	if te := wantCode(t, err, messages.ToolHTTPError); te.Retryable {
		t.Error("NXDOMAIN should not be retryable")
	}
}

// TestGuardRefusesSpecialPurposeAtDialTime: addresses from the IANA
// special-purpose registries and the IPv4-in-IPv6 embeddings are refused
// whether they arrive as URL literals or from name resolution, before any
// dial, and the default dialer's Control hook refuses them too.
func TestGuardRefusesSpecialPurposeAtDialTime(t *testing.T) {
	addrs := []string{
		"::ffff:0:7f00:1",    // SIIT IPv4-translated loopback
		"::ffff:0:808:808",   // SIIT IPv4-translated, public inside
		"::ffff:100.64.0.1",  // IPv4-mapped CGNAT
		"64:ff9b::a00:1",     // NAT64 of 10.0.0.1
		"64:ff9b:1::808:808", // local-use NAT64
		"2002:6440:1::1",     // 6to4 of 100.64.0.1
		"2001:2::1",          // benchmarking
		"2001:10::1",         // ORCHID
		"2001:20::1",         // ORCHIDv2
		"5f00::1",            // SRv6 SID
		"100:0:0:1::1",       // dummy prefix
		"198.18.0.1",         // benchmarking
		"192.0.0.9",          // IETF protocol assignments
	}
	names := map[string][]string{}
	cfg := testConfig()
	cfg.AllowPrivateAddresses = false
	cfg.Dial = failDial(t)
	cfg.LookupIP = lookupTable(t, names)
	f := newFetcher(t, cfg)
	for i, a := range addrs {
		name := "special" + string(rune('a'+i)) + ".test"
		// A public address beside the special one does not launder it.
		names[name] = []string{"93.184.216.34", a}
		for _, u := range []string{
			"http://" + net.JoinHostPort(a, "80") + "/",
			"https://" + name + "/",
		} {
			_, err := f.Fetch(context.Background(), u)
			if err == nil {
				t.Errorf("%s fetched", u)
				continue
			}
			wantCode(t, err, messages.ToolBlockedAddress)
		}
	}
	// The real dialer's Control hook, reached directly.
	raw := NewFetcher(Config{ConnectTimeout: 2 * time.Second})
	for _, a := range addrs {
		_, err := raw.dial(context.Background(), "tcp", net.JoinHostPort(a, "80"))
		wantCode(t, err, messages.ToolBlockedAddress)
	}
}
