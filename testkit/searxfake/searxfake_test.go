package searxfake

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"testing"
	"time"
)

func get(t *testing.T, ctx context.Context, u string, hdr map[string]string) (*http.Response, []byte, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, b, err
}

func TestResultsShapeAndRecording(t *testing.T) {
	s := Start(t, WithAPIKey("k1"))
	s.Enqueue(Results(Result{URL: "https://a.test/x", Title: "A", Content: "alpha"}))
	resp, body, err := get(t, context.Background(), s.URL()+"?q=hello+world&format=json&lang=en", map[string]string{"Authorization": "Bearer k1"})
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("status %d ct %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var got struct {
		Query   string `json:"query"`
		Results []struct {
			URL, Title, Content, Engine string
		} `json:"results"`
		Answers []any `json:"answers"`
	}
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	if got.Query != "hello world" || len(got.Results) != 1 || got.Results[0].Title != "A" || got.Results[0].Engine != "fake" || got.Answers == nil {
		t.Fatalf("body %s", body)
	}
	reqs := s.Requests()
	if len(reqs) != 1 {
		t.Fatalf("requests %d", len(reqs))
	}
	r := reqs[0]
	if r.Query != "hello world" || r.Format != "json" || r.Params.Get("lang") != "en" || !r.AuthPresent || !r.AuthValid || r.Path != "/search" {
		t.Fatalf("recorded %+v", r)
	}
	// Default response once the script is empty.
	_, body, err = get(t, context.Background(), s.URL()+"?q=z", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(body, &got); err != nil || len(got.Results) != 0 {
		t.Fatalf("default body %s (%v)", body, err)
	}
	if s.Requests()[1].AuthPresent {
		t.Fatal("auth recorded as present")
	}
}

func TestStatusRawRedirect(t *testing.T) {
	s := Start(t)
	s.Enqueue(Status(403), Raw([]byte("{nope")), Redirect("http://elsewhere.test/"))
	resp, _, err := get(t, context.Background(), s.URL(), nil)
	if err != nil || resp.StatusCode != 403 {
		t.Fatalf("%v %v", resp, err)
	}
	_, body, err := get(t, context.Background(), s.URL(), nil)
	if err != nil || string(body) != "{nope" {
		t.Fatalf("%q %v", body, err)
	}
	resp, _, err = get(t, context.Background(), s.URL(), nil)
	if err != nil || resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "http://elsewhere.test/" {
		t.Fatalf("%v %v", resp, err)
	}
}

func TestDelayHonoursCancellation(t *testing.T) {
	s := Start(t)
	s.Enqueue(Results().After(time.Minute))
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, _, err := get(t, ctx, s.URL()+"?"+url.Values{"q": {"x"}}.Encode(), nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v", err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("took %v", el)
	}
	s.Close() // must not hang on the abandoned handler
}
