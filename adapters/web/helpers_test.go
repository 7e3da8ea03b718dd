package web

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// testConfig is a local-server configuration with short limits.
func testConfig() Config {
	return Config{
		ConnectTimeout:        2 * time.Second,
		ReadTimeout:           2 * time.Second,
		TotalTimeout:          10 * time.Second,
		MaxRedirects:          3,
		MaxDownloadBytes:      64 << 10,
		UserAgent:             "LisaTest/1",
		AllowPrivateAddresses: true,
	}
}

func newFetcher(t *testing.T, cfg Config) *Fetcher {
	t.Helper()
	f := NewFetcher(cfg)
	t.Cleanup(f.CloseIdleConnections)
	return f
}

// server starts an httptest server on 127.0.0.1.
func server(t *testing.T, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	return blockingServer(t, func(w http.ResponseWriter, r *http.Request, _ <-chan struct{}) { h(w, r) })
}

// blockingServer is server for handlers that wait: they must return once
// release is closed, which happens before the server shuts down.
func blockingServer(t *testing.T, h func(w http.ResponseWriter, r *http.Request, release <-chan struct{})) *httptest.Server {
	t.Helper()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h(w, r, release) }))
	t.Cleanup(func() {
		close(release)
		srv.Close()
	})
	return srv
}

// hitServer is a loopback server that counts requests; SSRF tests require
// it to record none.
type hitServer struct {
	*httptest.Server
	hits atomic.Int64
}

func newHitServer(t *testing.T) *hitServer {
	t.Helper()
	hs := &hitServer{}
	hs.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hs.hits.Add(1)
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte("internal secret"))
	}))
	t.Cleanup(hs.Close)
	return hs
}

func (hs *hitServer) port() string {
	_, p, _ := net.SplitHostPort(hs.Listener.Addr().String())
	return p
}

// rawServer serves each connection with fn after consuming the request
// head, giving full control over the bytes of the response.
func rawServer(t *testing.T, fn func(c net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(20 * time.Second))
				br := bufio.NewReader(c)
				for {
					line, err := br.ReadString('\n')
					if err != nil {
						return
					}
					if strings.TrimSpace(line) == "" {
						break
					}
				}
				fn(c)
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	return "http://" + ln.Addr().String() + "/"
}

// countingConn counts bytes read from the network by the client.
type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// countingDial dials loopback only and counts bytes read.
func countingDial(t *testing.T, n *atomic.Int64) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		ap, err := netip.ParseAddrPort(addr)
		if err != nil || !ap.Addr().IsLoopback() {
			t.Errorf("dial to %q: want a loopback IP literal", addr)
			return nil, net.UnknownNetworkError("refused by test")
		}
		var d net.Dialer
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return countingConn{Conn: c, n: n}, nil
	}
}

// within fails the test unless elapsed lies in [min, max].
func within(t *testing.T, elapsed, min, max time.Duration) {
	t.Helper()
	if elapsed < min || elapsed > max {
		t.Errorf("elapsed %v, want between %v and %v", elapsed, min, max)
	}
}
