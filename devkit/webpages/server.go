package webpages

import (
	"context"
	"embed"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"
)

//go:embed site/*.html
var site embed.FS

// Page describes one served article, for a search index.
type Page struct {
	// URL is the page's absolute address on this server.
	URL string
	// Title is the page's <title>.
	Title string
	// Summary is a search-result snippet.
	Summary string
}

// articles lists the embedded pages: file, title and snippet.
var articles = []struct{ file, title, summary string }{
	{"dendrite.html", "Dendrite: a second-generation Matrix homeserver written in Go",
		"Dendrite is a Matrix homeserver written in Go, an alternative to Synapse that runs as a single binary. What you need, which database to use, and whether it is ready for a small team."},
	{"homeserver-databases.html", "Choosing a database for a small Matrix homeserver",
		"SQLite or PostgreSQL? What a small team running its own Matrix homeserver should pick, and when to switch."},
}

// Server is a running local web server. Its methods are safe for
// concurrent use.
type Server struct {
	srv  *http.Server
	base string

	mu        sync.Mutex
	requested []string
}

// Start serves the embedded articles on 127.0.0.1 until [Server.Close].
func Start() (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Server{base: "http://" + ln.Addr().String()}
	s.srv = &http.Server{Handler: http.HandlerFunc(s.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// Pages returns the served articles with their absolute URLs.
func (s *Server) Pages() []Page {
	out := make([]Page, len(articles))
	for i, a := range articles {
		out[i] = Page{URL: s.base + "/articles/" + a.file, Title: a.title, Summary: a.summary}
	}
	return out
}

// Requested returns the absolute URLs requested so far (any status),
// oldest first.
func (s *Server) Requested() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requested)
}

// Close stops the server.
func (s *Server) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.srv.Shutdown(ctx)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.requested = append(s.requested, s.base+r.URL.RequestURI())
	s.mu.Unlock()
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	for _, a := range articles {
		if r.URL.Path == "/articles/"+a.file {
			body, err := site.ReadFile("site/" + a.file)
			if err != nil {
				http.Error(w, "internal error", http.StatusInternalServerError)
				return
			}
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			_, _ = w.Write(body)
			return
		}
	}
	http.NotFound(w, r)
}
