package faultproxy

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

func TestFaults(t *testing.T) {
	var hits atomic.Int64
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	defer backend.Close()
	p := Start(t, backend.URL)
	p.Add(Rule{Method: http.MethodPut, PathContains: "/send/", Faults: []Fault{
		{Status: 429, Body: `{"errcode":"M_LIMIT_EXCEEDED","retry_after_ms":100}`},
		{Status: 500, Body: `{"errcode":"M_UNKNOWN"}`, Forward: true},
	}})
	do := func(method, path string) (int, string) {
		req, _ := http.NewRequest(method, p.URL()+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	cases := []struct {
		method, path string
		status       int
		hits         int64
	}{
		{http.MethodGet, "/x/send/y", 200, 1},  // method does not match
		{http.MethodPut, "/x/send/y", 429, 1},  // not forwarded
		{http.MethodPut, "/x/send/y", 500, 2},  // forwarded, then failed
		{http.MethodPut, "/x/send/y", 200, 3},  // script exhausted
		{http.MethodPut, "/x/other/y", 200, 4}, // path does not match
	}
	for i, c := range cases {
		if st, _ := do(c.method, c.path); st != c.status || hits.Load() != c.hits {
			t.Fatalf("case %d: status %d hits %d, want %d %d", i, st, hits.Load(), c.status, c.hits)
		}
	}
	if l := p.Log(); len(l) != 2 || l[0].Fault.Status != 429 || l[1].Fault.Status != 500 || !l[1].Time.After(l[0].Time) {
		t.Fatalf("log = %+v", l)
	}
	if p.Applied() != 2 {
		t.Fatalf("applied = %d", p.Applied())
	}
}
