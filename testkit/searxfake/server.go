package searxfake

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"
)

// Result is one search hit as the fake serves it. The fields use SearXNG's
// JSON names.
type Result struct {
	URL     string `json:"url"`
	Title   string `json:"title"`
	Content string `json:"content"`
	Engine  string `json:"engine,omitempty"`
}

// Response scripts one reply.
type Response struct {
	// Status is the HTTP status; zero means 200.
	Status int
	// Results are encoded in SearXNG's JSON shape when Raw is nil.
	Results []Result
	// Raw, when non-nil, is written verbatim instead of encoded results.
	Raw []byte
	// ContentType overrides the Content-Type header (default
	// "application/json").
	ContentType string
	// RedirectTo, when set, answers with 302 Found and this Location.
	RedirectTo string
	// Delay holds the reply back; the wait ends early, with no reply, when
	// the client cancels the request or the server closes.
	Delay time.Duration
}

// Results returns a 200 response listing rs.
func Results(rs ...Result) Response { return Response{Results: rs} }

// Raw returns a 200 response whose body is exactly body.
func Raw(body []byte) Response { return Response{Raw: body} }

// Status returns a response with the given status code and a short body.
func Status(code int) Response {
	return Response{Status: code, Raw: []byte(http.StatusText(code) + "\n"), ContentType: "text/plain; charset=utf-8"}
}

// Redirect returns a 302 response pointing at location.
func Redirect(location string) Response { return Response{RedirectTo: location} }

// After returns a copy of r that is delayed by d.
func (r Response) After(d time.Duration) Response { r.Delay = d; return r }

// Request is what the fake recorded about one incoming request.
type Request struct {
	Method string
	Path   string
	// Query is the "q" parameter and Format the "format" parameter.
	Query  string
	Format string
	// Params is the complete parsed query string.
	Params url.Values
	// AuthPresent reports whether any Authorization header was sent;
	// AuthValid whether it was "Bearer <key>" for the key set by
	// [WithAPIKey]. The header value itself is not kept.
	AuthPresent bool
	AuthValid   bool
	UserAgent   string
	HasCookie   bool
}

// Option configures a [Server].
type Option func(*Server)

// WithAPIKey sets the key that makes [Request.AuthValid] true. It does not
// reject requests; script a [Status] response for that.
func WithAPIKey(key string) Option { return func(s *Server) { s.apiKey = key } }

// WithDefault sets the response used when the script is empty. The default
// is a 200 response with no results.
func WithDefault(r Response) Option { return func(s *Server) { s.def = r } }

// Server is a scripted fake SearXNG. Its methods are safe for concurrent
// use.
type Server struct {
	apiKey string
	def    Response
	hs     *httptest.Server
	done   chan struct{}
	once   sync.Once

	mu     sync.Mutex
	script []Response
	reqs   []Request
}

// Start returns a listening server on 127.0.0.1 that is closed when t's
// test ends.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	s := &Server{def: Response{}, done: make(chan struct{})}
	for _, o := range opts {
		o(s)
	}
	s.hs = httptest.NewServer(http.HandlerFunc(s.serveHTTP))
	t.Cleanup(s.Close)
	return s
}

// URL returns the search endpoint, "http://127.0.0.1:port/search".
func (s *Server) URL() string { return s.hs.URL + "/search" }

// BaseURL returns "http://127.0.0.1:port" with no path.
func (s *Server) BaseURL() string { return s.hs.URL }

// Close stops the server, ending any delayed replies. It is idempotent.
func (s *Server) Close() {
	s.once.Do(func() {
		close(s.done)
		s.hs.Close()
	})
}

// Enqueue appends responses to the script.
func (s *Server) Enqueue(rs ...Response) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script = append(s.script, rs...)
}

// Requests returns a copy of the requests recorded so far, oldest first.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Clone(s.reqs)
	for i := range out {
		out[i].Params = cloneValues(out[i].Params)
	}
	return out
}

func cloneValues(v url.Values) url.Values {
	c := make(url.Values, len(v))
	for k, vs := range v {
		c[k] = slices.Clone(vs)
	}
	return c
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	params := r.URL.Query()
	auth := r.Header.Get("Authorization")
	rec := Request{
		Method:      r.Method,
		Path:        r.URL.Path,
		Query:       params.Get("q"),
		Format:      params.Get("format"),
		Params:      params,
		AuthPresent: auth != "",
		AuthValid:   s.apiKey != "" && auth == "Bearer "+s.apiKey,
		UserAgent:   r.UserAgent(),
		HasCookie:   r.Header.Get("Cookie") != "",
	}

	s.mu.Lock()
	s.reqs = append(s.reqs, rec)
	resp := s.def
	if len(s.script) > 0 {
		resp = s.script[0]
		s.script = s.script[1:]
	}
	s.mu.Unlock()

	if resp.Delay > 0 {
		timer := time.NewTimer(resp.Delay)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-r.Context().Done():
			return
		case <-s.done:
			return
		}
	}

	if resp.RedirectTo != "" {
		w.Header().Set("Location", resp.RedirectTo)
		status := resp.Status
		if status == 0 {
			status = http.StatusFound
		}
		w.WriteHeader(status)
		return
	}

	body := resp.Raw
	if body == nil {
		body = encode(rec.Query, resp.Results)
	}
	ct := resp.ContentType
	if ct == "" {
		ct = "application/json"
	}
	w.Header().Set("Content-Type", ct)
	status := resp.Status
	if status == 0 {
		status = http.StatusOK
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// wireResult is a result in SearXNG's JSON shape, with the extra fields a
// real instance sends.
type wireResult struct {
	Result
	Engines   []string `json:"engines"`
	Positions []int    `json:"positions"`
	Score     float64  `json:"score"`
	Category  string   `json:"category"`
	ParsedURL []string `json:"parsed_url"`
	Template  string   `json:"template"`
}

type wireResponse struct {
	Query               string       `json:"query"`
	NumberOfResults     int          `json:"number_of_results"`
	Results             []wireResult `json:"results"`
	Answers             []any        `json:"answers"`
	Corrections         []any        `json:"corrections"`
	Infoboxes           []any        `json:"infoboxes"`
	Suggestions         []string     `json:"suggestions"`
	UnresponsiveEngines [][]string   `json:"unresponsive_engines"`
}

func encode(query string, rs []Result) []byte {
	out := wireResponse{
		Query:               query,
		Results:             make([]wireResult, 0, len(rs)),
		Answers:             []any{},
		Corrections:         []any{},
		Infoboxes:           []any{},
		Suggestions:         []string{},
		UnresponsiveEngines: [][]string{},
	}
	for i, r := range rs {
		engine := r.Engine
		if engine == "" {
			engine = "fake"
			r.Engine = engine
		}
		var parsed []string
		if u, err := url.Parse(r.URL); err == nil {
			parsed = []string{u.Scheme, u.Host, u.Path, "", u.RawQuery, u.Fragment}
		}
		out.Results = append(out.Results, wireResult{
			Result:    r,
			Engines:   []string{engine},
			Positions: []int{i + 1},
			Score:     1.0 / float64(i+1),
			Category:  "general",
			ParsedURL: parsed,
			Template:  "default.html",
		})
	}
	b, err := json.Marshal(out)
	if err != nil {
		panic("searxfake: encode: " + err.Error()) // cannot happen for these types
	}
	return b
}
