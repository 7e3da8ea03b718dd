package search

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/lisabot/lisa/messages"
)

// Defaults and hard limits.
const (
	// MaxQueryRunes is the longest query accepted, after cleaning.
	MaxQueryRunes = 500
	// DefaultMaxResults is used when Config.MaxResults is not positive.
	DefaultMaxResults = 5
	// DefaultTimeout is used when Config.Timeout is not positive.
	DefaultTimeout = 10 * time.Second
	// DefaultMaxResponseBytes is used when Config.MaxResponseBytes is not
	// positive.
	DefaultMaxResponseBytes int64 = 1 << 20
	// DefaultMaxSnippetRunes is used when Config.MaxSnippetRunes is not
	// positive.
	DefaultMaxSnippetRunes = 300
	// DefaultUserAgent is used when Config.UserAgent is empty.
	DefaultUserAgent = "Lisa-bot/1 (web_search)"

	maxTitleRunes = 200
	maxURLBytes   = 2048
)

// Config configures a [Client]. Zero values select the defaults above.
type Config struct {
	// Endpoint is the absolute http(s) URL of the SearXNG search endpoint,
	// for example "https://searx.example/search". Query parameters already
	// present are kept; q and format are set by the client.
	Endpoint string
	// APIKey, when non-empty, is sent as "Authorization: Bearer <key>".
	APIKey string
	// MaxResults caps the number of results returned.
	MaxResults int
	// Timeout bounds a whole search, from connect to the last body byte.
	Timeout time.Duration
	// MaxResponseBytes caps the response body; larger bodies fail.
	MaxResponseBytes int64
	// MaxSnippetRunes caps each result's snippet.
	MaxSnippetRunes int
	// UserAgent is sent as the User-Agent header.
	UserAgent string
}

// Result is one accepted search hit. It is messages.SearchHit, so the
// research tools can take results without importing this adapter.
type Result = messages.SearchHit

// Client searches one SearXNG endpoint. It is safe for concurrent use.
type Client struct {
	cfg      Config
	endpoint *url.URL // nil when Config.Endpoint is unusable
	http     *http.Client
}

