package proxyenv

import (
	"net"
	"os"
	"strings"
	"sync/atomic"
	"testing"
)

// Env is os.Environ with every proxy variable pointing at proxyURL, and
// without NO_PROXY or a CGI REQUEST_METHOD (which disables HTTP_PROXY).
func Env(proxyURL string) []string {
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
	return env
}

// CountingProxy starts a loopback listener that counts and drops every
// connection — a client that obeys the proxy variables fails against it —
// and stops it when the test ends.
func CountingProxy(t testing.TB) (url string, conns *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	conns = new(atomic.Int64)
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
	t.Cleanup(func() { _ = ln.Close(); <-done })
	return "http://" + ln.Addr().String(), conns
}
