package web

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/lisabot/lisa/messages"
)

// Defaults used for zero Config fields; they match config.Default().
const (
	DefaultConnectTimeout   = 5 * time.Second
	DefaultReadTimeout      = 15 * time.Second
	DefaultTotalTimeout     = 20 * time.Second
	DefaultMaxRedirects     = 5
	DefaultMaxDownloadBytes = 2_000_000
	DefaultUserAgent        = "LisaBot/1.0 (Matrix chat bot)"
)

// Transport bounds that are not configurable.
const (
	maxHeaderBytes  = 64 << 10
	maxConnsPerHost = 4
)

// Config bounds a Fetcher. Zero durations, counts and sizes take the
// Default* values; a negative MaxRedirects forbids redirects entirely.
type Config struct {
	// ConnectTimeout bounds name resolution plus TCP connect, and
	// separately the TLS handshake.
	ConnectTimeout time.Duration
	// ReadTimeout bounds waiting for response headers and each wait for
	// more body bytes.
	ReadTimeout time.Duration
	// TotalTimeout bounds a whole Fetch, redirects and body included.
	TotalTimeout time.Duration
	// MaxRedirects is how many redirects one Fetch follows.
	MaxRedirects int
	// MaxDownloadBytes caps the body of the final response.
	MaxDownloadBytes int64
	// UserAgent is sent with every request.
	UserAgent string
	// AllowPrivateAddresses turns off the CheckAddr guard
	// (web.allow_private_addresses); meant for tests and closed networks.
	AllowPrivateAddresses bool

	// LookupIP resolves a host name; nil uses the system resolver. A test
	// seam.
	LookupIP func(ctx context.Context, host string) ([]netip.Addr, error)
	// Dial opens the raw TCP connection to an already checked "ip:port";
	// nil uses a net.Dialer. A test seam: it never receives a host name.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

func (c Config) withDefaults() Config {
	if c.ConnectTimeout <= 0 {
		c.ConnectTimeout = DefaultConnectTimeout
	}
	if c.ReadTimeout <= 0 {
		c.ReadTimeout = DefaultReadTimeout
	}
	if c.TotalTimeout <= 0 {
		c.TotalTimeout = DefaultTotalTimeout
	}
	switch {
	case c.MaxRedirects == 0:
		c.MaxRedirects = DefaultMaxRedirects
	case c.MaxRedirects < 0:
		c.MaxRedirects = 0
	}
	if c.MaxDownloadBytes <= 0 {
		c.MaxDownloadBytes = DefaultMaxDownloadBytes
	}
	if c.UserAgent == "" {
		c.UserAgent = DefaultUserAgent
	}
	return c
}

// Page is one successfully downloaded document; its Body holds at most
// MaxDownloadBytes bytes, undecoded. It is messages.WebPage, so the
// research tools can take pages without importing this adapter.
type Page = messages.WebPage

// Fetcher downloads web pages within the bounds of its Config. It is safe
// for concurrent use.
type Fetcher struct {
	cfg       Config
	transport *http.Transport
	client    *http.Client
}

// NewFetcher builds a Fetcher with its own HTTP client and transport.
// Lisa never uses proxy environment variables (HTTP_PROXY, HTTPS_PROXY,
// NO_PROXY); a proxy must be configured explicitly, and no configuration
// key for one exists yet, so the transport's Proxy is nil.
func NewFetcher(cfg Config) *Fetcher {
	f := &Fetcher{cfg: cfg.withDefaults()}
	f.transport = &http.Transport{
		Proxy:                 nil,
		DialContext:           f.dialContext,
		TLSClientConfig:       &tls.Config{MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout:   f.cfg.ConnectTimeout,
		ResponseHeaderTimeout: f.cfg.ReadTimeout,
		DisableCompression:    true,
		// No connection reuse: each fetch starts clean, and a server that
		// sends more than it declared cannot make net/http log the excess
		// bytes as an "unsolicited response" on an idle connection.
		DisableKeepAlives:      true,
		MaxConnsPerHost:        maxConnsPerHost,
		MaxResponseHeaderBytes: maxHeaderBytes,
		ForceAttemptHTTP2:      true,
	}
	f.client = &http.Client{
		Transport:     f.transport,
		CheckRedirect: f.checkRedirect,
		Jar:           nil,
	}
	return f
}

// CloseIdleConnections closes pooled connections that are not in use.
func (f *Fetcher) CloseIdleConnections() { f.transport.CloseIdleConnections() }

// Fetch downloads rawURL, following redirects, and returns the page when
// the final response is a 2xx with an accepted media type, identity
// encoding and a body within MaxDownloadBytes. Every error is a
// *messages.ToolError.
func (f *Fetcher) Fetch(ctx context.Context, rawURL string) (Page, error) {
	u, err := ValidateURL(rawURL)
	if err != nil {
		return Page{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, f.cfg.TotalTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return Page{}, invalidURL("URL could not be parsed")
	}
	req.Header.Set("User-Agent", f.cfg.UserAgent)
	req.Header.Set("Accept", "text/html, application/xhtml+xml;q=0.9, text/plain;q=0.8")
	req.Header.Set("Accept-Encoding", "identity")

	resp, err := f.client.Do(req)
	if err != nil {
		return Page{}, classify(ctx, err, false)
	}
	defer resp.Body.Close()

	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return Page{}, &messages.ToolError{
			Code:      messages.ToolHTTPError,
			Message:   fmt.Sprintf("server answered with status %d", resp.StatusCode),
			Retryable: resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusRequestTimeout,
		}
	}
	if !identityEncoding(resp.Header.Values("Content-Encoding")) {
		return Page{}, unsupported("compressed responses are not supported")
	}
	mediaType, ok := acceptedType(resp.Header.Get("Content-Type"))
	if !ok {
		return Page{}, unsupported("only HTML and plain text pages can be fetched")
	}
	if resp.ContentLength > f.cfg.MaxDownloadBytes {
		return Page{}, tooLarge()
	}
	body, err := f.readBody(ctx, cancel, resp)
	if err != nil {
		return Page{}, err
	}
	final := *resp.Request.URL
	final.Fragment, final.RawFragment = "", ""
	page := Page{FinalURL: final.String(), ContentType: mediaType, Body: body}
	if !strings.HasPrefix(mediaType, "text/plain") {
		page.Title = extractTitle(body)
	}
	return page, nil
}

// readBody streams the body up to MaxDownloadBytes+1 bytes, cancelling the
// request when no bytes arrive for ReadTimeout.
func (f *Fetcher) readBody(ctx context.Context, cancel context.CancelFunc, resp *http.Response) ([]byte, error) {
	var stalled atomic.Bool
	timer := time.AfterFunc(f.cfg.ReadTimeout, func() {
		stalled.Store(true)
		cancel()
	})
	defer timer.Stop()

	var buf bytes.Buffer
	if resp.ContentLength > 0 {
		buf.Grow(int(resp.ContentLength))
	}
	r := &idleReader{r: resp.Body, timer: timer, idle: f.cfg.ReadTimeout}
	_, err := buf.ReadFrom(io.LimitReader(r, f.cfg.MaxDownloadBytes+1))
	if err != nil {
		return nil, classify(ctx, err, stalled.Load())
	}
	if int64(buf.Len()) > f.cfg.MaxDownloadBytes {
		return nil, tooLarge()
	}
	return buf.Bytes(), nil
}

// idleReader restarts the stall timer after every read.
type idleReader struct {
	r     io.Reader
	timer *time.Timer
	idle  time.Duration
}

func (ir *idleReader) Read(p []byte) (int, error) {
	n, err := ir.r.Read(p)
	ir.timer.Reset(ir.idle)
	return n, err
}

// checkRedirect bounds and re-validates every redirect hop. The address
// guard itself runs at dial time.
func (f *Fetcher) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) > f.cfg.MaxRedirects {
		return &messages.ToolError{Code: messages.ToolRedirectLimit, Message: "too many redirects"}
	}
	u, err := ValidateURL(req.URL.String())
	if err != nil {
		return invalidURL("redirect target is not an allowed URL")
	}
	for _, prev := range via {
		if prev.URL.String() == u.String() {
			return &messages.ToolError{Code: messages.ToolRedirectLimit, Message: "redirect loop"}
		}
	}
	req.URL = u
	req.Header.Del("Authorization")
	req.Header.Del("Cookie")
	return nil
}