// New returns a client for cfg. An unusable endpoint is not reported here;
// every Search then fails with search_unavailable.
func New(cfg Config) *Client {
	if cfg.MaxResults <= 0 {
		cfg.MaxResults = DefaultMaxResults
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MaxResponseBytes <= 0 {
		cfg.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if cfg.MaxSnippetRunes <= 0 {
		cfg.MaxSnippetRunes = DefaultMaxSnippetRunes
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = DefaultUserAgent
	}
	c := &Client{cfg: cfg}
	if u, err := url.Parse(cfg.Endpoint); err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" {
		u.Fragment, u.RawFragment = "", ""
		c.endpoint = u
	}
	dialer := &net.Dialer{Timeout: cfg.Timeout, KeepAlive: 30 * time.Second}
	transport := &http.Transport{
		Proxy:                  nil, // never use proxy environment variables
		DialContext:            dialer.DialContext,
		ForceAttemptHTTP2:      true,
		TLSHandshakeTimeout:    cfg.Timeout,
		ResponseHeaderTimeout:  cfg.Timeout,
		MaxIdleConns:           4,
		IdleConnTimeout:        90 * time.Second,
		MaxResponseHeaderBytes: 64 << 10,
	}
	c.http = &http.Client{
		Transport: transport,
		Timeout:   cfg.Timeout,
		Jar:       nil,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
	return c
}

func toolErr(code messages.ToolCode, retryable bool, msg string) *messages.ToolError {
	return &messages.ToolError{Code: code, Message: msg, Retryable: retryable}
}

// CleanQuery validates and normalizes a model-supplied query: it must be
// valid UTF-8; control characters become spaces, runs of whitespace
// collapse to one space, and the result must hold 1 to [MaxQueryRunes]
// runes.
func CleanQuery(query string) (string, error) {
	if !utf8.ValidString(query) {
		return "", toolErr(messages.ToolInvalidArguments, false, "The search query is not valid UTF-8 text.")
	}
	q := cleanText(query)
	if q == "" {
		return "", toolErr(messages.ToolInvalidArguments, false, "The search query is empty.")
	}
	if utf8.RuneCountInString(q) > MaxQueryRunes {
		return "", toolErr(messages.ToolInvalidArguments, false, fmt.Sprintf("The search query is longer than %d characters.", MaxQueryRunes))
	}
	return q, nil
}

// Search sends query to the configured endpoint and returns at most
// Config.MaxResults accepted results, in the order the engine ranked them.
func (c *Client) Search(ctx context.Context, query string) ([]Result, error) {
	return c.SearchLimit(ctx, query, c.cfg.MaxResults)
}

// SearchLimit is Search returning at most n results; n is clamped to
// [1, Config.MaxResults].
func (c *Client) SearchLimit(ctx context.Context, query string, n int) ([]Result, error) {
	n = min(max(n, 1), c.cfg.MaxResults)
	body, _, err := c.get(ctx, query)
	var tr *transportError
	if errors.As(err, &tr) {
		return nil, tr.tool // the model sees the tool error alone
	}
	if err != nil {
		return nil, err
	}
	return c.parse(body, n)
}

// Probe is the outcome of [Client.Check].
type Probe struct {
	// Status is the HTTP status of the answer; 0 when none came.
	Status int
	// Results counts the accepted results of the test query.
	Results int
	// Cause is the network error (without the URL) when no answer came.
	Cause string
}

// Check sends query as Search does and reports the HTTP status beside the
// error, so that `lisa doctor` can tell a SearXNG whose JSON format is off
// (403) from other refusals.
func (c *Client) Check(ctx context.Context, query string) (Probe, error) {
	body, status, err := c.get(ctx, query)
	p := Probe{Status: status}
	var uerr *url.Error
	if status == 0 && errors.As(err, &uerr) {
		p.Cause = uerr.Err.Error()
	}
	if err != nil {
		return p, err
	}
	rs, err := c.parse(body, c.cfg.MaxResults)
	p.Results = len(rs)
	return p, err
}

// get sends the query and returns the body of a 200 answer, and the
// status of any answer.
func (c *Client) get(ctx context.Context, query string) ([]byte, int, error) {
	q, err := CleanQuery(query)
	if err != nil {
		return nil, 0, err
	}
	if c.endpoint == nil {
		return nil, 0, toolErr(messages.ToolSearchUnavailable, false, "Web search is not configured correctly.")
	}
	u := *c.endpoint
	params := u.Query()
	params.Set("q", q)
	params.Set("format", "json")
	u.RawQuery = params.Encode()

	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, 0, toolErr(messages.ToolSearchUnavailable, false, "Web search is not configured correctly.")
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.cfg.UserAgent)
	if c.cfg.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.cfg.APIKey)
	}

	resp, err := c.http.Do(req)
	if err != nil {
		return nil, 0, &transportError{tool: transportErr(ctx, err), cause: err}
	}
	defer resp.Body.Close()

	status := resp.StatusCode
	switch {
	case status >= 300 && status < 400:
		return nil, status, toolErr(messages.ToolSearchUnavailable, false, "The search service answered with a redirect, which is not followed.")
	case status == http.StatusTooManyRequests || status >= 500:
		return nil, status, toolErr(messages.ToolSearchUnavailable, true, fmt.Sprintf("The search service is temporarily unavailable (HTTP %d).", status))
	case status != http.StatusOK:
		return nil, status, toolErr(messages.ToolSearchUnavailable, false, fmt.Sprintf("The search service refused the request (HTTP %d).", status))
	}
	if resp.ContentLength > c.cfg.MaxResponseBytes {
		return nil, status, tooLarge()
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, c.cfg.MaxResponseBytes+1))
	if err != nil {
		return nil, status, transportErr(ctx, err)
	}
	if int64(len(body)) > c.cfg.MaxResponseBytes {
		return nil, status, tooLarge()
	}
	return body, status, nil
}

// transportError is a failed request: the tool error the model sees,
// unwrapping to the network error (for [Client.Check]).
type transportError struct {
	tool  error
	cause error
}

func (e *transportError) Error() string { return e.tool.Error() }

