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
	"strings"
	"time"
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

// provideTimeout bounds gathering the page's data.
const provideTimeout = 8 * time.Second

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
	// Refresh is the page's self-refresh interval (DefaultRefresh).
	Refresh time.Duration
	Logger  *slog.Logger
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
	if o.Refresh <= 0 {
		o.Refresh = DefaultRefresh
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
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
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &handler{p: p, o: o}
}

type handler struct {
	p Provider
	o Options
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", CSP)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Cache-Control", "no-store")
	if !h.authorized(r) {
		hd.Set("WWW-Authenticate", `Basic realm="Lisa status", charset="UTF-8"`)
		http.Error(w, "a token is required", http.StatusUnauthorized)
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
	ctx, cancel := context.WithTimeout(r.Context(), provideTimeout)
	defer cancel()
	pg, err := h.p(ctx)
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

// authorized checks the token, when one is set.
func (h *handler) authorized(r *http.Request) bool {
	if h.o.Token == "" {
		return true
	}
	given := ""
	if _, pw, ok := r.BasicAuth(); ok {
		given = pw
	} else if b, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		given = strings.TrimSpace(b)
	}
	return given != "" && subtle.ConstantTimeCompare([]byte(given), []byte(h.o.Token)) == 1
}
