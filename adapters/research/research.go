package research

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/lisabot/lisa/messages"
)

// Searcher runs web searches.
type Searcher interface {
	// Search returns the engine's results for query, at most the
	// searcher's own maximum.
	Search(ctx context.Context, query string) ([]messages.SearchHit, error)
}

// LimitedSearcher is a [Searcher] that can be asked for fewer results
// than its maximum (search.Client is one). Without it, web_search cuts
// the results of Search to the count asked for.
type LimitedSearcher interface {
	Searcher
	// SearchLimit is Search returning at most n results (n >= 1).
	SearchLimit(ctx context.Context, query string, n int) ([]messages.SearchHit, error)
}

// Fetcher downloads web pages.
type Fetcher interface {
	Fetch(ctx context.Context, rawURL string) (messages.WebPage, error)
}

// Converter turns HTML into Markdown.
type Converter interface {
	Convert(ctx context.Context, html []byte) (string, error)
}

// URLValidator checks that raw is an absolute http(s) URL the fetcher
// would request, and returns it normalised (the fetcher's own rule; in
// Lisa, web.ValidateURL). Failures are *messages.ToolError values.
type URLValidator func(raw string) (*url.URL, error)

// DefaultMaxSessions bounds the open sessions when Deps.MaxSessions is
// not positive.
const DefaultMaxSessions = 256

// DefaultMaxSearchResults bounds web_search's result_count when
// Deps.MaxSearchResults is not positive.
const DefaultMaxSearchResults = 5

// Deps are the services and limits shared by all sessions.
type Deps struct {
	Search  Searcher // nil disables web_search
	Fetch   Fetcher
	Convert Converter
	// ValidateURL is the fetcher's URL rule, used to check requested URLs
	// and to compare them with known ones. Without it every URL is
	// refused.
	ValidateURL URLValidator
	// MaxToolOutputCharacters bounds text returned to the model.
	MaxToolOutputCharacters int
	// MaxTotalArtifactBytes bounds what one invocation may store.
	MaxTotalArtifactBytes int64
	// MaxSessions bounds the sessions open at once; 0 means
	// DefaultMaxSessions.
	MaxSessions int
	// MaxSearchResults (search.max_results) bounds web_search's optional
	// result_count argument and is its default; 0 means
	// DefaultMaxSearchResults.
	MaxSearchResults int
	// EarlyConversions, when positive, converts every HTML page as soon
	// as fetch_web_page has it, at most this many conversions at once
	// across all sessions (the converter's concurrency limit):
	// html_to_markdown then takes the result, often ready by the time
	// the model asks, instead of converting while the member waits. A
	// conversion nobody asks for ends with its session. 0 converts only
	// when asked.
	EarlyConversions int
}

// ErrTooManySessions is returned by [Service.Open] when MaxSessions
// sessions are open.
var ErrTooManySessions = errors.New("research: too many open sessions")

// Service provides the research tools: their specs, one session per
// invocation (opened and closed by the invocation), and the handler that
// runs every call in the tool pool. It is safe for concurrent use.
type Service struct {
	d          Deps
	searchSpec messages.ToolSpec
	// converting holds one token per early conversion running (see
	// Deps.EarlyConversions); nil without early conversions.
	converting chan struct{}
	mu         sync.Mutex
	sessions   map[string]*session
}

// New returns a Service over d.
func New(d Deps) *Service {
	if d.ValidateURL == nil {
		d.ValidateURL = func(string) (*url.URL, error) {
			return nil, &messages.ToolError{Code: messages.ToolInvalidURL, Message: "URLs cannot be checked, so none is fetched"}
		}
	}
	if d.MaxSessions <= 0 {
		d.MaxSessions = DefaultMaxSessions
	}
	if d.MaxSearchResults <= 0 {
		d.MaxSearchResults = DefaultMaxSearchResults
	}
	svc := &Service{d: d, sessions: map[string]*session{}, searchSpec: newSearchSpec(d.MaxSearchResults)}
	if d.EarlyConversions > 0 && d.Convert != nil {
		svc.converting = make(chan struct{}, d.EarlyConversions)
	}
	return svc
}

// Tool names.
const (
	SearchTool  = "web_search"
	FetchTool   = "fetch_web_page"
	ConvertTool = "html_to_markdown"
)

