package llmscript

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"
)

// maxBody bounds the request body the fake will read.
const maxBody = 32 << 20

// Server is a scripted OpenAI-compatible chat-completions server. All
// methods are safe for concurrent use.
type Server struct {
	apiKey string
	models []string
	def    Step
	now    func() time.Time
	trace  func(arrived, answered time.Time)
	routes map[string]Step // "METHOD /path" → the reply

	mu          sync.Mutex
	script      []Step
	reqs        []Request
	inFlight    int
	maxInFlight int
	active      int           // handlers running, for Close
	changed     chan struct{} // closed and replaced on every state change
	closed      bool
	done        chan struct{} // closed by Close; ends waits in handlers
	hs          *http.Server
	served      chan struct{}
	url         string
	closeOnce   sync.Once
}

// Option configures a [Server].
type Option func(*Server)

// WithTrace has fn called after every chat completion request with the
// moment its handler began and the moment its answer was written, so a
// benchmark can tell the fake's own time apart from its client's.
func WithTrace(fn func(arrived, answered time.Time)) Option {
	return func(s *Server) { s.trace = fn }
}

// WithAPIKey requires "Authorization: Bearer key" on every request; other
// requests get 401 with an OpenAI-style error body. By default no key is
// required.
func WithAPIKey(key string) Option { return func(s *Server) { s.apiKey = key } }

// WithModels sets the model IDs listed by GET /v1/models; the first one is
// echoed in replies to requests that name no model. The default is
// "lisa-fake-model".
func WithModels(names ...string) Option {
	return func(s *Server) {
		if len(names) > 0 {
			s.models = slices.Clone(names)
		}
	}
}

// WithRoute serves step to method requests for path (the whole path,
// "/props" or "/v1/models"), after the same key check as GET /v1/models,
// in place of the built-in reply, if any. Such endpoints beside chat
// completions are what some servers tell about the model (llama.cpp's
// GET /props, Ollama's POST /api/show, vLLM's max_model_len in GET
// /v1/models); their requests are not recorded and consume no step of
// the script. A [Func] step is called with an empty Request.
func WithRoute(method, path string, step Step) Option {
	return func(s *Server) {
		if s.routes == nil {
			s.routes = map[string]Step{}
		}
		s.routes[method+" "+path] = step
	}
}

// WithDefault sets the step used when the script is empty. Use [Func] to
// compute it per request. The default is a fixed [Text] reply.
func WithDefault(step Step) Option { return func(s *Server) { s.def = step } }

// WithClock sets the clock used for request arrival times and the
// "created" field of replies; it must be safe for concurrent use. The
// default is time.Now.
func WithClock(now func() time.Time) Option { return func(s *Server) { s.now = now } }

// New returns an unstarted server; call [Server.Listen] to start it.
func New(opts ...Option) *Server {
	s := &Server{
		models:  []string{"lisa-fake-model"},
		def:     Text("llmscript: no scripted reply"),
		now:     time.Now,
		changed: make(chan struct{}),
		done:    make(chan struct{}),
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Listen starts serving on a random port of 127.0.0.1.
func (s *Server) Listen() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("llmscript: server closed")
	}
	if s.hs != nil {
		return errors.New("llmscript: already listening")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("llmscript: listen: %w", err)
	}
	s.hs = &http.Server{Handler: http.HandlerFunc(s.serveHTTP), ReadHeaderTimeout: 10 * time.Second}
	s.served = make(chan struct{})
	s.url = "http://" + ln.Addr().String() + "/v1"
	go func() {
		defer close(s.served)
		_ = s.hs.Serve(ln) // always returns ErrServerClosed after Close
	}()
	return nil
}

// Close stops the server: held and delayed calls end without a reply, open
// connections are closed, and Close waits for all handlers to return. It is
// idempotent.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		close(s.done)
		s.broadcastLocked()
		hs, served := s.hs, s.served
		s.mu.Unlock()
		if hs != nil {
			_ = hs.Close()
			<-served
		}
		_ = s.waitFor(context.Background(), func() bool { return s.active == 0 })
	})
}

// URL returns the base URL, ending in "/v1", or "" before Listen.
func (s *Server) URL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.url
}

// Enqueue appends steps to the script. Each chat-completions request that
// passes authentication and validation consumes one step, in arrival order.
func (s *Server) Enqueue(steps ...Step) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script = append(s.script, steps...)
}

// Pending returns the number of scripted steps not yet consumed.
func (s *Server) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.script)
}

// Requests returns a copy of every chat-completions request received so
// far, in arrival order, including rejected ones.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Request, len(s.reqs))
	for i, r := range s.reqs {
		out[i] = r.clone()
	}
	return out
}

// WaitForRequests blocks until at least n chat-completions requests have
// been received or ctx ends.
func (s *Server) WaitForRequests(ctx context.Context, n int) error {
	if err := s.waitFor(ctx, func() bool { return len(s.reqs) >= n }); err != nil {
		s.mu.Lock()
		got := len(s.reqs)
		s.mu.Unlock()
		return fmt.Errorf("llmscript: waiting for %d requests, got %d: %w", n, got, err)
	}
	return nil
}

// InFlight returns the number of chat-completions requests being handled,
// counted from arrival until the handler returns (rejected requests count
// briefly too).
func (s *Server) InFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inFlight
}

// MaxConcurrent returns the highest [Server.InFlight] value ever observed.
func (s *Server) MaxConcurrent() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.maxInFlight
}

// WaitForInFlight blocks until exactly n chat-completions requests are in
// flight or ctx ends.
func (s *Server) WaitForInFlight(ctx context.Context, n int) error {
	if err := s.waitFor(ctx, func() bool { return s.inFlight == n }); err != nil {
		return fmt.Errorf("llmscript: waiting for %d in flight, have %d: %w", n, s.InFlight(), err)
	}
	return nil
}

