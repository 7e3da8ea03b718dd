package status

import (
	"bytes"
	"context"
	"crypto/subtle"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lisabot/lisa/hostguard"
)

//go:embed page.html
var pageHTML string

//go:embed status.css
var pageCSS []byte

// CSP is the Content-Security-Policy of every answer: nothing but the
// page's own stylesheet loads, and no script of any kind runs.
const CSP = "default-src 'none'; style-src 'self'; img-src 'none'; script-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// DefaultRefresh is how often the page reloads itself.
const DefaultRefresh = 5 * time.Second

// Defaults of [Options].
const (
	// DefaultTimeout bounds gathering the page's data.
	DefaultTimeout = 8 * time.Second
	// DefaultCacheFor is how long gathered data is shown again before it
	// is gathered anew.
	DefaultCacheFor = time.Second
	// DefaultMaxConcurrent is how many requests are served at once;
	// more get 503 with Retry-After.
	DefaultMaxConcurrent = 4
	// DefaultAuthBurst is how many wrong tokens are answered before
	// they are throttled; DefaultAuthEvery is how often one more is
	// allowed after that.
	DefaultAuthBurst = 10
	DefaultAuthEvery = time.Second
)

var page = template.Must(template.New("page").Funcs(template.FuncMap{
	"ms": func(ms int64) string {
		return (time.Duration(ms) * time.Millisecond).Round(10 * time.Millisecond).String()
	},
}).Parse(pageHTML))

// Provider gathers the page's data.
type Provider func(ctx context.Context) (Page, error)

// Options configure the server.
type Options struct {
	// Token, when set, is required of every request, as
	// "Authorization: Bearer TOKEN" or as the password of HTTP Basic
	// authentication (what a browser sends). Without it the address must
	// be loopback.
	Token string
	// ListenHost is the host part of the listening address; without a
	// token only it, a loopback literal or "localhost" is accepted as a
	// request's Host (421 otherwise), so a web site that rebinds its name
	// to this machine reads nothing. Serve fills it in.
	ListenHost string
	// Refresh is the page's self-refresh interval (DefaultRefresh).
	Refresh time.Duration
	// Timeout bounds gathering the data of one load (DefaultTimeout).
	Timeout time.Duration
	// CacheFor is how long gathered data is reused (DefaultCacheFor); a
	// load within it asks nothing of the rest of Lisa.
	CacheFor time.Duration
	// MaxConcurrent bounds the requests served at once
	// (DefaultMaxConcurrent); the excess gets 503 with Retry-After.
	MaxConcurrent int
	// AuthBurst and AuthEvery throttle wrong tokens: AuthBurst of them,
	// then one per AuthEvery, all requests together; a request with a
	// token beyond that gets 429 with Retry-After before its token is
	// looked at (DefaultAuthBurst, DefaultAuthEvery).
	AuthBurst int
	AuthEvery time.Duration
	// OnAuthFailure, if set, is called for every wrong or throttled
	// token with the reason ("wrong_token", "throttled"): the metric
	// lisa_status_auth_failures_total.
	OnAuthFailure func(reason string)
	// Now is the clock (time.Now).
	Now    func() time.Time
	Logger *slog.Logger
}

// Server is a running status page.
type Server struct {
	srv *http.Server
	ln  net.Listener
}

// Serve listens on addr and serves the page. A non-loopback address is
// refused unless o.Token is set.
func Serve(addr string, p Provider, o Options) (*Server, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("status: %w", err)
	}
	if o.Token == "" && host != "localhost" {
		ip, err := netip.ParseAddr(host)
		if err != nil || !ip.Unmap().IsLoopback() {
			return nil, fmt.Errorf("status: %s is not a loopback address and no token is set (runtime.status_allow_remote, runtime.status_token)", addr)
		}
	}
	if o.ListenHost == "" {
		o.ListenHost = host
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("status: listen: %w", err)
	}
	s := &Server{ln: ln, srv: &http.Server{Handler: Handler(p, o), ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout: 10 * time.Second, WriteTimeout: 15 * time.Second, IdleTimeout: time.Minute, MaxHeaderBytes: 16 << 10}}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// Addr is the listening address.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops the server.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Handler answers "/" (the page), "/status.json" and "/status.css".
