package search

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/lisabot/lisa/messages"
	"github.com/lisabot/lisa/testkit/searxfake"
)

func wantToolErr(t *testing.T, err error, code messages.ToolCode, retryable bool) *messages.ToolError {
	t.Helper()
	var te *messages.ToolError
	if !errors.As(err, &te) {
		t.Fatalf("error %v (%T) is not a *messages.ToolError", err, err)
	}
	if te.Code != code || te.Retryable != retryable {
		t.Fatalf("got %s retryable=%v (%q), want %s retryable=%v", te.Code, te.Retryable, te.Message, code, retryable)
	}
	return te
}

func TestSearchSuccess(t *testing.T) {
	s := searxfake.Start(t)
	s.Enqueue(searxfake.Results(
		searxfake.Result{URL: "https://one.test/a", Title: "One", Content: "first hit"},
		searxfake.Result{URL: "http://two.test/b?x=1", Title: "Two", Content: "second hit"},
	))
	c := New(Config{Endpoint: s.URL(), MaxResults: 5, Timeout: 5 * time.Second})
	got, err := c.Search(context.Background(), "  matrix   servers ")
	if err != nil {
		t.Fatal(err)
	}
	want := []Result{
		{Title: "One", URL: "https://one.test/a", Snippet: "first hit"},
		{Title: "Two", URL: "http://two.test/b?x=1", Snippet: "second hit"},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	reqs := s.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	r := reqs[0]
	if r.Method != http.MethodGet || r.Path != "/search" || r.Query != "matrix servers" || r.Format != "json" {
		t.Fatalf("request %+v", r)
	}
	if r.AuthPresent || r.HasCookie || r.UserAgent != DefaultUserAgent {
		t.Fatalf("request %+v", r)
	}
	if len(got) != 2 || got[0].Title != "One" || got[0].URL != "https://one.test/a" || got[0].Snippet != "first hit" || got[1].URL != "http://two.test/b?x=1" {
		t.Fatalf("results %+v", got)
	}
}

func TestSearchKeepsEndpointParamsAndSendsKey(t *testing.T) {
	s := searxfake.Start(t, searxfake.WithAPIKey("sekrit"))
	c := New(Config{Endpoint: s.URL() + "?language=en&categories=general&format=html&q=old#frag", APIKey: "sekrit", UserAgent: "ua-test"})
	if _, err := c.Search(context.Background(), "q&a = fun?"); err != nil {
		t.Fatal(err)
	}
	r := s.Requests()[0]
	if !r.AuthPresent || !r.AuthValid {
		t.Fatalf("auth not sent: %+v", r)
	}
	if r.Params.Get("language") != "en" || r.Params.Get("categories") != "general" {
		t.Fatalf("endpoint params lost: %v", r.Params)
	}
	if len(r.Params["q"]) != 1 || r.Query != "q&a = fun?" || len(r.Params["format"]) != 1 || r.Format != "json" {
		t.Fatalf("q/format wrong: %v", r.Params)
	}
	if r.UserAgent != "ua-test" {
		t.Fatalf("user agent %q", r.UserAgent)
	}
}

func TestSearchMalformedJSON(t *testing.T) {
	for _, body := range []string{"{not json", "<html>hi</html>", `{"results": "nope"}`, ""} {
		s := searxfake.Start(t)
		s.Enqueue(searxfake.Raw([]byte(body)))
		_, err := New(Config{Endpoint: s.URL()}).Search(context.Background(), "x")
		te := wantToolErr(t, err, messages.ToolSearchUnavailable, false)
		if body != "" && strings.Contains(te.Message, body) {
			t.Fatalf("message echoes body: %q", te.Message)
		}
	}
}

func TestSearchTimeout(t *testing.T) {
	s := searxfake.Start(t)
	s.Enqueue(searxfake.Results().After(time.Minute))
	c := New(Config{Endpoint: s.URL(), Timeout: 200 * time.Millisecond})
	start := time.Now()
	_, err := c.Search(context.Background(), "slow")
	if el := time.Since(start); el > 3*time.Second {
		t.Fatalf("took %v", el)
	}
	wantToolErr(t, err, messages.ToolTimeout, true)
}

func TestSearchCallerCancel(t *testing.T) {
	s := searxfake.Start(t)
	s.Enqueue(searxfake.Results().After(time.Minute))
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	_, err := New(Config{Endpoint: s.URL()}).Search(ctx, "slow")
	wantToolErr(t, err, messages.ToolSearchUnavailable, false)
}

func TestSearchOversizedBody(t *testing.T) {
	s := searxfake.Start(t)
	big := `{"results":[{"url":"https://a.test/","title":"` + strings.Repeat("x", 4096) + `"}]}`
	s.Enqueue(searxfake.Raw([]byte(big)), searxfake.Raw([]byte(big)))
	_, err := New(Config{Endpoint: s.URL(), MaxResponseBytes: 1024}).Search(context.Background(), "x")
	wantToolErr(t, err, messages.ToolSearchUnavailable, false)
	// The same body fits a larger limit.
	if _, err := New(Config{Endpoint: s.URL(), MaxResponseBytes: 8192}).Search(context.Background(), "x"); err != nil {
		t.Fatal(err)
	}
}

func TestSearchHTTPStatus(t *testing.T) {
	cases := []struct {
		status    int
		retryable bool
	}{
		{http.StatusForbidden, false},
		{http.StatusNotFound, false},
		{http.StatusTooManyRequests, true},
		{http.StatusInternalServerError, true},
		{http.StatusBadGateway, true},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprint(tc.status), func(t *testing.T) {
			s := searxfake.Start(t)
			s.Enqueue(searxfake.Status(tc.status))
			_, err := New(Config{Endpoint: s.URL()}).Search(context.Background(), "x")
			wantToolErr(t, err, messages.ToolSearchUnavailable, tc.retryable)
		})
	}
}

