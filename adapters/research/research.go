package research

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/lisabot/lisa/actors/orchestrate"
	"github.com/lisabot/lisa/adapters/search"
	"github.com/lisabot/lisa/adapters/web"
	"github.com/lisabot/lisa/messages"
)

// Searcher runs web searches.
type Searcher interface {
	Search(ctx context.Context, query string) ([]search.Result, error)
}

// Fetcher downloads web pages.
type Fetcher interface {
	Fetch(ctx context.Context, rawURL string) (web.Page, error)
}

// Converter turns HTML into Markdown.
type Converter interface {
	Convert(ctx context.Context, html []byte) (string, error)
}

// Runner runs work in the tool pool.
type Runner interface {
	Run(ctx context.Context, work func(ctx context.Context) any) (any, error)
}

// Deps are the services and limits shared by all sessions.
type Deps struct {
	Search  Searcher // nil disables web_search
	Fetch   Fetcher
	Convert Converter
	Runner  Runner
	// MaxToolOutputCharacters bounds text returned to the model.
	MaxToolOutputCharacters int
	// MaxTotalArtifactBytes bounds what one invocation may store.
	MaxTotalArtifactBytes int64
}

type artifact struct {
	html     bool
	finalURL string
	title    string
	body     []byte
}

// Session is one invocation's tools, artifact store and known URLs.
type Session struct {
	d         Deps
	mu        sync.Mutex
	artifacts map[string]*artifact
	stored    int64
	// known holds the URLs fetch_web_page may fetch (see the known-URL
	// rule in knownurls.go); guarded by mu.
	known *knownURLs
}

// NewSession returns the tools of one invocation. Its fetch_web_page
// fetches only URLs known to the invocation: pass the invoking message and
// the room context given to the model to [Session.AllowURLsIn]; search
// results and fetched pages add theirs as the tools run.
func NewSession(d Deps) *Session {
	return &Session{d: d, artifacts: map[string]*artifact{}, known: newKnownURLs(maxKnownURLs)}
}

// AllowURLsIn makes the http and https URLs found in text known to this
// session, so that fetch_web_page may fetch them. Call it with the text
// the model is given as the conversation (the invoking message and the
// room context); never with text the model wrote. At most 256 URLs are
// taken from one text and 2,048 from all sources of a session; the
// HTML-unescaped form of text is read too.
func (s *Session) AllowURLsIn(text string) {
	s.allow(extractURLs(text, nil, maxURLsPerText)...)
}

// allow makes urls known, within the session's bound.
func (s *Session) allow(urls ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, u := range urls {
		s.known.add(u)
	}
}

// isKnown reports whether rawURL matches a known URL of the session.
func (s *Session) isKnown(rawURL string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.known.has(rawURL)
}

// learnLinks makes the links in text, a page the model is shown whose
// final URL is pageURL, known: absolute URLs and Markdown link targets
// resolved against pageURL.
func (s *Session) learnLinks(text, pageURL string) {
	base, err := url.Parse(pageURL)
	if err != nil || base.Host == "" {
		base = nil
	}
	s.allow(extractURLs(text, base, maxURLsPerText)...)
}

// Tools lists the session's tools for the orchestrator.
func (s *Session) Tools() []orchestrate.Tool {
	var out []orchestrate.Tool
	if s.d.Search != nil {
		out = append(out, tool{s: s, spec: searchSpec, call: s.search})
	}
	out = append(out, tool{s: s, spec: fetchSpec, call: s.fetch}, tool{s: s, spec: convertSpec, call: s.convert})
	return out
}

