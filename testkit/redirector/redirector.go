package redirector

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// Pair is a home server that redirects everything to another.
type Pair struct {
	// HomeURL is the redirecting server's base URL.
	HomeURL string
	// OtherURL is the redirect target's base URL: the same host, another
	// port.
	OtherURL string

	reached      atomic.Int32
	credentialed atomic.Int32
}

// Start starts both servers on 127.0.0.1 and stops them when t ends. The
// home server answers every request with status (307 or 308 keep the
// method and body) and a Location on the other server with the same path
// and query; the other server answers 200 with "{}".
func Start(t testing.TB, status int) *Pair {
	t.Helper()
	p := &Pair{}
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.reached.Add(1)
		if r.Header.Get("Authorization") != "" || r.URL.Query().Has("access_token") {
			p.credentialed.Add(1)
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte("{}"))
	}))
	t.Cleanup(other.Close)
	home := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+r.URL.RequestURI(), status)
	}))
	t.Cleanup(home.Close)
	p.HomeURL, p.OtherURL = home.URL, other.URL
	return p
}

// Reached is how many requests reached the other server.
func (p *Pair) Reached() int { return int(p.reached.Load()) }

// Credentialed is how many of them carried an Authorization header or
// an access_token query parameter.
func (p *Pair) Credentialed() int { return int(p.credentialed.Load()) }