func TestSearchRedirectRefused(t *testing.T) {
	target := searxfake.Start(t)
	s := searxfake.Start(t, searxfake.WithAPIKey("k"))
	s.Enqueue(searxfake.Redirect(target.URL() + "?q=x&format=json"))
	_, err := New(Config{Endpoint: s.URL(), APIKey: "k"}).Search(context.Background(), "x")
	wantToolErr(t, err, messages.ToolSearchUnavailable, false)
	if n := len(target.Requests()); n != 0 {
		t.Fatalf("redirect followed: target saw %d requests", n)
	}
	if n := len(s.Requests()); n != 1 {
		t.Fatalf("endpoint saw %d requests", n)
	}
}

func TestSearchNormalizesAndDedupes(t *testing.T) {
	s := searxfake.Start(t)
	s.Enqueue(searxfake.Results(
		searxfake.Result{URL: "HTTPS://Example.TEST:443/page#section", Title: "A"},
		searxfake.Result{URL: "https://example.test/page#other", Title: "dup of A"},
		searxfake.Result{URL: "https://example.test/page", Title: "dup of A again"},
		searxfake.Result{URL: "ftp://files.test/x", Title: "ftp"},
		searxfake.Result{URL: "javascript:alert(1)", Title: "js"},
		searxfake.Result{URL: "https://user:pw@evil.test/", Title: "userinfo"},
		searxfake.Result{URL: "/relative/path", Title: "relative"},
		searxfake.Result{URL: "", Title: "empty"},
		searxfake.Result{URL: "https://bad host.test/", Title: "space"},
		searxfake.Result{URL: "http://b.test", Title: "B"},
		searxfake.Result{URL: "http://[::1]:8080/v6", Title: "C"},
		searxfake.Result{URL: "https://d.test/", Title: "D"},
		searxfake.Result{URL: "https://e.test/", Title: "E beyond max"},
	))
	got, err := New(Config{Endpoint: s.URL(), MaxResults: 4}).Search(context.Background(), "x")
	if err != nil {
		t.Fatal(err)
	}
	var urls []string
	for _, r := range got {
		urls = append(urls, r.Title+" "+r.URL)
	}
	want := []string{"A https://example.test/page", "B http://b.test/", "C http://[::1]:8080/v6", "D https://d.test/"}
	if fmt.Sprint(urls) != fmt.Sprint(want) {
		t.Fatalf("got %q\nwant %q", urls, want)
	}
}

// TestSearchLimit: SearchLimit returns at most n results, n clamped to
// [1, MaxResults], counting accepted results only.
func TestSearchLimit(t *testing.T) {
	s := searxfake.Start(t)
	hits := searxfake.Results(
		searxfake.Result{URL: "https://a.test/", Title: "A"},
		searxfake.Result{URL: "javascript:alert(1)", Title: "js"},
		searxfake.Result{URL: "https://b.test/", Title: "B"},
		searxfake.Result{URL: "https://c.test/", Title: "C"},
		searxfake.Result{URL: "https://d.test/", Title: "D"},
	)
	c := New(Config{Endpoint: s.URL(), MaxResults: 3})
	for _, tc := range []struct{ n, want int }{{2, 2}, {1, 1}, {0, 1}, {-1, 1}, {3, 3}, {100, 3}} {
		s.Enqueue(hits)
		got, err := c.SearchLimit(context.Background(), "x", tc.n)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != tc.want || got[0].Title != "A" || (tc.want > 1 && got[1].Title != "B") {
			t.Errorf("SearchLimit(%d) = %v, want %d results", tc.n, got, tc.want)
		}
	}
}

