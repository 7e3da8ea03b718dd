package faultproxy

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// Fault is one scripted answer.
type Fault struct {
	// Status and Body are what the client receives.
	Status int
	Body   string
	// Forward sends the request to the server first (its response is
	// discarded), modelling a lost response.
	Forward bool
}

// Rule applies its faults, one per matching request, in order.
type Rule struct {
	// Method and PathContains select requests; QueryContains, when set,
	// must occur in the decoded query string too.
	Method        string
	PathContains  string
	QueryContains string
	Faults        []Fault
}

// Record is one request that matched a rule.
type Record struct {
	Time   time.Time
	Method string
	Path   string
	Fault  Fault
}

// Proxy is a running fault proxy.
type Proxy struct {
	srv     *httptest.Server
	mu      sync.Mutex
	rules   []*Rule
	applied int
	log     []Record
	down    bool
}

// SetDown makes the proxy answer every request with 502, as if the server
// behind it were gone, until SetDown(false).
func (p *Proxy) SetDown(down bool) {
	p.mu.Lock()
	p.down = down
	p.mu.Unlock()
}

// Start runs a proxy to target on a loopback port and stops it when the
// test ends.
func Start(t testing.TB, target string) *Proxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{}
	rp := httputil.NewSingleHostReverseProxy(u)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.srv = &httptest.Server{Listener: l, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		down := p.down
		p.mu.Unlock()
		if down {
			http.Error(w, "server down", http.StatusBadGateway)
			return
		}
		f, ok := p.take(r)
		if !ok {
			rp.ServeHTTP(w, r)
			return
		}
		if f.Forward {
			rec := httptest.NewRecorder()
			rp.ServeHTTP(rec, r)
			_, _ = io.Copy(io.Discard, rec.Result().Body)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(f.Status)
		_, _ = io.WriteString(w, f.Body)
	})}}
	p.srv.Start()
	t.Cleanup(p.srv.Close)
	return p
}

// URL is the proxy's base URL.
func (p *Proxy) URL() string { return p.srv.URL }

// Add appends a rule.
func (p *Proxy) Add(r Rule) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rules = append(p.rules, &r)
}

// Clear drops every rule and the faults they had left.
func (p *Proxy) Clear() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rules = nil
}

// Log returns the requests that received a fault, in order.
func (p *Proxy) Log() []Record {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Record(nil), p.log...)
}

// Applied returns how many faults were injected.
func (p *Proxy) Applied() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.applied
}

func (p *Proxy) take(r *http.Request) (Fault, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, rule := range p.rules {
		if len(rule.Faults) == 0 || (rule.Method != "" && rule.Method != r.Method) || !strings.Contains(r.URL.Path, rule.PathContains) {
			continue
		}
		if rule.QueryContains != "" {
			q, err := url.QueryUnescape(r.URL.RawQuery)
			if err != nil || !strings.Contains(q, rule.QueryContains) {
				continue
			}
		}
		f := rule.Faults[0]
		rule.Faults = rule.Faults[1:]
		p.applied++
		p.log = append(p.log, Record{Time: time.Now(), Method: r.Method, Path: r.URL.Path, Fault: f})
		return f, true
	}
	return Fault{}, false
}
