package research

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/lisabot/lisa/adapters/web"
	"github.com/lisabot/lisa/messages"
)

type fakeSearch struct{}

func (fakeSearch) Search(_ context.Context, q string) ([]messages.SearchHit, error) {
	return []messages.SearchHit{{Title: "Go", URL: "https://go.dev/", Snippet: "about " + q}}, nil
}

type fakeFetch struct{ calls []string }

func (f *fakeFetch) Fetch(_ context.Context, u string) (messages.WebPage, error) {
	f.calls = append(f.calls, u)
	if strings.Contains(u, "text") {
		return messages.WebPage{FinalURL: u, ContentType: "text/plain", Body: []byte("plain\r\nwords\x00")}, nil
	}
	return messages.WebPage{FinalURL: u + "?final", ContentType: "text/html", Title: "A Page", Body: []byte("<h1>Hi</h1>")}, nil
}

type fakeConvert struct{}

func (fakeConvert) Convert(_ context.Context, html []byte) (string, error) {
	return "# converted " + string(html), nil
}

// testSession is one open session of a service, called the way the tool
// pool calls its handler.
type testSession struct {
	svc *Service
	id  string
}

// newService returns a service over d with the fetcher's real URL rule
// unless d names one.
func newService(d Deps) *Service {
	if d.ValidateURL == nil {
		d.ValidateURL = web.ValidateURL
	}
	return New(d)
}

// openSession opens a session of svc knowing the URLs in known.
func openSession(t *testing.T, svc *Service, known ...string) *testSession {
	t.Helper()
	id, err := svc.Open(known...)
	if err != nil {
		t.Fatal(err)
	}
	return &testSession{svc: svc, id: id}
}

// newTestSession opens a session of a new service over d.
func newTestSession(t *testing.T, d Deps, known ...string) *testSession {
	t.Helper()
	return openSession(t, newService(d), known...)
}

// state returns the session's state.
func (s *testSession) state() *session { return s.svc.session(s.id) }

// another opens a second session (another invocation) of the same service.
func (s *testSession) another(t *testing.T) *testSession {
	t.Helper()
	return openSession(t, s.svc)
}

func call(t *testing.T, s *testSession, name string, args any) *messages.ToolResult {
	t.Helper()
	raw, _ := json.Marshal(args)
	r := s.svc.Call(context.Background(), &messages.ToolCall{Name: name, Args: raw, Session: s.id})
	if r == nil {
		t.Fatalf("%s returned no result", name)
	}
	return r
}

func TestResearchTools(t *testing.T) {
	f := &fakeFetch{}
	deps := Deps{Search: fakeSearch{}, Fetch: f, Convert: fakeConvert{}, MaxToolOutputCharacters: 1000, MaxTotalArtifactBytes: 50}
	tools := newTestSession(t, deps, "@lisa compare https://example.org/page with https://example.org/text and https://example.org/more")

	r := call(t, tools, "web_search", map[string]string{"query": "golang"})
	if !r.OK || r.SourceURLs[0] != "https://go.dev/" || r.SourceTitles["https://go.dev/"] != "Go" || !strings.Contains(r.Content, "about golang") {
		t.Fatalf("search = %+v", r)
	}
	r = call(t, tools, "fetch_web_page", map[string]string{"url": "https://example.org/page"})
	var meta struct {
		ArtifactID string `json:"artifact_id"`
		Title      string `json:"title"`
	}
	if !r.OK || json.Unmarshal([]byte(r.Content), &meta) != nil || !strings.HasPrefix(meta.ArtifactID, "art_") || meta.Title != "A Page" ||
		r.SourceURLs[0] != "https://example.org/page?final" || len(r.Fetched) != 1 || r.Fetched[0] != r.SourceURLs[0] {
		t.Fatalf("fetch = %+v", r)
	}
	r = call(t, tools, "html_to_markdown", map[string]string{"artifact_id": meta.ArtifactID})
	if !r.OK || r.Content != "# converted <h1>Hi</h1>" || r.SourceTitles["https://example.org/page?final"] != "A Page" {
		t.Fatalf("convert = %+v", r)
	}
	r = call(t, tools, "fetch_web_page", map[string]string{"url": "https://example.org/text"})
	if !r.OK || !strings.Contains(r.Content, `"text":"plain\nwords"`) || !strings.Contains(r.Content, `"byte_count":13`) {
		t.Fatalf("plain text = %+v", r)
	}

	// Another invocation cannot read this one's artifacts.
	other := tools.another(t)
	if r := call(t, other, "html_to_markdown", map[string]string{"artifact_id": meta.ArtifactID}); r.OK || r.Code != string(messages.ToolArtifactNotFound) {
		t.Fatalf("foreign artifact = %+v", r)
	}
	// Non-http(s) URLs never reach the fetcher.
	before := len(f.calls)
	for _, u := range []string{"file:///etc/passwd", "ftp://example.org/x", "gopher://x"} {
		if r := call(t, tools, "fetch_web_page", map[string]string{"url": u}); r.OK || r.Code != string(messages.ToolInvalidURL) {
			t.Fatalf("%s = %+v", u, r)
		}
	}
	if len(f.calls) != before {
		t.Fatal("an invalid URL reached the fetcher")
	}
	// The artifact budget (50 bytes) is spent by now.
	for range 3 {
		r = call(t, tools, "fetch_web_page", map[string]string{"url": "https://example.org/more"})
	}
	if r.OK || r.Code != string(messages.ToolInvocationLimit) {
		t.Fatalf("over budget = %+v", r)
	}
	if r := call(t, tools, "web_search", map[string]string{"q": "wrong field"}); r.OK || r.Code != string(messages.ToolInvalidArguments) {
		t.Fatalf("bad args = %+v", r)
	}
}