var (
	searchSpec = orchestrate.ToolSpec{Name: "web_search", Description: "Search the web. Returns numbered results with title, URL and a short snippet.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string","description":"what to search for"}},"required":["query"],"additionalProperties":false}`)}
	fetchSpec = orchestrate.ToolSpec{Name: "fetch_web_page", Description: "Download one http(s) web page. The URL must be one that appeared in the room messages, in web_search results or in a page fetched in this conversation, copied exactly; other URLs are refused. HTML pages return an artifact_id to convert with html_to_markdown; plain text is returned directly.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"url":{"type":"string","description":"absolute http or https URL"}},"required":["url"],"additionalProperties":false}`)}
	convertSpec = orchestrate.ToolSpec{Name: "html_to_markdown", Description: "Convert a downloaded HTML page (by artifact_id from fetch_web_page) to Markdown text.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"artifact_id":{"type":"string"}},"required":["artifact_id"],"additionalProperties":false}`)}
)

type tool struct {
	s    *Session
	spec orchestrate.ToolSpec
	call func(ctx context.Context, args json.RawMessage) orchestrate.ToolResult
}

func (t tool) Spec() orchestrate.ToolSpec { return t.spec }

// Call runs the tool in the pool; the invocation's context bounds it.
func (t tool) Call(ctx context.Context, args json.RawMessage) orchestrate.ToolResult {
	res, err := t.s.d.Runner.Run(ctx, func(ctx context.Context) any { return t.call(ctx, args) })
	if err != nil {
		return failure(&messages.ToolError{Code: messages.ToolTimeout, Message: "the tool did not finish in time", Retryable: false})
	}
	if r, ok := res.(orchestrate.ToolResult); ok {
		return r
	}
	return failure(&messages.ToolError{Code: messages.ToolFailed, Message: "the tool failed unexpectedly"})
}

func failure(err error) orchestrate.ToolResult {
	var te *messages.ToolError
	if !errors.As(err, &te) {
		te = &messages.ToolError{Code: messages.ToolHTTPError, Message: "the tool failed", Retryable: true}
	}
	return orchestrate.ToolResult{Code: string(te.Code), Content: te.Message, Retryable: te.Retryable}
}

func badArgs(msg string) orchestrate.ToolResult {
	return failure(&messages.ToolError{Code: messages.ToolInvalidArguments, Message: msg})
}

func (s *Session) search(ctx context.Context, args json.RawMessage) orchestrate.ToolResult {
	var a struct {
		Query string `json:"query"`
	}
	if json.Unmarshal(args, &a) != nil || strings.TrimSpace(a.Query) == "" {
		return badArgs("query must be a non-empty string")
	}
	results, err := s.d.Search.Search(ctx, a.Query)
	if err != nil {
		return failure(err)
	}
	res := orchestrate.ToolResult{OK: true, Code: "ok", Content: s.bound(search.Format(results)), SourceTitles: map[string]string{}}
	for _, r := range results {
		res.SourceURLs = append(res.SourceURLs, r.URL)
		res.SourceTitles[r.URL] = r.Title
	}
	s.allow(res.SourceURLs[:min(len(res.SourceURLs), maxURLsPerText)]...)
	if len(results) == 0 {
		res.Content = "No results."
	}
	return res
}

func (s *Session) fetch(ctx context.Context, args json.RawMessage) orchestrate.ToolResult {
	var a struct {
		URL string `json:"url"`
	}
	if json.Unmarshal(args, &a) != nil || strings.TrimSpace(a.URL) == "" {
		return badArgs("url must be a non-empty string")
	}
	if _, err := web.ValidateURL(a.URL); err != nil {
		return failure(err)
	}
	// The known-URL rule (knownurls.go): a URL the model built itself,
	// say from the room's text, never reaches the network. Nothing here
	// logs the URL.
	if !s.isKnown(a.URL) {
		return failure(errUnknownURL)
	}
	page, err := s.d.Fetch.Fetch(ctx, a.URL)
	if err != nil {
		return failure(err)
	}
	s.allow(page.FinalURL) // the redirect target
	mediaType, _, _ := strings.Cut(page.ContentType, ";")
	mediaType = strings.TrimSpace(strings.ToLower(mediaType))
	isHTML := mediaType == "text/html" || mediaType == "application/xhtml+xml"
	id, err := s.store(&artifact{html: isHTML, finalURL: page.FinalURL, title: page.Title, body: page.Body})
	if err != nil {
		return failure(err)
	}
	res := orchestrate.ToolResult{OK: true, Code: "ok", SourceURLs: []string{page.FinalURL}, SourceTitles: map[string]string{page.FinalURL: page.Title}}
	meta := map[string]any{"artifact_id": id, "final_url": page.FinalURL, "content_type": page.ContentType,
		"byte_count": len(page.Body), "title": page.Title}
	if isHTML {
		meta["next_step"] = "call html_to_markdown with this artifact_id to read the page"
	} else {
		text := s.bound(cleanText(string(page.Body)))
		s.learnLinks(text, page.FinalURL)
		meta["text"] = text
	}
	b, _ := json.Marshal(meta)
	res.Content = string(b)
	return res
}

