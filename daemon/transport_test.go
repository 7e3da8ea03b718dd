package daemon

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lisabot/lisa/config"
	"github.com/lisabot/lisa/testkit/proxyenv"
)

// TestPooledTransportKeepsConnections: a burst of requests as wide as
// max_concurrent_rooms allows, repeated, reuses the burst's connections;
// Go's default pool (2 idle per host) opens most of them anew.
func TestPooledTransportKeepsConnections(t *testing.T) {
	const burst = 10
	for _, c := range []struct {
		name     string
		rt       http.RoundTripper
		maxFresh int64 // new connections allowed in the second burst
		minFresh int64
	}{
		{"lisa's pool", MatrixTransport(config.RuntimeConfig{MaxConcurrentRooms: 2}), 0, 0},
		{"go default (the hazard)", http.DefaultTransport.(*http.Transport).Clone(), burst, burst - 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			var fresh atomic.Int64
			release := make(chan struct{})
			var arrived sync.WaitGroup
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				arrived.Done()
				<-release // hold every request until the whole burst is in
				_, _ = io.WriteString(w, `{}`)
			}))
			srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
				if s == http.StateNew {
					fresh.Add(1)
				}
			}
			srv.Start()
			defer srv.Close()
			client := &http.Client{Transport: c.rt}
			defer client.CloseIdleConnections()
			wave := func() int64 {
				before := fresh.Load()
				release = make(chan struct{})
				arrived.Add(burst)
				var done sync.WaitGroup
				for range burst {
					done.Add(1)
					go func() {
						defer done.Done()
						resp, err := client.Get(srv.URL)
						if err != nil {
							t.Error(err)
							return
						}
						_, _ = io.Copy(io.Discard, resp.Body)
						_ = resp.Body.Close()
					}()
				}
				arrived.Wait()
				close(release)
				done.Wait()
				return fresh.Load() - before
			}
			if n := wave(); n != burst {
				t.Fatalf("first burst opened %d connections, want %d", n, burst)
			}
			if n := wave(); n < c.minFresh || n > c.maxFresh {
				t.Fatalf("second burst opened %d new connections, want %d to %d", n, c.minFresh, c.maxFresh)
			}
		})
	}
}

// TestTransportsRefuseProxyEnvironment: the Matrix client, the Matrix
// transport and the pool the LLM client is built on never consult
// HTTP(S)_PROXY. http.ProxyFromEnvironment caches the environment on
// first use, so the behaviour is checked in a fresh process by
// TestTransportIgnoresProxyEnvironment; this checks the field itself.
func TestTransportsRefuseProxyEnvironment(t *testing.T) {
	rt := config.RuntimeConfig{MaxConcurrentRooms: 2}
	client := MatrixHTTPClient(rt)
	for name, tr := range map[string]http.RoundTripper{
		"matrix client": client.Transport,
		"matrix pool":   MatrixTransport(rt),
		"llm pool":      PooledTransport(rt.MaxConcurrentRooms + 2),
	} {
		ht, ok := tr.(*http.Transport)
		if !ok {
			t.Errorf("%s: transport is %T, want *http.Transport", name, tr)
			continue
		}
		if ht.Proxy != nil {
			t.Errorf("%s: Proxy is set; Lisa must not use proxy environment variables", name)
		}
	}
}

// proxyHelperEnv names the file that tells the re-executed test binary
// where TestTransportIgnoresProxyEnvironment's servers listen.
const proxyHelperEnv = "LISA_TEST_PROXY_HELPER"

// TestTransportIgnoresProxyEnvironment runs the test binary again with
// HTTP_PROXY, HTTPS_PROXY and ALL_PROXY naming a loopback listener and
// has it send plain and TLS requests for a non-loopback host name (the
// proxy functions never proxy loopback) through the Matrix client and the
// LLM pool; the dial hook maps that name to local servers. The servers
// must see every request and the proxy no connection at all.
func TestTransportIgnoresProxyEnvironment(t *testing.T) {
	if f := os.Getenv(proxyHelperEnv); f != "" {
		proxyHelper(t, f)
		return
	}
	var hits atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		_, _ = io.WriteString(w, "direct")
	})
	plain := httptest.NewServer(h)
	defer plain.Close()
	secure := httptest.NewTLSServer(h)
	defer secure.Close()
	proxyURL, conns := proxyenv.CountingProxy(t)

	spec := filepath.Join(t.TempDir(), "spec")
	cert := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: secure.Certificate().Raw})
	text := plain.Listener.Addr().String() + "\n" + secure.Listener.Addr().String() + "\n" + string(cert)
	if err := os.WriteFile(spec, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestTransportIgnoresProxyEnvironment$", "-test.count=1", "-test.v")
	cmd.Env = append(proxyenv.Env(proxyURL), proxyHelperEnv+"="+spec)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("helper failed: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "proxy helper: 4 direct requests") {
		t.Errorf("helper did not report its requests:\n%s", out)
	}
	if n := conns.Load(); n != 0 {
		t.Errorf("the environment's proxy got %d connections, want 0", n)
	}
	if n := hits.Load(); n != 4 {
		t.Errorf("servers got %d requests, want 4", n)
	}
}

// proxyHelper is the re-executed half of
// TestTransportIgnoresProxyEnvironment.
func proxyHelper(t *testing.T, spec string) {
	b, err := os.ReadFile(spec)
	if err != nil {
		t.Fatal(err)
	}
	plainAddr, rest, _ := strings.Cut(string(b), "\n")
	secureAddr, certPEM, _ := strings.Cut(rest, "\n")
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM([]byte(certPEM)) {
		t.Fatal("no certificate in spec")
	}
	if os.Getenv("HTTPS_PROXY") == "" {
		t.Fatal("helper runs without HTTPS_PROXY")
	}
	// Names outside loopback, so the environment's proxy would apply.
	route := map[string]string{"hs.example.com:80": plainAddr, "hs.example.com:443": secureAddr}
	var d net.Dialer
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		if to, ok := route[addr]; ok {
			addr = to
		}
		return d.DialContext(ctx, network, addr)
	}
	rt := config.RuntimeConfig{MaxConcurrentRooms: 2}
	clients := map[string]*http.Client{
		"matrix": MatrixHTTPClient(rt),
		// As daemon.go's llmClient builds it.
		"llm": {Transport: PooledTransport(rt.MaxConcurrentRooms + 2)},
	}
	n := 0
	for name, c := range clients {
		tr := c.Transport.(*http.Transport)
		tr.DialContext = dial
		tr.TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
		for _, u := range []string{"http://hs.example.com/", "https://hs.example.com/"} {
			resp, err := c.Get(u)
			if err != nil {
				t.Errorf("%s %s: %v", name, u, err)
				continue
			}
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if string(body) != "direct" {
				t.Errorf("%s %s: body %q", name, u, body)
				continue
			}
			n++
		}
		c.CloseIdleConnections()
	}
	t.Logf("proxy helper: %d direct requests", n)
}
