package chaos

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestProxyKinds sends one request through a proxy that injects only one
// kind, with rate 1, and checks what the client and the upstream saw.
func TestProxyKinds(t *testing.T) {
	const body = `{"next_batch":"s1","rooms":{"join":{}},"account_data":{"events":[]}}`
	cases := []struct {
		kind     NetKind
		upstream int32 // requests the upstream saw
		check    func(t *testing.T, resp *http.Response, data []byte, err error)
	}{
		{Reset, 0, func(t *testing.T, resp *http.Response, _ []byte, err error) {
			if err == nil {
				t.Fatalf("reset: got a response %d", resp.StatusCode)
			}
		}},
		{DropResponse, 1, func(t *testing.T, resp *http.Response, _ []byte, err error) {
			if err == nil {
				t.Fatalf("drop: got a response %d", resp.StatusCode)
			}
		}},
		{TooMany, 0, func(t *testing.T, resp *http.Response, data []byte, err error) {
			var e struct {
				Errcode      string `json:"errcode"`
				RetryAfterMs int    `json:"retry_after_ms"`
			}
			if err != nil || resp.StatusCode != 429 || json.Unmarshal(data, &e) != nil || e.Errcode != "M_LIMIT_EXCEEDED" || e.RetryAfterMs < 100 || e.RetryAfterMs > 2000 {
				t.Fatalf("429: %v %v %s", err, resp, data)
			}
		}},
		{ServerErrors, 0, func(t *testing.T, resp *http.Response, _ []byte, err error) {
			if err != nil || resp.StatusCode < 500 {
				t.Fatalf("5xx: %v %v", err, resp)
			}
		}},
		{Latency, 1, func(t *testing.T, resp *http.Response, data []byte, err error) {
			if err != nil || resp.StatusCode != 200 || string(data) != body {
				t.Fatalf("latency: %v %s", err, data)
			}
		}},
		{Truncate, 1, func(t *testing.T, resp *http.Response, data []byte, err error) {
			if err != nil || len(data) >= len(body) || !strings.HasPrefix(body, string(data)) {
				t.Fatalf("truncate: %v %q", err, data)
			}
		}},
		{Malformed, 1, func(t *testing.T, resp *http.Response, data []byte, err error) {
			if err != nil || string(data) == body {
				t.Fatalf("malformed: %v %q", err, data)
			}
		}},
	}
	for _, c := range cases {
		t.Run(string(c.kind), func(t *testing.T) {
			var hits atomic.Int32
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				hits.Add(1)
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, body)
			}))
			defer up.Close()
			p, err := NewProxy(up.URL, NetPlan{Seed: 1, Rate: 1, Kinds: []NetKind{c.kind}, MaxLatency: 50 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			p.Enable(true)
			cl := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
			resp, err := cl.Get(p.URL() + "/_matrix/client/v3/sync")
			var data []byte
			if err == nil {
				data, _ = io.ReadAll(resp.Body)
				resp.Body.Close()
			}
			c.check(t, resp, data, err)
			if got := hits.Load(); got != c.upstream {
				t.Fatalf("upstream saw %d requests, want %d", got, c.upstream)
			}
			if p.Counts()[c.kind] != 1 {
				t.Fatalf("counts %v", p.Counts())
			}

			// Disabled, it is a plain proxy.
			p.Enable(false)
			resp, err = cl.Get(p.URL() + "/x")
			if err != nil {
				t.Fatal(err)
			}
			data, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(data) != body {
				t.Fatalf("disabled proxy changed the body: %q", data)
			}
		})
	}
}

// TestMalformKinds: every damage keeps the seed's choice and changes the
// body.
func TestMalformIsSeeded(t *testing.T) {
	body := []byte(`{"a":"x","b":{"c":1},"d":[1,2]}`)
	for seed := range uint64(20) {
		p1, _ := NewProxy("http://127.0.0.1:1", NetPlan{Seed: seed})
		p2, _ := NewProxy("http://127.0.0.1:1", NetPlan{Seed: seed})
		a := malform(body, p1.rng, nil, nil)
		b := malform(body, p2.rng, nil, nil)
		p1.Close()
		p2.Close()
		if string(a) != string(b) {
			t.Fatalf("seed %d: %s vs %s", seed, a, b)
		}
		if string(a) == string(body) {
			t.Fatalf("seed %d: body unchanged", seed)
		}
	}
	if got := malform([]byte("not json"), nil, nil, nil); string(got) != "not " {
		t.Fatalf("non-JSON: %q", got)
	}
}

// TestTypeOnlyFieldsKeepTheirPlace: a type-only field is never removed or
// nulled, only given a wrong type.
func TestTypeOnlyFieldsKeepTheirPlace(t *testing.T) {
	body := []byte(`{"next_batch":"s1","rooms":{"join":{}}}`)
	for seed := range uint64(200) {
		p, _ := NewProxy("http://127.0.0.1:1", NetPlan{Seed: seed})
		out := malform(body, p.rng, []string{"rooms"}, []string{"rooms"})
		p.Close()
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(out, &obj); err != nil {
			t.Fatal(err)
		}
		if r, ok := obj["rooms"]; !ok || string(r) == "null" {
			t.Fatalf("seed %d removed or nulled rooms: %s", seed, out)
		}
	}
}