// waitFor blocks until cond, evaluated under s.mu, holds or ctx ends.
func (s *Server) waitFor(ctx context.Context, cond func() bool) error {
	for {
		s.mu.Lock()
		ok, ch := cond(), s.changed
		s.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (s *Server) broadcastLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		writeError(w, ErrorTyped(http.StatusServiceUnavailable, "server_error", "server_closed", "llmscript: server closed"))
		return
	}
	s.active++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.active--
		s.broadcastLocked()
		s.mu.Unlock()
	}()

	if step, ok := s.routes[r.Method+" "+r.URL.Path]; ok {
		if !s.authorized(r) {
			writeError(w, Error(http.StatusUnauthorized, "Incorrect API key provided."))
			return
		}
		_, _ = io.Copy(io.Discard, http.MaxBytesReader(w, r.Body, maxBody))
		s.serveStep(w, r, Request{}, step, 0)
		return
	}
	switch r.URL.Path {
	case "/v1/chat/completions":
		if r.Method != http.MethodPost {
			writeError(w, Error(http.StatusMethodNotAllowed, "llmscript: use POST"))
			return
		}
		s.chat(w, r)
	case "/v1/models":
		if r.Method != http.MethodGet {
			writeError(w, Error(http.StatusMethodNotAllowed, "llmscript: use GET"))
			return
		}
		if !s.authorized(r) {
			writeError(w, Error(http.StatusUnauthorized, "Incorrect API key provided."))
			return
		}
		s.listModels(w)
	default:
		writeError(w, Error(http.StatusNotFound, "llmscript: unknown endpoint "+r.URL.Path))
	}
}

func (s *Server) authorized(r *http.Request) bool {
	if s.apiKey == "" {
		return true
	}
	got := []byte(r.Header.Get("Authorization"))
	return subtle.ConstantTimeCompare(got, []byte("Bearer "+s.apiKey)) == 1
}

func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	req := Request{Time: s.now(), Authorized: s.authorized(r)}
	if s.trace != nil {
		defer func() { s.trace(req.Time, s.now()) }()
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	req.Body = body
	if err == nil {
		err = req.parse(body)
	}
	if err != nil {
		req.ParseError = err.Error()
	}
	accepted := req.Authorized && err == nil && !req.Stream

	s.mu.Lock()
	req.Seq = len(s.reqs)
	s.reqs = append(s.reqs, req)
	s.inFlight++
	s.maxInFlight = max(s.maxInFlight, s.inFlight)
	step := s.def
	if accepted && len(s.script) > 0 {
		step, s.script = s.script[0], s.script[1:]
	}
	s.broadcastLocked()
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inFlight--
		s.broadcastLocked()
		s.mu.Unlock()
	}()

	switch {
	case !req.Authorized:
		writeError(w, Error(http.StatusUnauthorized, "Incorrect API key provided."))
	case err != nil:
		writeError(w, Error(http.StatusBadRequest, "llmscript: invalid request body: "+err.Error()))
	case req.Stream:
		writeError(w, ErrorTyped(http.StatusBadRequest, "invalid_request_error", "stream_unsupported",
			"llmscript: streaming is not supported; send \"stream\": false"))
	default:
		s.serveStep(w, r, req, step, 0)
	}
}

// serveStep waits as step asks, then writes its reply.
func (s *Server) serveStep(w http.ResponseWriter, r *http.Request, req Request, step Step, depth int) {
	if !s.wait(r.Context(), step) {
		return
	}
	for _, h := range step.header {
		w.Header().Add(h[0], h[1])
	}
	switch step.kind {
	case kindText, kindToolCalls:
		writeJSON(w, http.StatusOK, s.completion(req, step))
	case kindError:
		writeError(w, step)
	case kindRaw:
		w.Header().Set("Content-Type", step.contentType)
		w.WriteHeader(step.status)
		_, _ = w.Write(step.body)
	case kindDrop:
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				_ = conn.Close()
				return
			}
		}
		panic(http.ErrAbortHandler)
	case kindHang:
		select {
		case <-r.Context().Done():
		case <-s.done:
		}
	case kindEndless:
		s.endless(w, r, step)
	case kindFunc:
		if depth >= 32 {
			writeError(w, Error(http.StatusInternalServerError, "llmscript: Func steps nested too deeply"))
			return
		}
		s.serveStep(w, r, req, step.fn(req.clone()), depth+1)
	}
}

// wait honours step's gate and delay; it reports false if the client went
// away or the server closed first.
func (s *Server) wait(ctx context.Context, step Step) bool {
	if step.gate != nil {
		select {
		case <-step.gate.ch:
		case <-ctx.Done():
			return false
		case <-s.done:
			return false
		}
	}
	if step.delay > 0 {
		t := time.NewTimer(step.delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return false
		case <-s.done:
			return false
		}
	}
	return true
}

// endless writes an Endless step's reply until the client or the server
// goes away.
func (s *Server) endless(w http.ResponseWriter, r *http.Request, step Step) {
	w.Header().Set("Content-Type", step.contentType)
	w.WriteHeader(step.status)
	flusher, _ := w.(http.Flusher)
	if _, err := w.Write(step.body); err != nil {
		return
	}
	filler := []byte(step.content)
	if len(filler) == 0 {
		filler = []byte(" ")
	}
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		if flusher != nil {
			flusher.Flush()
		}
		select {
		case <-r.Context().Done():
			return
		case <-s.done:
			return
		case <-tick.C:
		}
		if _, err := w.Write(filler); err != nil {
			return
		}
	}
}
