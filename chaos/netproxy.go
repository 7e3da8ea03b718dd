package chaos

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// NetKind is one kind of network fault.
type NetKind string

// Network fault kinds.
const (
	// DropResponse forwards the request, lets the upstream finish, then
	// closes the connection without answering: the classic lost response.
	DropResponse NetKind = "drop-response"
	// Reset closes the connection before forwarding anything.
	Reset NetKind = "reset"
	// TooMany answers 429 with retry_after_ms (Matrix) and Retry-After.
	TooMany NetKind = "429"
	// ServerErrors answers 5xx to a burst of 1 to 4 requests.
	ServerErrors NetKind = "5xx"
	// Latency delays the request by up to MaxLatency, then forwards it.
	Latency NetKind = "latency"
	// Truncate forwards and returns only the first part of the body.
	Truncate NetKind = "truncate"
	// Malformed forwards and returns a JSON body that is damaged: a field
	// of the wrong type, a missing field, or megabytes of padding.
	Malformed NetKind = "malformed"
)

// AllNetKinds are the network fault kinds drawn from by default.
var AllNetKinds = []NetKind{DropResponse, Reset, TooMany, ServerErrors, Latency, Truncate, Malformed}

// NetPlan configures a Proxy.
type NetPlan struct {
	Seed uint64
	// Rate is the probability that a request gets a fault.
	Rate  float64
	Kinds []NetKind
	// MaxLatency bounds Latency faults (default 2 s).
	MaxLatency time.Duration
	// Paths, when set, restricts faults to requests whose path contains
	// one of these strings.
	Paths []string
	// Malform is the list of JSON fields Malformed may damage (top-level
	// names); by default a field is picked from the body.
	Malform []string
	// TypeOnly lists fields of Malform that are only ever given a wrong
	// type, never removed or nulled: for them a missing value is
	// indistinguishable from a truthful empty one (a sync response without
	// "rooms" says "nothing new"), so no client could notice the damage.
	TypeOnly []string
}

// Proxy is a seeded HTTP fault proxy on a loopback port.
type Proxy struct {
	plan NetPlan
	// upstream forwards to the current target (see SetTarget).
	upstream atomic.Pointer[httputil.ReverseProxy]
	srv      *http.Server
	ln       net.Listener
	enabled  atomic.Bool
	// requests counts requests that arrived while faults were enabled.
	requests atomic.Int64

	mu     sync.Mutex
	rng    *rand.Rand
	burst  int
	counts map[NetKind]int
}