// newSearchSpec describes web_search with result_count bounded by
// maxResults. result_count is nullable rather than absent from
// "required": strict function schemas (OpenAI's) require every property
// to be listed, and the loop reads an omitted nullable argument as null.
func newSearchSpec(maxResults int) messages.ToolSpec {
	return messages.ToolSpec{Name: SearchTool,
		Description: fmt.Sprintf("Search the web. Returns numbered results with title, URL and a short snippet: result_count of them (1 to %d; null means %d).", maxResults, maxResults),
		Parameters: json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{"query":{"type":"string","description":"what to search for"},`+
			`"result_count":{"type":["integer","null"],"minimum":1,"maximum":%d,"description":"how many results to return, at most %d; null for %d"}},`+
			`"required":["query","result_count"],"additionalProperties":false}`, maxResults, maxResults, maxResults))}
}

var (
	fetchSpec = messages.ToolSpec{Name: FetchTool, Description: "Download one http(s) web page. The URL must be one that appeared in the room messages, in web_search results or in a page fetched in this conversation, copied exactly; other URLs are refused. HTML pages return an artifact_id to convert with html_to_markdown; plain text is returned directly.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"url":{"type":"string","description":"absolute http or https URL"}},"required":["url"],"additionalProperties":false}`)}
	convertSpec = messages.ToolSpec{Name: ConvertTool, Description: "Convert a downloaded HTML page (by artifact_id from fetch_web_page) to Markdown text.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"artifact_id":{"type":"string"}},"required":["artifact_id"],"additionalProperties":false}`)}
)

// Specs lists the tools in the order offered to the model; web_search
// only when a Searcher is configured.
func (s *Service) Specs() []messages.ToolSpec {
	var out []messages.ToolSpec
	if s.d.Search != nil {
		out = append(out, s.searchSpec)
	}
	return append(out, fetchSpec, convertSpec)
}

// Open starts the session of one invocation and returns its opaque ID.
// Its fetch_web_page fetches only URLs known to the session: the URLs in
// known, which must be the texts given to the model as the conversation
// (the invoking message and the room context), never text the model
// wrote; search results and fetched pages add theirs as the tools run.
// At most 256 URLs are taken from one text and 2,048 from all sources of
// a session; the HTML-unescaped form of a text is read too.
func (s *Service) Open(known ...string) (string, error) {
	id, err := randomID("ses_")
	if err != nil {
		return "", err
	}
	sess := newSession(s.d)
	sess.converting = s.converting
	for _, text := range known {
		sess.allowURLsIn(text)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.sessions) >= s.d.MaxSessions {
		sess.end()
		return "", ErrTooManySessions
	}
	s.sessions[id] = sess
	return id, nil
}

// Close ends session id: its early conversions still running are
// cancelled, its artifacts and known URLs are dropped, and later calls
// naming it fail. Closing an unknown ID does nothing.
func (s *Service) Close(id string) {
	s.mu.Lock()
	sess := s.sessions[id]
	delete(s.sessions, id)
	s.mu.Unlock()
	if sess != nil {
		sess.end()
	}
}

// KnownURLs returns the URLs known to session id (see the known-URL rule
// in knownurls.go) in their normal form, sorted: those of the invoking
// message and the room context, of search results, of fetched pages and
// of the links in the page text the model was shown. An unknown session
// has none. The answer's links are verified against them.
func (s *Service) KnownURLs(id string) []string {
	sess := s.session(id)
	if sess == nil {
		return nil
	}
	sess.mu.Lock()
	defer sess.mu.Unlock()
	return slices.Sorted(maps.Keys(sess.known.keys))
}

// session returns the open session id, or nil.
func (s *Service) session(id string) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessions[id]
}

// Call runs one research tool call for the session it names; it is the
// tool pool's handler for every name of Specs. ctx bounds it. Every
// failure is a bounded result with a stable code.
func (s *Service) Call(ctx context.Context, call *messages.ToolCall) *messages.ToolResult {
	sess := s.session(call.Session)
	if sess == nil {
		return failure(&messages.ToolError{Code: messages.ToolFailed, Message: "this conversation's tools are no longer available"})
	}
	switch {
	case call.Name == SearchTool && s.d.Search != nil:
		return sess.search(ctx, call.Args)
	case call.Name == FetchTool:
		return sess.fetch(ctx, call.Args)
	case call.Name == ConvertTool:
		return sess.convert(ctx, call.Args)
	}
	return failure(&messages.ToolError{Code: messages.ToolUnknownTool, Message: "There is no such tool."})
}