func TestSearchSnippetBounding(t *testing.T) {
	s := searxfake.Start(t)
	long := strings.Repeat("é", 50) + " " + strings.Repeat("日本", 200)
	s.Enqueue(searxfake.Results(
		searxfake.Result{URL: "https://a.test/", Title: "T\x00i\x1bt\u0085le\n\nhere", Content: "line one\r\n\tline\x07 two   \u2028 three"},
		searxfake.Result{URL: "https://b.test/", Title: strings.Repeat("t", 1000), Content: long},
		searxfake.Result{URL: "https://c.test/", Title: "bad utf8", Content: "ok\xff\xfe text"},
	))
	got, err := New(Config{Endpoint: s.URL(), MaxSnippetRunes: 60}).Search(context.Background(), "x")
	if err != nil {
		t.Fatal(err)
	}
	if got[0].Title != "T i t le here" || got[0].Snippet != "line one line two three" {
		t.Fatalf("cleaning: %q / %q", got[0].Title, got[0].Snippet)
	}
	sn := got[1].Snippet
	if !utf8.ValidString(sn) || utf8.RuneCountInString(sn) > 60 || !strings.HasSuffix(sn, "…") || !strings.HasPrefix(sn, "ééé") {
		t.Fatalf("snippet %q (%d runes)", sn, utf8.RuneCountInString(sn))
	}
	if n := utf8.RuneCountInString(got[1].Title); n > maxTitleRunes {
		t.Fatalf("title has %d runes", n)
	}
	// encoding/json already replaces invalid bytes with U+FFFD.
	if !utf8.ValidString(got[2].Snippet) || !strings.HasPrefix(got[2].Snippet, "ok") {
		t.Fatalf("invalid UTF-8 snippet %q", got[2].Snippet)
	}
}

func TestSearchDefaultSnippetLimit(t *testing.T) {
	s := searxfake.Start(t)
	s.Enqueue(searxfake.Results(searxfake.Result{URL: "https://a.test/", Title: "a", Content: strings.Repeat("word ", 500)}))
	got, err := New(Config{Endpoint: s.URL()}).Search(context.Background(), "x")
	if err != nil {
		t.Fatal(err)
	}
	if n := utf8.RuneCountInString(got[0].Snippet); n > DefaultMaxSnippetRunes || n < DefaultMaxSnippetRunes-5 {
		t.Fatalf("snippet has %d runes", n)
	}
}

func TestSearchInvalidQuery(t *testing.T) {
	s := searxfake.Start(t)
	c := New(Config{Endpoint: s.URL()})
	for _, q := range []string{"", "   \n\t ", "\x00\x01", strings.Repeat("a", MaxQueryRunes+1), strings.Repeat("ü", MaxQueryRunes+1), "bad \xff utf8"} {
		_, err := c.Search(context.Background(), q)
		wantToolErr(t, err, messages.ToolInvalidArguments, false)
	}
	if n := len(s.Requests()); n != 0 {
		t.Fatalf("invalid queries reached the server: %d", n)
	}
	// Exactly the limit is fine, counted in runes.
	if _, err := c.Search(context.Background(), strings.Repeat("ü", MaxQueryRunes)); err != nil {
		t.Fatal(err)
	}
}

func TestSearchBadEndpoint(t *testing.T) {
	for _, ep := range []string{"", "ftp://x.test/", "not a url", "/search"} {
		_, err := New(Config{Endpoint: ep}).Search(context.Background(), "x")
		wantToolErr(t, err, messages.ToolSearchUnavailable, false)
	}
}

func TestSearchUnreachable(t *testing.T) {
	s := searxfake.Start(t)
	ep := s.URL()
	s.Close()
	_, err := New(Config{Endpoint: ep, Timeout: 2 * time.Second}).Search(context.Background(), "x")
	wantToolErr(t, err, messages.ToolSearchUnavailable, true)
}

func TestSearchNoProxy(t *testing.T) {
	t.Setenv("HTTP_PROXY", "http://127.0.0.1:1")
	t.Setenv("http_proxy", "http://127.0.0.1:1")
	s := searxfake.Start(t)
	if _, err := New(Config{Endpoint: s.URL()}).Search(context.Background(), "x"); err != nil {
		t.Fatalf("proxy environment was used: %v", err)
	}
}
