package sameorigin

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
)

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func TestCheckRedirect(t *testing.T) {
	for _, c := range []struct {
		from, to string
		reason   string // "" allows
	}{
		{"http://127.0.0.1:8008/_matrix/x", "http://127.0.0.1:8008/_matrix/y", ""},
		{"https://matrix.example/a", "https://MATRIX.example:443/b", ""},
		{"https://matrix.example./a", "https://matrix.example/b", ""},
		{"http://[::1]:80/a", "http://[::1]/b", ""},
		{"http://127.0.0.1:8008/a", "http://127.0.0.1:8009/a", "port"},
		{"https://matrix.example/a", "http://matrix.example/a", "scheme"},
		{"https://matrix.example/a", "https://matrix.example:8448/a", "port"},
		{"https://matrix.example/a", "https://sub.matrix.example/a", "host"},
		{"https://matrix.example/a", "https://evil.example/a", "host"},
		{"http://127.0.0.1/a", "http://localhost/a", "host"},
	} {
		req := &http.Request{URL: mustURL(t, c.to)}
		via := []*http.Request{{URL: mustURL(t, c.from)}}
		err := CheckRedirect(req, via)
		var e *Error
		switch {
		case c.reason == "" && err != nil:
			t.Errorf("%s -> %s: %v, want allowed", c.from, c.to, err)
		case c.reason != "" && !errors.As(err, &e):
			t.Errorf("%s -> %s: %v, want refused for %s", c.from, c.to, err, c.reason)
		case c.reason != "" && e.Reason != c.reason:
			t.Errorf("%s -> %s: reason %q, want %q", c.from, c.to, e.Reason, c.reason)
		}
	}
}

// TestCheckRedirectComparesWithTheFirstRequest: a chain cannot walk away
// from the origin one allowed hop at a time, and is bounded.
func TestCheckRedirectComparesWithTheFirstRequest(t *testing.T) {
	first := &http.Request{URL: mustURL(t, "http://127.0.0.1:1/a")}
	same := &http.Request{URL: mustURL(t, "http://127.0.0.1:1/b")}
	other := &http.Request{URL: mustURL(t, "http://127.0.0.1:2/c")}
	if err := CheckRedirect(other, []*http.Request{first, same}); err == nil {
		t.Error("a redirect to another port after a same-origin hop was allowed")
	}
	via := []*http.Request{first}
	for range MaxRedirects {
		via = append(via, same)
	}
	if err := CheckRedirect(same, via); err == nil || !strings.Contains(err.Error(), "more than 10 redirects") {
		t.Errorf("redirect %d: %v, want too many", len(via), err)
	}
}

// TestErrorNamesOriginsOnly: a Location with a token in its query or
// user information does not put it into the error.
func TestErrorNamesOriginsOnly(t *testing.T) {
	req := &http.Request{URL: mustURL(t, "http://user:pw-secret@127.0.0.1:2/p?access_token=tok-secret")}
	err := CheckRedirect(req, []*http.Request{{URL: mustURL(t, "http://127.0.0.1:1/a?k=key-secret")}})
	if err == nil {
		t.Fatal("allowed")
	}
	if msg := err.Error(); strings.Contains(msg, "secret") || !strings.Contains(msg, "http://127.0.0.1:2") {
		t.Errorf("error %q", msg)
	}
}

// TestGuardKeepsTheTokenHome runs a real client against two loopback
// servers: without the guard Go hands the Authorization header to the
// other port (the reproduction of #39 item 3); with it the other server
// sees no request, and a same-origin redirect still works.
func TestGuardKeepsTheTokenHome(t *testing.T) {
	var leaked, reached atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		if r.Header.Get("Authorization") != "" {
			leaked.Add(1)
		}
	}))
	defer other.Close()
	home := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/away":
			http.Redirect(w, r, other.URL+"/x", http.StatusTemporaryRedirect)
		case "/here":
			http.Redirect(w, r, "/ok", http.StatusTemporaryRedirect)
		case "/ok":
			if r.Header.Get("Authorization") == "Bearer syt_secret" {
				w.WriteHeader(http.StatusNoContent)
			}
		}
	}))
	defer home.Close()

	get := func(c *http.Client, path string) (*http.Response, error) {
		req, err := http.NewRequest(http.MethodGet, home.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer syt_secret")
		resp, err := c.Do(req)
		if resp != nil {
			resp.Body.Close()
		}
		return resp, err
	}

	if _, err := get(&http.Client{}, "/away"); err != nil {
		t.Fatal(err)
	}
	if leaked.Load() != 1 {
		t.Fatalf("an unguarded client leaked %d times; the reproduction no longer holds", leaked.Load())
	}
	leaked.Store(0)
	reached.Store(0)

	g := Guard(&http.Client{})
	_, err := get(g, "/away")
	var e *Error
	if !errors.As(err, &e) || e.Reason != "port" {
		t.Fatalf("guarded cross-port redirect: %v", err)
	}
	if strings.Contains(err.Error(), "syt_secret") {
		t.Errorf("error names the token: %v", err)
	}
	if reached.Load() != 0 || leaked.Load() != 0 {
		t.Errorf("other server reached %d times, %d with credentials", reached.Load(), leaked.Load())
	}
	resp, err := get(g, "/here")
	if err != nil || resp.StatusCode != http.StatusNoContent {
		t.Errorf("same-origin redirect: %v %v", resp, err)
	}
}

// TestGuardRunsTheClientsOwnCheck: a caller's stricter policy still
// applies after the origin check.
func TestGuardRunsTheClientsOwnCheck(t *testing.T) {
	refused := errors.New("no redirects")
	g := Guard(&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return refused }})
	req := &http.Request{URL: mustURL(t, "http://127.0.0.1:1/b")}
	if err := g.CheckRedirect(req, []*http.Request{{URL: mustURL(t, "http://127.0.0.1:1/a")}}); !errors.Is(err, refused) {
		t.Errorf("got %v", err)
	}
	if Guard(nil).CheckRedirect == nil {
		t.Error("Guard(nil) has no check")
	}
}