type artifact struct {
	html     bool
	finalURL string
	title    string
	body     []byte
	// early is the page's early conversion (HTML with
	// Deps.EarlyConversions only).
	early *conversion
}

// conversion is one early conversion: md and err are set once done is
// closed.
type conversion struct {
	done chan struct{}
	md   string
	err  error
}

// session is one invocation's artifact store and known URLs.
type session struct {
	d         Deps
	mu        sync.Mutex
	artifacts map[string]*artifact
	stored    int64
	// known holds the URLs fetch_web_page may fetch (see the known-URL
	// rule in knownurls.go); guarded by mu.
	known *knownURLs
	// converting is the service's early-conversion tokens (nil: none);
	// ctx ends with the session, and with it its early conversions.
	converting chan struct{}
	ctx        context.Context
	end        context.CancelFunc
}

func newSession(d Deps) *session {
	ctx, end := context.WithCancel(context.Background())
	return &session{d: d, artifacts: map[string]*artifact{}, known: newKnownURLs(maxKnownURLs, d.ValidateURL), ctx: ctx, end: end}
}

// convertEarly starts converting art, an HTML page just fetched, once a
// conversion token is free; the session's end cancels it.
func (s *session) convertEarly(art *artifact) {
	c := &conversion{done: make(chan struct{})}
	s.mu.Lock()
	art.early = c
	s.mu.Unlock()
	go func() {
		defer close(c.done)
		defer func() {
			// Outside the tool pool nothing else would catch a panic.
			if p := recover(); p != nil {
				c.md, c.err = "", &messages.ToolError{Code: messages.ToolConversionFailed, Message: "The converter failed unexpectedly."}
			}
		}()
		select {
		case s.converting <- struct{}{}:
			defer func() { <-s.converting }()
		case <-s.ctx.Done():
			c.err = &messages.ToolError{Code: messages.ToolConversionFailed, Message: "The conversion was cancelled."}
			return
		}
		c.md, c.err = s.d.Convert.Convert(s.ctx, art.body)
	}()
}

// allowURLsIn makes the http and https URLs found in text known to this
// session, so that fetch_web_page may fetch them (see [Service.Open]).
func (s *session) allowURLsIn(text string) {
	s.allow(extractURLs(text, nil, maxURLsPerText)...)
}

// allow makes urls known, within the session's bound.
func (s *session) allow(urls ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, u := range urls {
		s.known.add(u)
	}
}

// isKnown reports whether rawURL matches a known URL of the session.
func (s *session) isKnown(rawURL string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.known.has(rawURL)
}

// learnLinks makes the links in text, a page the model is shown whose
// final URL is pageURL, known: absolute URLs and Markdown link targets
// resolved against pageURL.
func (s *session) learnLinks(text, pageURL string) {
	base, err := url.Parse(pageURL)
	if err != nil || base.Host == "" {
		base = nil
	}
	s.allow(extractURLs(text, base, maxURLsPerText)...)
}

func failure(err error) *messages.ToolResult {
	var te *messages.ToolError
	if !errors.As(err, &te) {
		te = &messages.ToolError{Code: messages.ToolHTTPError, Message: "the tool failed", Retryable: true}
	}
	return messages.ToolFailure(te.Code, te.Message, te.Retryable)
}

func badArgs(msg string) *messages.ToolResult {
	return failure(&messages.ToolError{Code: messages.ToolInvalidArguments, Message: msg})
}

