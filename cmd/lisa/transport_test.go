package main

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lisabot/lisa/config"
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
		{"lisa's pool", matrixTransport(config.RuntimeConfig{MaxConcurrentRooms: 2}), 0, 0},
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