// Unwrap gives both the tool error and the network error.
func (e *transportError) Unwrap() []error { return []error{e.tool, e.cause} }

func tooLarge() error {
	return toolErr(messages.ToolSearchUnavailable, false, "The search service response exceeded the size limit.")
}

func transportErr(ctx context.Context, err error) error {
	if errors.Is(ctx.Err(), context.Canceled) {
		return toolErr(messages.ToolSearchUnavailable, false, "The search was cancelled.")
	}
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		return toolErr(messages.ToolTimeout, true, "The search service did not answer in time.")
	}
	return toolErr(messages.ToolSearchUnavailable, true, "The search service could not be reached.")
}

// wireResult is the part of a SearXNG result the client reads.
type wireResult struct {
	URL     string `json:"url"`
	Title   string `json:"title"`
	Content string `json:"content"`
}

type wireResponse struct {
	Results []json.RawMessage `json:"results"`
}

// parse decodes a SearXNG response into at most n accepted results.
func (c *Client) parse(body []byte, n int) ([]Result, error) {
	var wr wireResponse
	if err := json.Unmarshal(body, &wr); err != nil {
		return nil, toolErr(messages.ToolSearchUnavailable, false, "The search service returned a malformed response.")
	}
	out := make([]Result, 0, min(len(wr.Results), n))
	seen := make(map[string]bool)
	for _, raw := range wr.Results {
		if len(out) >= n {
			break
		}
		var r wireResult
		if err := json.Unmarshal(raw, &r); err != nil {
			continue // one odd entry does not spoil the rest
		}
		u, ok := NormalizeURL(r.URL)
		if !ok || seen[u] {
			continue
		}
		seen[u] = true
		out = append(out, Result{
			Title:   truncateRunes(cleanText(r.Title), maxTitleRunes),
			URL:     u,
			Snippet: truncateRunes(cleanText(r.Content), c.cfg.MaxSnippetRunes),
		})
	}
	return out, nil
}

// NormalizeURL accepts only absolute http and https URLs with a host and no
// user information. It lower-cases the scheme and host, drops the fragment
// and a default port, and reports false for anything else.
func NormalizeURL(raw string) (string, bool) {
	raw = strings.TrimSpace(raw)
	if raw == "" || len(raw) > maxURLBytes || !utf8.ValidString(raw) {
		return "", false
	}
	for _, r := range raw {
		if unicode.IsControl(r) || unicode.IsSpace(r) {
			return "", false
		}
	}
	u, err := url.Parse(raw)
	if err != nil || u.Opaque != "" || u.User != nil {
		return "", false
	}
	u.Scheme = strings.ToLower(u.Scheme)
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", false
	}
	host := strings.ToLower(u.Hostname())
	if host == "" {
		return "", false
	}
	port := u.Port()
	if (u.Scheme == "http" && port == "80") || (u.Scheme == "https" && port == "443") {
		port = ""
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if port != "" {
		host += ":" + port
	}
	u.Host = host
	u.Fragment, u.RawFragment = "", ""
	if u.Path == "" {
		u.Path = "/"
	}
	s := u.String()
	if len(s) > maxURLBytes {
		return "", false
	}
	return s, true
}

// cleanText drops invalid UTF-8, turns control characters into spaces,
// collapses whitespace runs to one space and trims the ends.
func cleanText(s string) string {
	s = strings.ToValidUTF8(s, "")
	var b strings.Builder
	b.Grow(len(s))
	space := false
	for _, r := range s {
		if unicode.IsControl(r) || unicode.IsSpace(r) || r == '\u2028' || r == '\u2029' {
			space = true
			continue
		}
		if space && b.Len() > 0 {
			b.WriteByte(' ')
		}
		space = false
		b.WriteRune(r)
	}
	return b.String()
}

// truncateRunes shortens s to at most n runes, ending with "…" when cut.
func truncateRunes(s string, n int) string {
	if n <= 0 || utf8.RuneCountInString(s) <= n {
		return s
	}
	if n == 1 {
		return "…"
	}
	i, count := 0, 0
	for j := range s {
		if count == n-1 {
			i = j
			break
		}
		count++
	}
	return strings.TrimRight(s[:i], " ") + "…"
}
