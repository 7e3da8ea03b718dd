package webpages

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestServesPagesAndRecords(t *testing.T) {
	s, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	pages := s.Pages()
	if len(pages) < 2 {
		t.Fatalf("pages %+v", pages)
	}
	for _, p := range pages {
		resp, err := http.Get(p.URL)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") ||
			!strings.Contains(string(body), "<title>"+p.Title+"</title>") {
			t.Fatalf("%s: %d %q\n%s", p.URL, resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
	}
	resp, err := http.Get(strings.TrimSuffix(pages[0].URL, ".html") + ".missing")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("missing page: %d", resp.StatusCode)
	}
	if got := s.Requested(); len(got) != len(pages)+1 || got[0] != pages[0].URL {
		t.Fatalf("requested %v", got)
	}
}
