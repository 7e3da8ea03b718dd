package web

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/lisabot/lisa/testkit/proxyenv"
)

// proxyHelperEnv carries the page URL to the re-executed test binary in
// TestFetcherIgnoresProxyEnvironment.
const proxyHelperEnv = "LISA_WEB_PROXY_HELPER"

// TestFetcherRefusesProxyEnvironment: the downloader's transport has no
// Proxy function, so HTTP(S)_PROXY can never route fetches.
func TestFetcherRefusesProxyEnvironment(t *testing.T) {
	if NewFetcher(Config{}).transport.Proxy != nil {
		t.Fatal("Fetcher transport has a Proxy function; Lisa must not use proxy environment variables")
	}
}

// TestFetcherIgnoresProxyEnvironment runs the test binary again with
// every proxy variable naming a loopback listener that counts
// connections (a fresh process, because http.ProxyFromEnvironment reads
// the environment once) and fetches a page by a non-loopback host name,
// which the proxy functions would route through the proxy.
func TestFetcherIgnoresProxyEnvironment(t *testing.T) {
	if u := os.Getenv(proxyHelperEnv); u != "" {
		cfg := testConfig()
		cfg.LookupIP = lookupTable(t, map[string][]string{"page.example.com": {"127.0.0.1"}})
		p, err := newFetcher(t, cfg).Fetch(context.Background(), u)
		if err != nil || string(p.Body) != "direct" {
			t.Fatalf("helper: Fetch = %q, %v", p.Body, err)
		}
		t.Log("proxy helper: fetched directly")
		return
	}
	var hits atomic.Int64
	srv := server(t, func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, "direct")
	})
	proxyURL, conns := proxyenv.CountingProxy(t)

	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	env := proxyenv.Env(proxyURL)
	cmd := exec.Command(os.Args[0], "-test.run=^TestFetcherIgnoresProxyEnvironment$", "-test.count=1", "-test.v")
	cmd.Env = append(env, proxyHelperEnv+"=http://page.example.com:"+port+"/")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "proxy helper: fetched directly") {
		t.Errorf("helper failed: %v\n%s", err, out)
	}
	if n := conns.Load(); n != 0 {
		t.Errorf("the environment's proxy got %d connections, want 0", n)
	}
	if n := hits.Load(); n != 1 {
		t.Errorf("server got %d requests, want 1", n)
	}
}
