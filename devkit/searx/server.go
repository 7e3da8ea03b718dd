package searx

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// Result is one search hit of the index, with SearXNG's JSON names.
type Result struct {
	URL     string `json:"url"`
	Title   string `json:"title"`
	Content string `json:"content"`
	Engine  string `json:"engine"`
}

// Server is a running fake SearXNG. Its methods are safe for concurrent
// use.
type Server struct {
	index []Result
	srv   *http.Server
	base  string

	mu      sync.Mutex
	queries []string
}

// Start serves index on 127.0.0.1 until [Server.Close].
func Start(index ...Result) (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Server{index: slices.Clone(index), base: "http://" + ln.Addr().String()}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /search", s.search)
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// URL returns the search endpoint, "http://127.0.0.1:port/search".
func (s *Server) URL() string { return s.base + "/search" }

// Queries returns the queries received so far, oldest first.
func (s *Server) Queries() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.queries)
}

// Close stops the server.
func (s *Server) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.srv.Shutdown(ctx)
}

func (s *Server) search(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query().Get("q")
	if f := r.URL.Query().Get("format"); f != "json" {
		http.Error(w, "only format=json is served here", http.StatusForbidden)
		return
	}
	s.mu.Lock()
	s.queries = append(s.queries, q)
	s.mu.Unlock()
	results := Match(s.index, q)
	for i := range results {
		if results[i].Engine == "" {
			results[i].Engine = "demo"
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"query": q, "number_of_results": len(results), "results": results,
		"answers": []any{}, "corrections": []any{}, "infoboxes": []any{},
		"suggestions": []any{}, "unresponsive_engines": []any{},
	})
}

// Match returns the results of index that share a word (of four or more
// letters, case-insensitive) with query, best first; if none does, all of
// index in order.
func Match(index []Result, query string) []Result {
	words := strings.FieldsFunc(strings.ToLower(query), func(r rune) bool {
		return !('a' <= r && r <= 'z' || '0' <= r && r <= '9')
	})
	type scored struct {
		r     Result
		score int
	}
	var hits []scored
	for _, r := range index {
		text := strings.ToLower(r.Title + " " + r.Content + " " + r.URL)
		n := 0
		for _, w := range words {
			if len(w) >= 4 && strings.Contains(text, w) {
				n++
			}
		}
		if n > 0 {
			hits = append(hits, scored{r, n})
		}
	}
	if len(hits) == 0 {
		return slices.Clone(index)
	}
	slices.SortStableFunc(hits, func(a, b scored) int { return b.score - a.score })
	out := make([]Result, len(hits))
	for i, h := range hits {
		out[i] = h.r
	}
	return out
}