// NewProxy starts a proxy to target (an http:// base URL) on 127.0.0.1.
// It injects nothing until Enable(true).
func NewProxy(target string, plan NetPlan) (*Proxy, error) {
	up, err := reverseProxy(target)
	if err != nil {
		return nil, err
	}
	if len(plan.Kinds) == 0 {
		plan.Kinds = AllNetKinds
	}
	if plan.MaxLatency <= 0 {
		plan.MaxLatency = 2 * time.Second
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{
		plan: plan, ln: ln, counts: map[NetKind]int{},
		rng: rand.New(rand.NewPCG(plan.Seed, 0x6e6574)),
	}
	p.upstream.Store(up)
	p.srv = &http.Server{Handler: http.HandlerFunc(p.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

// reverseProxy forwards to target, answering 502 when it cannot.
func reverseProxy(target string) (*httputil.ReverseProxy, error) {
	u, err := url.Parse(target)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("chaos: bad proxy target %q", target)
	}
	up := httputil.NewSingleHostReverseProxy(u)
	up.ErrorLog = nil
	up.ErrorHandler = func(w http.ResponseWriter, _ *http.Request, _ error) {
		w.WriteHeader(http.StatusBadGateway)
	}
	return up, nil
}

// SetTarget makes the proxy forward to target from now on: a homeserver
// that restarted on another port (Synapse does when its old one was taken)
// stays behind the same proxy URL. Requests already forwarded finish
// against the old target.
func (p *Proxy) SetTarget(target string) error {
	up, err := reverseProxy(target)
	if err != nil {
		return err
	}
	p.upstream.Store(up)
	return nil
}

// URL is the proxy's base URL.
func (p *Proxy) URL() string { return "http://" + p.ln.Addr().String() }

// Requests returns how many requests arrived while faults were enabled.
func (p *Proxy) Requests() int64 { return p.requests.Load() }

// Enable turns fault injection on or off (the proxy keeps forwarding).
func (p *Proxy) Enable(on bool) { p.enabled.Store(on) }

// Counts returns how many faults of each kind were injected.
func (p *Proxy) Counts() map[NetKind]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[NetKind]int, len(p.counts))
	for k, v := range p.counts {
		out[k] = v
	}
	return out
}

// Close stops the proxy and closes its connections.
func (p *Proxy) Close() error { return p.srv.Close() }

// pick decides the fault for r, or "".
func (p *Proxy) pick(r *http.Request) (NetKind, time.Duration) {
	if !p.enabled.Load() {
		return "", 0
	}
	p.requests.Add(1)
	if len(p.plan.Paths) > 0 {
		match := false
		for _, s := range p.plan.Paths {
			match = match || strings.Contains(r.URL.Path, s)
		}
		if !match {
			return "", 0
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.burst > 0 {
		p.burst--
		p.counts[ServerErrors]++
		return ServerErrors, http.StatusServiceUnavailable
	}
	if p.rng.Float64() >= p.plan.Rate {
		return "", 0
	}
	k := p.plan.Kinds[p.rng.IntN(len(p.plan.Kinds))]
	var d time.Duration
	switch k {
	case ServerErrors:
		p.burst = p.rng.IntN(4) // this one and up to 3 more
		d = time.Duration([]int{500, 502, 503, 504}[p.rng.IntN(4)])
	case Latency:
		d = time.Duration(p.rng.Int64N(int64(p.plan.MaxLatency)))
	case TooMany:
		d = time.Duration(100+p.rng.IntN(1900)) * time.Millisecond
	case Malformed, Truncate:
		d = time.Duration(p.rng.Int64()) // reused as a seed for the damage
	}
	p.counts[k]++
	return k, d
}

func (p *Proxy) serve(w http.ResponseWriter, r *http.Request) {
	kind, arg := p.pick(r)
	switch kind {
	case "":
		p.upstream.Load().ServeHTTP(w, r)
	case Reset:
		hangUp(w)
	case DropResponse:
		p.upstream.Load().ServeHTTP(httptest.NewRecorder(), r)
		hangUp(w)
	case TooMany:
		ms := arg.Milliseconds()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", strconv.FormatInt(max(1, ms/1000), 10))
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprintf(w, `{"errcode":"M_LIMIT_EXCEEDED","error":"chaos: slow down","retry_after_ms":%d}`, ms)
	case ServerErrors:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(int(arg))
		_, _ = io.WriteString(w, `{"errcode":"M_UNKNOWN","error":"chaos: server error"}`)
	case Latency:
		t := time.NewTimer(arg)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
		p.upstream.Load().ServeHTTP(w, r)
	case Truncate, Malformed:
		rec := httptest.NewRecorder()
		p.upstream.Load().ServeHTTP(rec, r)
		body := rec.Body.Bytes()
		rng := rand.New(rand.NewPCG(uint64(arg), 1))
		if kind == Truncate {
			body = body[:rng.IntN(len(body)+1)]
		} else {
			body = malform(body, rng, p.plan.Malform, p.plan.TypeOnly)
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.Header().Del("Content-Length")
		w.WriteHeader(rec.Code)
		_, _ = w.Write(body)
	}
}

// hangUp closes the client's connection without an HTTP response.
func hangUp(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			if tc, ok := conn.(*net.TCPConn); ok {
				_ = tc.SetLinger(0) // RST rather than FIN
			}
			_ = conn.Close()
			return
		}
	}
	panic(http.ErrAbortHandler)
}

// malform damages a JSON object body: a field gets the wrong type, goes
// missing, or the body grows by megabytes of padding. Bodies that are not
// JSON objects are cut in half instead.
func malform(body []byte, rng *rand.Rand, fields, typeOnly []string) []byte {
	var obj map[string]json.RawMessage
	if json.Unmarshal(body, &obj) != nil || len(obj) == 0 {
		return body[:len(body)/2]
	}
	if len(fields) == 0 {
		for k := range obj {
			fields = append(fields, k)
		}
		// Map order is random; sort for a seed-stable choice.
		slices.Sort(fields)
	}
	field := fields[rng.IntN(len(fields))]
	damage := rng.IntN(4)
	if slices.Contains(typeOnly, field) && (damage == 1 || damage == 2) {
		damage = 0
	}
	switch damage {
	case 0: // wrong type
		if bytes.HasPrefix(bytes.TrimSpace(obj[field]), []byte(`"`)) {
			obj[field] = json.RawMessage(`12345`)
		} else {
			obj[field] = json.RawMessage(`"chaos"`)
		}
	case 1: // missing
		delete(obj, field)
	case 2: // null
		obj[field] = json.RawMessage(`null`)
	default: // huge
		obj["chaos_padding"] = json.RawMessage(strconv.Quote(strings.Repeat("x", 4<<20)))
	}
	out, _ := json.Marshal(obj)
	return out
}