// dialContext resolves host names with LookupIP, refuses the connection
// if any resolved address fails CheckAddr, and dials the checked IP
// literals in order. It is the only way the transport opens connections.
func (f *Fetcher) dialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, f.cfg.ConnectTimeout)
	defer cancel()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, invalidURL("URL host is malformed")
	}
	ips, err := f.resolve(ctx, host)
	if err != nil {
		return nil, err
	}
	if !f.cfg.AllowPrivateAddresses {
		for _, ip := range ips {
			if err := CheckAddr(ip); err != nil {
				return nil, err
			}
		}
	}
	var lastErr error
	for _, ip := range ips {
		c, err := f.dial(ctx, network, net.JoinHostPort(ip.Unmap().WithZone("").String(), port))
		if err == nil {
			return c, nil
		}
		lastErr = err
		if ctx.Err() != nil {
			break
		}
	}
	return nil, lastErr
}

func (f *Fetcher) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	if ip, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{ip}, nil
	}
	lookup := f.cfg.LookupIP
	if lookup == nil {
		lookup = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	ips, err := lookup(ctx, host)
	if err != nil {
		var dnsErr *net.DNSError
		if ctx.Err() != nil || errors.As(err, &dnsErr) && dnsErr.IsTimeout {
			return nil, &messages.ToolError{Code: messages.ToolTimeout, Message: "name resolution timed out", Retryable: true}
		}
		notFound := errors.As(err, &dnsErr) && dnsErr.IsNotFound
		return nil, &messages.ToolError{Code: messages.ToolHTTPError, Message: "host name could not be resolved", Retryable: !notFound}
	}
	if len(ips) == 0 {
		return nil, &messages.ToolError{Code: messages.ToolHTTPError, Message: "host name could not be resolved"}
	}
	return ips, nil
}