func (s *session) search(ctx context.Context, args json.RawMessage) *messages.ToolResult {
	var a struct {
		Query       string `json:"query"`
		ResultCount *int   `json:"result_count"`
	}
	if json.Unmarshal(args, &a) != nil || strings.TrimSpace(a.Query) == "" {
		return badArgs("query must be a non-empty string and result_count an integer or null")
	}
	n := resultCount(a.ResultCount, s.d.MaxSearchResults)
	var results []messages.SearchHit
	var err error
	if ls, ok := s.d.Search.(LimitedSearcher); ok {
		results, err = ls.SearchLimit(ctx, a.Query, n)
	} else {
		results, err = s.d.Search.Search(ctx, a.Query)
	}
	if err != nil {
		return failure(err)
	}
	results = results[:min(len(results), n)]
	res := &messages.ToolResult{OK: true, Code: "ok", Content: s.bound(formatHits(results)), SourceTitles: map[string]string{}}
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

// resultCount is the number of results web_search returns: the count
// asked for, clamped to [1, maxResults]; maxResults when none was asked.
func resultCount(asked *int, maxResults int) int {
	if asked == nil {
		return maxResults
	}
	return min(max(*asked, 1), maxResults)
}

func (s *session) fetch(ctx context.Context, args json.RawMessage) *messages.ToolResult {
	var a struct {
		URL string `json:"url"`
	}
	if json.Unmarshal(args, &a) != nil || strings.TrimSpace(a.URL) == "" {
		return badArgs("url must be a non-empty string")
	}
	if _, err := s.d.ValidateURL(a.URL); err != nil {
		return failure(err)
	}
	// The known-URL rule (knownurls.go): a URL the model built itself,
	// say from the room's text, never reaches the network. Nothing here
	// logs the URL.
	if !s.isKnown(a.URL) {
		// An earlier call of the same turn, still running, may make it
		// known: the loop tries once more after it.
		res := failure(errUnknownURL)
		res.AfterEarlier = true
		return res
	}
	page, err := s.d.Fetch.Fetch(ctx, a.URL)
	if err != nil {
		return failure(err)
	}
	s.allow(page.FinalURL) // the redirect target
	mediaType, _, _ := strings.Cut(page.ContentType, ";")
	mediaType = strings.TrimSpace(strings.ToLower(mediaType))
	isHTML := mediaType == "text/html" || mediaType == "application/xhtml+xml"
	art := &artifact{html: isHTML, finalURL: page.FinalURL, title: page.Title, body: page.Body}
	id, err := s.store(art)
	if err != nil {
		return failure(err)
	}
	if isHTML && s.converting != nil {
		s.convertEarly(art) // stored first: a page over the budget is not converted
	}
	res := &messages.ToolResult{OK: true, Code: "ok", SourceURLs: []string{page.FinalURL}, SourceTitles: map[string]string{page.FinalURL: page.Title},
		Fetched: []string{page.FinalURL}}
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

func (s *session) convert(ctx context.Context, args json.RawMessage) *messages.ToolResult {
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
	var md string
	var err error
	if c := s.early(art); c != nil {
		select {
		case <-c.done:
			md, err = c.md, c.err
		case <-ctx.Done():
			return failure(&messages.ToolError{Code: messages.ToolTimeout, Message: "The conversion did not finish in time."})
		}
	} else {
		md, err = s.d.Convert.Convert(ctx, art.body)
	}
	if err != nil {
		return failure(err)
	}
	if _, err := s.store(&artifact{finalURL: art.finalURL, title: art.title, body: []byte(md)}); err != nil {
		return failure(err)
	}
	text := s.bound(cleanText(md))
	s.learnLinks(text, art.finalURL) // links the model now sees
	return &messages.ToolResult{OK: true, Code: "ok", Content: text,
		SourceURLs: []string{art.finalURL}, SourceTitles: map[string]string{art.finalURL: art.title}}
}

// early returns art's early conversion, or nil.
func (s *session) early(art *artifact) *conversion {
	s.mu.Lock()
	defer s.mu.Unlock()
	return art.early
}

// store keeps an artifact under a fresh opaque ID, within the session's
// byte budget.
func (s *session) store(a *artifact) (string, error) {
	id, err := randomID("art_")
	if err != nil {
		return "", err
	}
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
func (s *session) bound(text string) string {
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

// randomID returns prefix followed by 24 random hex digits.
func randomID(prefix string) (string, error) {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("research: random id: %w", err)
	}
	return prefix + hex.EncodeToString(b[:]), nil
}

// formatHits renders search results as compact numbered text for the
// model:
//
//  1. Title
//     https://example.test/page
//     snippet
//
// Empty titles show as "(untitled)"; empty snippets are left out. No
// results yields "No results."
func formatHits(hits []messages.SearchHit) string {
	if len(hits) == 0 {
		return "No results."
	}
	var b strings.Builder
	for i, r := range hits {
		title := r.Title
		if title == "" {
			title = "(untitled)"
		}
		fmt.Fprintf(&b, "%d. %s\n   %s\n", i+1, title, r.URL)
		if r.Snippet != "" {
			fmt.Fprintf(&b, "   %s\n", r.Snippet)
		}
	}
	return strings.TrimRight(b.String(), "\n")
}
