package research

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/lisabot/lisa/actors/orchestrate"
	"github.com/lisabot/lisa/adapters/search"
	"github.com/lisabot/lisa/adapters/web"
	"github.com/lisabot/lisa/messages"
)

type direct struct{ err error }

func (d direct) Run(ctx context.Context, work func(context.Context) any) (any, error) {
	if d.err != nil {
		return nil, d.err
	}
	return work(ctx), nil
}

type fakeSearch struct{}

func (fakeSearch) Search(_ context.Context, q string) ([]search.Result, error) {
	return []search.Result{{Title: "Go", URL: "https://go.dev/", Snippet: "about " + q}}, nil
}

type fakeFetch struct{ calls []string }

func (f *fakeFetch) Fetch(_ context.Context, u string) (web.Page, error) {
	f.calls = append(f.calls, u)
	if strings.Contains(u, "text") {
		return web.Page{FinalURL: u, ContentType: "text/plain", Body: []byte("plain\r\nwords\x00")}, nil
	}
	return web.Page{FinalURL: u + "?final", ContentType: "text/html", Title: "A Page", Body: []byte("<h1>Hi</h1>")}, nil
}

type fakeConvert struct{}

func (fakeConvert) Convert(_ context.Context, html []byte) (string, error) {
	return "# converted " + string(html), nil
}

func call(t *testing.T, tools []orchestrate.Tool, name string, args any) orchestrate.ToolResult {
	t.Helper()
	raw, _ := json.Marshal(args)
	for _, tl := range tools {
		if tl.Spec().Name == name {
			return tl.Call(context.Background(), raw)
		}
	}
	t.Fatalf("no tool %s", name)
	return orchestrate.ToolResult{}
}

func TestResearchTools(t *testing.T) {
	f := &fakeFetch{}
	deps := Deps{Search: fakeSearch{}, Fetch: f, Convert: fakeConvert{}, Runner: direct{}, MaxToolOutputCharacters: 1000, MaxTotalArtifactBytes: 50}
	s := NewSession(deps)
	s.AllowURLsIn("@lisa compare https://example.org/page with https://example.org/text and https://example.org/more")
	tools := s.Tools()

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
		r.SourceURLs[0] != "https://example.org/page?final" {
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
	other := NewSession(deps).Tools()
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

func TestPoolRefusalBecomesToolResult(t *testing.T) {
	tools := NewSession(Deps{Search: fakeSearch{}, Runner: direct{err: context.DeadlineExceeded}}).Tools()
	if r := call(t, tools, "web_search", map[string]string{"query": "x"}); r.OK || r.Code != string(messages.ToolTimeout) {
		t.Fatalf("result = %+v", r)
	}
	if len(NewSession(Deps{}).Tools()) != 2 {
		t.Fatal("web_search offered without a search endpoint")
	}
}

func TestBoundTinyLimits(t *testing.T) {
	for _, limit := range []int{1, 5, 13, 14, 100} {
		s := NewSession(Deps{MaxToolOutputCharacters: limit})
		if got := []rune(s.bound(strings.Repeat("é", 1000))); len(got) > limit {
			t.Errorf("limit %d: %d runes", limit, len(got))
		}
	}
}