func (f *Fetcher) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if f.cfg.Dial != nil {
		return f.cfg.Dial(ctx, network, addr)
	}
	d := net.Dialer{Timeout: f.cfg.ConnectTimeout, KeepAlive: 30 * time.Second}
	if !f.cfg.AllowPrivateAddresses {
		// Defence in depth: re-check the address the socket connects to.
		d.Control = func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return blocked()
			}
			return CheckAddr(ap.Addr())
		}
	}
	return d.DialContext(ctx, network, addr)
}

// classify turns a client or body-read error into a ToolError.
func classify(ctx context.Context, err error, stalled bool) error {
	var te *messages.ToolError
	if errors.As(err, &te) {
		return te
	}
	if stalled {
		return &messages.ToolError{Code: messages.ToolTimeout, Message: "server stopped sending data", Retryable: true}
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return &messages.ToolError{Code: messages.ToolTimeout, Message: "download took too long", Retryable: true}
	}
	if ctx.Err() != nil {
		return &messages.ToolError{Code: messages.ToolTimeout, Message: "download was cancelled"}
	}
	var netErr net.Error
	if errors.As(err, &netErr) && netErr.Timeout() {
		return &messages.ToolError{Code: messages.ToolTimeout, Message: "server did not answer in time", Retryable: true}
	}
	var certErr *tls.CertificateVerificationError
	var hostErr x509.HostnameError
	var authErr x509.UnknownAuthorityError
	if errors.As(err, &certErr) || errors.As(err, &hostErr) || errors.As(err, &authErr) {
		return &messages.ToolError{Code: messages.ToolHTTPError, Message: "TLS certificate verification failed"}
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return &messages.ToolError{Code: messages.ToolHTTPError, Message: "response ended early", Retryable: true}
	}
	return &messages.ToolError{Code: messages.ToolHTTPError, Message: "download failed", Retryable: true}
}

func unsupported(msg string) error {
	return &messages.ToolError{Code: messages.ToolUnsupportedContentType, Message: msg}
}

func tooLarge() error {
	return &messages.ToolError{Code: messages.ToolDownloadTooLarge, Message: "page exceeds the download size limit"}
}

// identityEncoding reports whether the Content-Encoding header values
// leave the body unencoded.
func identityEncoding(values []string) bool {
	for _, v := range values {
		for _, e := range strings.Split(v, ",") {
			e = strings.ToLower(strings.TrimSpace(e))
			if e != "" && e != "identity" {
				return false
			}
		}
	}
	return true
}

// acceptedType parses a Content-Type header and reports whether it names
// HTML, XHTML or plain text. It returns the normalised type, keeping only
// the charset parameter.
func acceptedType(header string) (string, bool) {
	mt, params, err := mime.ParseMediaType(header)
	if err != nil {
		// Tolerate malformed parameters, never a malformed type.
		base, _, _ := strings.Cut(header, ";")
		mt, params = strings.ToLower(strings.TrimSpace(base)), nil
	}
	switch mt {
	case "text/html", "application/xhtml+xml", "text/plain":
	default:
		return "", false
	}
	if cs := strings.ToLower(params["charset"]); cs != "" && len(cs) <= 40 {
		if s := mime.FormatMediaType(mt, map[string]string{"charset": cs}); s != "" {
			return s, true
		}
	}
	return mt, true
}