// TestSessions: web_search is offered only with a search endpoint; the
// open sessions are bounded; a closed or unknown session, and an unknown
// tool, are tool errors.
func TestSessions(t *testing.T) {
	if got := newService(Deps{}).Specs(); len(got) != 2 || got[0].Name != FetchTool || got[1].Name != ConvertTool {
		t.Fatalf("specs without a search endpoint = %+v", got)
	}
	if got := newService(Deps{Search: fakeSearch{}}).Specs(); len(got) != 3 || got[0].Name != SearchTool {
		t.Fatalf("specs = %+v", got)
	}
	svc := newService(Deps{Search: fakeSearch{}, MaxSessions: 2})
	a, b := openSession(t, svc), openSession(t, svc)
	if _, err := svc.Open(); !errors.Is(err, ErrTooManySessions) {
		t.Fatalf("third session: %v", err)
	}
	if r := call(t, a, SearchTool, map[string]string{"query": "q"}); !r.OK {
		t.Fatalf("search = %+v", r)
	}
	svc.Close(a.id)
	if r := call(t, a, SearchTool, map[string]string{"query": "q"}); r.OK || r.Code != string(messages.ToolFailed) {
		t.Fatalf("closed session = %+v", r)
	}
	c := openSession(t, svc) // Close freed a place
	if r := call(t, c, "launch_rockets", map[string]string{}); r.OK || r.Code != string(messages.ToolUnknownTool) {
		t.Fatalf("unknown tool = %+v", r)
	}
	if r := call(t, &testSession{svc: svc, id: "ses_forged"}, SearchTool, map[string]string{"query": "q"}); r.OK {
		t.Fatalf("unknown session = %+v", r)
	}
	if r := call(t, b, SearchTool, map[string]string{"query": "q"}); !r.OK {
		t.Fatalf("other session after a close = %+v", r)
	}
	// Without a search endpoint web_search is not a tool at all.
	if r := call(t, newTestSession(t, Deps{}), SearchTool, map[string]string{"query": "q"}); r.OK || r.Code != string(messages.ToolUnknownTool) {
		t.Fatalf("search without endpoint = %+v", r)
	}
}

// TestNoURLRuleRefusesAll: a service wired without the fetcher's URL
// rule fetches nothing.
func TestNoURLRuleRefusesAll(t *testing.T) {
	f := &fakeFetch{}
	svc := New(Deps{Fetch: f})
	s := openSession(t, svc, "see https://example.org/page")
	if r := call(t, s, FetchTool, map[string]string{"url": "https://example.org/page"}); r.OK || r.Code != string(messages.ToolInvalidURL) {
		t.Fatalf("fetch = %+v", r)
	}
	if len(f.calls) != 0 {
		t.Fatal("a URL reached the fetcher")
	}
}

// TestFormatHits keeps the model's view of search results.
func TestFormatHits(t *testing.T) {
	got := formatHits([]messages.SearchHit{{Title: "One", URL: "https://one.test/a", Snippet: "first hit"}, {URL: "http://two.test/b"}})
	want := "1. One\n   https://one.test/a\n   first hit\n2. (untitled)\n   http://two.test/b"
	if got != want || formatHits(nil) != "No results." {
		t.Fatalf("formatHits = %q, want %q", got, want)
	}
}