func Handler(p Provider, o Options) http.Handler {
	if o.Refresh <= 0 {
		o.Refresh = DefaultRefresh
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.CacheFor <= 0 {
		o.CacheFor = DefaultCacheFor
	}
	if o.MaxConcurrent <= 0 {
		o.MaxConcurrent = DefaultMaxConcurrent
	}
	if o.AuthBurst <= 0 {
		o.AuthBurst = DefaultAuthBurst
	}
	if o.AuthEvery <= 0 {
		o.AuthEvery = DefaultAuthEvery
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.OnAuthFailure == nil {
		o.OnAuthFailure = func(string) {}
	}
	return &handler{p: p, o: o, slots: make(chan struct{}, o.MaxConcurrent), gather: make(chan struct{}, 1),
		auth: bucket{burst: float64(o.AuthBurst), every: o.AuthEvery, tokens: float64(o.AuthBurst)}}
}

type handler struct {
	p Provider
	o Options
	// slots holds one value per request being served.
	slots chan struct{}
	// gather is held while the data is gathered; cached and at are the
	// last data gathered and when (under gather).
	gather chan struct{}
	cached Page
	at     time.Time
	auth   bucket
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", CSP)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Cache-Control", "no-store")
	if h.o.Token == "" && !hostguard.Local(r.Host, h.o.ListenHost) {
		http.Error(w, "this server answers only to its own address (127.0.0.1, [::1], localhost)", http.StatusMisdirectedRequest)
		return
	}
	select {
	case h.slots <- struct{}{}:
		defer func() { <-h.slots }()
	default:
		hd.Set("Retry-After", "1")
		http.Error(w, "busy; try again", http.StatusServiceUnavailable)
		return
	}
	switch h.authorize(r) {
	case authMissing, authWrong:
		hd.Set("WWW-Authenticate", `Basic realm="Lisa status", charset="UTF-8"`)
		http.Error(w, "a token is required", http.StatusUnauthorized)
		return
	case authThrottled:
		hd.Set("Retry-After", strconv.Itoa(max(int(h.o.AuthEvery.Round(time.Second)/time.Second), 1)))
		http.Error(w, "too many wrong tokens; try again later", http.StatusTooManyRequests)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		hd.Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	switch r.URL.Path {
	case "/", "/status.json":
	case "/status.css":
		hd.Set("Content-Type", "text/css; charset=utf-8")
		_, _ = w.Write(pageCSS)
		return
	default:
		http.NotFound(w, r)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.o.Timeout)
	defer cancel()
	pg, err := h.page(ctx)
	if err != nil {
		h.o.Logger.Warn("status page: gathering the data failed", "error", err)
		http.Error(w, "status unavailable", http.StatusServiceUnavailable)
		return
	}
	pg.RefreshSeconds = max(int(h.o.Refresh/time.Second), 1)
	var buf bytes.Buffer
	if r.URL.Path == "/status.json" {
		hd.Set("Content-Type", "application/json")
		if err := json.NewEncoder(&buf).Encode(pg); err != nil {
			http.Error(w, "internal error", http.StatusInternalServerError)
			return
		}
	} else {
		hd.Set("Content-Type", "text/html; charset=utf-8")
		if err := page.Execute(&buf, pg); err != nil {
			h.o.Logger.Error("status page: rendering failed", "error", err)
			http.Error(w, "internal error", http.StatusInternalServerError)
			return
		}
	}
	_, _ = w.Write(buf.Bytes())
}

// page returns the data gathered within CacheFor, or gathers it, one
// request at a time: the others wait for it (or for their ctx). The
// provider must return by ctx's end (Timeout), with what it has.
func (h *handler) page(ctx context.Context) (Page, error) {
	select {
	case h.gather <- struct{}{}:
		defer func() { <-h.gather }()
	case <-ctx.Done():
		return Page{}, ctx.Err()
	}
	if !h.at.IsZero() && h.o.Now().Sub(h.at) < h.o.CacheFor {
		return h.cached, nil
	}
	pg, err := h.p(ctx)
	if err != nil {
		return Page{}, err
	}
	h.cached, h.at = pg, h.o.Now()
	return pg, nil
}

// authResult is what a request's token amounts to.
type authResult int

const (
	authOK authResult = iota
	authMissing
	authWrong
	authThrottled
)

// authorize checks the token, when one is set. A request that carries a
// token while wrong ones are throttled is refused before it is compared.
func (h *handler) authorize(r *http.Request) authResult {
	if h.o.Token == "" {
		return authOK
	}
	given := ""
	if _, pw, ok := r.BasicAuth(); ok {
		given = pw
	} else if b, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		given = strings.TrimSpace(b)
	}
	if given == "" {
		return authMissing
	}
	if h.auth.throttled(h.o.Now()) {
		h.o.OnAuthFailure("throttled")
		return authThrottled
	}
	if subtle.ConstantTimeCompare([]byte(given), []byte(h.o.Token)) == 1 {
		return authOK
	}
	h.auth.spend(h.o.Now())
	h.o.OnAuthFailure("wrong_token")
	return authWrong
}

// bucket is a token bucket of wrong tokens: burst of them, refilled by
// one every every.
type bucket struct {
	mu     sync.Mutex
	burst  float64
	every  time.Duration
	tokens float64
	at     time.Time
}

func (b *bucket) refill(now time.Time) {
	if !b.at.IsZero() && now.After(b.at) {
		b.tokens = min(b.burst, b.tokens+float64(now.Sub(b.at))/float64(b.every))
	}
	if b.at.IsZero() || now.After(b.at) {
		b.at = now
	}
}

// throttled reports whether no wrong token may be tried now.
func (b *bucket) throttled(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill(now)
	return b.tokens < 1
}

// spend takes one wrong token from the bucket.
func (b *bucket) spend(now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill(now)
	b.tokens = max(b.tokens-1, 0)
}
