package searx

import (
	"encoding/json"
	"net/http"
	"net/url"
	"testing"
)

func TestSearchRanksAndRecords(t *testing.T) {
	s, err := Start(Result{URL: "http://a/1", Title: "Gardening", Content: "tomatoes"},
		Result{URL: "http://a/2", Title: "Dendrite homeserver", Content: "Matrix in Go"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	get := func(q string) []Result {
		resp, err := http.Get(s.URL() + "?" + url.Values{"q": {q}, "format": {"json"}}.Encode())
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body struct {
			Query   string   `json:"query"`
			Results []Result `json:"results"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || body.Query != q {
			t.Fatalf("%v %+v", err, body)
		}
		return body.Results
	}
	if r := get("what is dendrite"); len(r) != 1 || r[0].URL != "http://a/2" || r[0].Engine != "demo" {
		t.Fatalf("ranked %+v", r)
	}
	if r := get("zzz"); len(r) != 2 {
		t.Fatalf("no match should return the whole index: %+v", r)
	}
	if q := s.Queries(); len(q) != 2 || q[0] != "what is dendrite" {
		t.Fatalf("queries %v", q)
	}
	resp, err := http.Get(s.URL() + "?q=x")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("format missing: status %d", resp.StatusCode)
	}
}