func TestBoundTinyLimits(t *testing.T) {
	for _, limit := range []int{1, 5, 13, 14, 100} {
		s := newSession(Deps{MaxToolOutputCharacters: limit})
		if got := []rune(s.bound(strings.Repeat("é", 1000))); len(got) > limit {
			t.Errorf("limit %d: %d runes", limit, len(got))
		}
	}
}

// manySearch returns ten hits and records the count it was asked for
// through SearchLimit (0: Search was called).
type manySearch struct{ asked *int }

func (m manySearch) hits(n int) []messages.SearchHit {
	out := make([]messages.SearchHit, n)
	for i := range out {
		out[i] = messages.SearchHit{Title: "hit", URL: "https://example.org/" + strings.Repeat("x", i+1)}
	}
	return out
}

func (m manySearch) Search(context.Context, string) ([]messages.SearchHit, error) {
	*m.asked = 0
	return m.hits(10), nil
}

func (m manySearch) SearchLimit(_ context.Context, _ string, n int) ([]messages.SearchHit, error) {
	*m.asked = n
	return m.hits(n), nil
}

// plainSearch has no SearchLimit: web_search cuts its results.
type plainSearch struct{ m manySearch }

func (p plainSearch) Search(ctx context.Context, q string) ([]messages.SearchHit, error) {
	return p.m.Search(ctx, q)
}

// TestSearchResultCount: web_search's optional result_count is in the
// tool spec, bounded by search.max_results (MaxSearchResults): a larger
// count is clamped to it, a count below 1 to 1, and no count (omitted or
// null) means the maximum. A searcher without SearchLimit has its
// results cut.
func TestSearchResultCount(t *testing.T) {
	var asked int
	svc := newService(Deps{Search: manySearch{asked: &asked}, MaxSearchResults: 4})
	spec := svc.Specs()[0]
	var schema struct {
		Properties map[string]struct {
			Type    json.RawMessage `json:"type"`
			Maximum int             `json:"maximum"`
			Minimum int             `json:"minimum"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	if err := json.Unmarshal(spec.Parameters, &schema); err != nil {
		t.Fatal(err)
	}
	rc, ok := schema.Properties["result_count"]
	if !ok || rc.Maximum != 4 || rc.Minimum != 1 || string(rc.Type) != `["integer","null"]` ||
		strings.Join(schema.Required, ",") != "query,result_count" || !strings.Contains(spec.Description, "1 to 4") {
		t.Fatalf("web_search spec = %s %s", spec.Description, spec.Parameters)
	}
	s := openSession(t, svc)
	for _, c := range []struct {
		args any
		want int
	}{
		{map[string]any{"query": "q", "result_count": 2}, 2},
		{map[string]any{"query": "q", "result_count": 50}, 4},
		{map[string]any{"query": "q", "result_count": 0}, 1},
		{map[string]any{"query": "q", "result_count": -3}, 1},
		{map[string]any{"query": "q", "result_count": nil}, 4},
		{map[string]any{"query": "q"}, 4},
	} {
		r := call(t, s, SearchTool, c.args)
		if !r.OK || asked != c.want || len(r.SourceURLs) != c.want {
			t.Errorf("%v: asked %d, %d sources, want %d: %+v", c.args, asked, len(r.SourceURLs), c.want, r)
		}
	}
	if r := call(t, s, SearchTool, map[string]any{"query": "q", "result_count": "three"}); r.OK || r.Code != string(messages.ToolInvalidArguments) {
		t.Errorf("string count = %+v", r)
	}

	cut := openSession(t, newService(Deps{Search: plainSearch{m: manySearch{asked: &asked}}, MaxSearchResults: 3}))
	if r := call(t, cut, SearchTool, map[string]any{"query": "q", "result_count": 9}); !r.OK || len(r.SourceURLs) != 3 || asked != 0 {
		t.Errorf("plain searcher: %d sources (asked %d), want 3 from Search", len(r.SourceURLs), asked)
	}
	if got := newService(Deps{Search: fakeSearch{}}).Specs()[0]; !strings.Contains(string(got.Parameters), fmt.Sprintf(`"maximum":%d`, DefaultMaxSearchResults)) {
		t.Errorf("default bound missing: %s", got.Parameters)
	}
}