func (s *Session) convert(ctx context.Context, args json.RawMessage) orchestrate.ToolResult {
	var a struct {
		ArtifactID string `json:"artifact_id"`
	}
	if json.Unmarshal(args, &a) != nil || strings.TrimSpace(a.ArtifactID) == "" {
		return badArgs("artifact_id must be a non-empty string")
	}
	s.mu.Lock()
	art := s.artifacts[a.ArtifactID]
	s.mu.Unlock()
	if art == nil {
		return failure(&messages.ToolError{Code: messages.ToolArtifactNotFound, Message: "no such artifact in this conversation"})
	}
	if !art.html {
		return failure(&messages.ToolError{Code: messages.ToolUnsupportedContentType, Message: "the artifact is not HTML"})
	}
	md, err := s.d.Convert.Convert(ctx, art.body)
	if err != nil {
		return failure(err)
	}
	if _, err := s.store(&artifact{finalURL: art.finalURL, title: art.title, body: []byte(md)}); err != nil {
		return failure(err)
	}
	text := s.bound(cleanText(md))
	s.learnLinks(text, art.finalURL) // links the model now sees
	return orchestrate.ToolResult{OK: true, Code: "ok", Content: text,
		SourceURLs: []string{art.finalURL}, SourceTitles: map[string]string{art.finalURL: art.title}}
}

// store keeps an artifact under a fresh opaque ID, within the session's
// byte budget.
func (s *Session) store(a *artifact) (string, error) {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("research: artifact id: %w", err)
	}
	id := "art_" + hex.EncodeToString(b[:])
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.d.MaxTotalArtifactBytes > 0 && s.stored+int64(len(a.body)) > s.d.MaxTotalArtifactBytes {
		return "", &messages.ToolError{Code: messages.ToolInvocationLimit, Message: "this conversation has downloaded as much as it may"}
	}
	s.stored += int64(len(a.body))
	s.artifacts[id] = a
	return id, nil
}

// bound truncates text for the model at a rune boundary, marked.
func (s *Session) bound(text string) string {
	limit := s.d.MaxToolOutputCharacters
	if limit <= 0 || utf8.RuneCountInString(text) <= limit {
		return text
	}
	const marker = "\n…(truncated)"
	keep := limit - utf8.RuneCountInString(marker)
	if keep <= 0 {
		return string([]rune(text)[:limit])
	}
	n := 0
	for i := range text {
		if n == keep {
			return text[:i] + marker
		}
		n++
	}
	return text
}

// cleanText removes control characters (keeping newlines and tabs) and
// normalizes line endings.
func cleanText(s string) string {
	s = strings.ReplaceAll(strings.ReplaceAll(s, "\r\n", "\n"), "\r", "\n")
	return strings.Map(func(r rune) rune {
		if r == '\n' || r == '\t' || (r >= 0x20 && r != 0x7f && !(r >= 0x80 && r < 0xa0)) {
			if r == utf8.RuneError {
				return -1
			}
			return r
		}
		return -1
	}, s)
}
