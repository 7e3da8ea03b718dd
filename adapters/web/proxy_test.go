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
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			_ = c.Close()
		}
	}()
	defer func() { _ = ln.Close(); <-done }()

	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	proxyURL := "http://" + ln.Addr().String()
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch strings.ToUpper(k) {
		case "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "REQUEST_METHOD":
			continue
		}
		env = append(env, kv)
	}
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy"} {
		env = append(env, k+"="+proxyURL)
	}
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
