package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/lisabot/lisa/hostguard"
)

// ActorStat is one actor's figures, as the mailbox registry reports them.
type ActorStat struct {
	ID       string
	Mailbox  int
	Restarts int64
}

// Sources are read at scrape time.
type Sources struct {
	Actors     func() []ActorStat
	LastSync   func() time.Time
	StoreBytes func() int64
	// BudgetRemaining is the deployment's token budget left today; ok is
	// false when no budget is set.
	BudgetRemaining func() (tokens int64, ok bool)
	// Build labels the lisa_build_info gauge.
	Build Build
}

// Build is what the lisa_build_info gauge says about the binary.
type Build struct {
	Version   string
	Revision  string
	GoVersion string
}

// Metrics holds Lisa's instruments.
type Metrics struct {
	reg         *prometheus.Registry
	syncs       *prometheus.CounterVec
	invocations *prometheus.CounterVec
	phases      *prometheus.HistogramVec
	llm         *prometheus.CounterVec
	llmRetries  *prometheus.CounterVec
	tools       *prometheus.CounterVec
	toolBytes   prometheus.Counter
	lookups     *prometheus.CounterVec
	// rateLimited and rateWait count sends refused for the homeserver's
	// rate limit and the waits it asked for.
	rateLimited prometheus.Counter
	rateWait    prometheus.Counter
	links       prometheus.Counter
	llmFailures *prometheus.CounterVec
	llmRefusing prometheus.Gauge
	llmTokens   *prometheus.CounterVec
	statusAuth  *prometheus.CounterVec

	mu      sync.Mutex
	refusal LLMRefusal
}

// LLMRefusal is why the LLM server refuses every request: the cause of
// its last refusal, the HTTP status, and since when it refuses.
type LLMRefusal struct {
	Cause  string
	Status int
	Since  time.Time
}

// New registers every instrument on a fresh registry.
func New(src Sources) *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		syncs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lisa_sync_requests_total",
			Help: "Matrix /sync requests by result (ok, error)."}, []string{"result"}),
		invocations: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lisa_invocations_total",
			Help: "Finished invocations by outcome (answered, error_reply, abandoned), and replies held after M_FORBIDDEN (held)."}, []string{"outcome"}),
		phases: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "lisa_phase_duration_seconds",
			Help:    "Duration of invocation phases: queue, context, llm, tools, send.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}}, []string{"phase"}),
		llm: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lisa_llm_requests_total",
			Help: "LLM chat requests by result (ok or an error code)."}, []string{"result"}),
		llmRetries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lisa_llm_retries_total",
			Help: "LLM request retries by the error code that caused them."}, []string{"code"}),
		tools: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lisa_tool_calls_total",
			Help: "Tool calls by tool and result (ok or a tool error code)."}, []string{"tool", "result"}),
		toolBytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "lisa_tool_output_bytes_total",
			Help: "Bytes of tool output returned to the model."}),
		lookups: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lisa_redaction_lookups_total",
			Help: "Ended lookups of Lisa's events to redact by kind (reply, reaction) and result (found, none, given_up, lookup_dropped)."}, []string{"kind", "result"}),
		links: prometheus.NewCounter(prometheus.CounterOpts{Name: "lisa_answer_links_unverified_total",
			Help: "Links and bare URLs of answers shown as text because their URL did not appear in the invocation."}),
		llmFailures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lisa_llm_failures_total",
			Help: "Failed LLM request attempts by cause (unauthorized, model_not_found, context_too_long, parameter_refused, rate_limited, server_error, timeout, malformed_response, …)."}, []string{"cause"}),
		llmRefusing: prometheus.NewGauge(prometheus.GaugeOpts{Name: "lisa_llm_refusing",
			Help: "1 while the LLM server refuses every request until the configuration changes (since its last refusal of that kind, until a request succeeds), else 0."}),
		llmTokens: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lisa_llm_tokens_total",
			Help: "Tokens of LLM requests by kind (prompt, completion), as the server reported them or estimated from bytes."}, []string{"kind"}),
		rateLimited: prometheus.NewCounter(prometheus.CounterOpts{Name: "lisa_matrix_rate_limited_total",
			Help: "Reply sends the homeserver refused for its rate limit (429 M_LIMIT_EXCEEDED); each is sent again after the wait, never dropped."}),
		rateWait: prometheus.NewCounter(prometheus.CounterOpts{Name: "lisa_matrix_rate_limit_wait_seconds_total",
			Help: "Seconds of waiting the homeserver asked for (retry_after_ms) in its rate-limit refusals of reply sends."}),
		statusAuth: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lisa_status_auth_failures_total",
			Help: "Status page requests refused for their token by reason (wrong_token; throttled: refused unread while wrong tokens are throttled)."}, []string{"reason"}),
	}
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "lisa_build_info",
		Help: "1, labelled with the binary's module version, VCS revision and Go version."}, []string{"version", "revision", "go_version"})
	build.WithLabelValues(src.Build.Version, src.Build.Revision, src.Build.GoVersion).Set(1)
	m.reg.MustRegister(build, m.syncs, m.invocations, m.phases, m.llm, m.llmRetries, m.tools, m.toolBytes, m.lookups, m.links, m.llmFailures, m.llmRefusing, m.llmTokens, m.statusAuth, m.rateLimited, m.rateWait,
		prometheus.NewGoCollector(), newScrapeCollector(src))
	return m
}

// SyncDone counts one /sync request.
func (m *Metrics) SyncDone(ok bool) {
	if ok {
		m.syncs.WithLabelValues("ok").Inc()
	} else {
		m.syncs.WithLabelValues("error").Inc()
	}
}

// Outcome counts a finished invocation.
func (m *Metrics) Outcome(outcome string) { m.invocations.WithLabelValues(outcome).Inc() }

// Phase records one phase duration.
func (m *Metrics) Phase(phase string, d time.Duration) {
	m.phases.WithLabelValues(phase).Observe(d.Seconds())
}

// Lookup counts an ended lookup of Lisa's events to redact by kind and
// result.
func (m *Metrics) Lookup(kind, result string) { m.lookups.WithLabelValues(kind, result).Inc() }

// RateLimited counts a reply send refused for the homeserver's rate limit
// and the wait it asked for.
func (m *Metrics) RateLimited(wait time.Duration) {
	m.rateLimited.Inc()
	m.rateWait.Add(wait.Seconds())
}

// LLMRequest counts one LLM request; result is "ok" or an error code.
func (m *Metrics) LLMRequest(result string) { m.llm.WithLabelValues(result).Inc() }

// LLMTokens counts the tokens of one LLM request.
func (m *Metrics) LLMTokens(prompt, completion int64) {
	m.llmTokens.WithLabelValues("prompt").Add(float64(prompt))
	m.llmTokens.WithLabelValues("completion").Add(float64(completion))
}

// LLMRetry counts one LLM retry.
func (m *Metrics) LLMRetry(code string) { m.llmRetries.WithLabelValues(code).Inc() }

// LLMFailed counts one failed LLM request attempt by its cause. refuses
// says the server refuses every request until the configuration changes
// (a refused key, an unknown model, a refused parameter): it then counts
// as refusing (see LLMRefusal) until LLMAnswered.
func (m *Metrics) LLMFailed(cause string, status int, refuses bool) {
	m.llmFailures.WithLabelValues(cause).Inc()
	if !refuses {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.refusal.Cause != cause || m.refusal.Status != status {
		m.refusal = LLMRefusal{Cause: cause, Status: status, Since: time.Now()}
	}
	m.llmRefusing.Set(1)
}

// LLMAnswered records an LLM request attempt that was answered: the
// server no longer refuses every request.
func (m *Metrics) LLMAnswered() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.refusal = LLMRefusal{}
	m.llmRefusing.Set(0)
}

// LLMRefusing returns why the LLM server refuses every request, and
// false while it does not.
func (m *Metrics) LLMRefusing() (LLMRefusal, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.refusal, m.refusal.Cause != ""
}

// ToolCall counts one tool call and the bytes it returned.
func (m *Metrics) ToolCall(tool, result string, bytes int) {
	m.tools.WithLabelValues(tool, result).Inc()
	m.toolBytes.Add(float64(bytes))
}

// LinksUnverified counts n links of an answer shown as text because
// their URL did not appear in the invocation.
func (m *Metrics) LinksUnverified(n int) { m.links.Add(float64(n)) }

// StatusAuthFailed counts one status page request refused for its token
// ("wrong_token" or "throttled").
func (m *Metrics) StatusAuthFailed(reason string) { m.statusAuth.WithLabelValues(reason).Inc() }

// Handler serves the metrics in Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// Server is a running metrics listener.
type Server struct {
	srv *http.Server
	ln  net.Listener
}

// Serve listens on addr, which must be a loopback address, and serves
// /metrics until Close. Only a loopback literal, "localhost" or addr's
// host is accepted as a request's Host (421 otherwise): a web site that
// rebinds its name to 127.0.0.1 reads nothing.
func Serve(addr string, m *Metrics) (*Server, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	if host != "localhost" {
		ip, err := netip.ParseAddr(host)
		if err != nil || !ip.Unmap().IsLoopback() {
			return nil, fmt.Errorf("metrics: %s is not a loopback address", addr)
		}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", m.Handler())
	guard := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !hostguard.Local(r.Host, host) {
			http.Error(w, "this server answers only to its own address (127.0.0.1, [::1], localhost)", http.StatusMisdirectedRequest)
			return
		}
		mux.ServeHTTP(w, r)
	})
	s := &Server{srv: &http.Server{Handler: guard, ReadHeaderTimeout: 5 * time.Second}, ln: ln}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// Addr is the listening address.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops the listener.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// scrapeCollector reads mailbox lengths, restarts, sync lag and store size
// when scraped.
type scrapeCollector struct {
	src                                                       Sources
	mailboxDesc, restartsDesc, lagDesc, storeDesc, budgetDesc *prometheus.Desc
}

func newScrapeCollector(src Sources) *scrapeCollector {
	return &scrapeCollector{
		src:          src,
		mailboxDesc:  prometheus.NewDesc("lisa_actor_mailbox_length", "User messages waiting in an actor's mailbox.", []string{"actor"}, nil),
		restartsDesc: prometheus.NewDesc("lisa_actor_restarts_total", "Restarts of an actor since Lisa started.", []string{"actor"}, nil),
		lagDesc:      prometheus.NewDesc("lisa_sync_lag_seconds", "Seconds since the last successful /sync.", nil, nil),
		storeDesc:    prometheus.NewDesc("lisa_store_bytes", "Size of the Badger database on disk.", nil, nil),
		budgetDesc:   prometheus.NewDesc("lisa_llm_budget_remaining_tokens", "Tokens left today of llm.daily_token_budget (absent when no budget is set).", nil, nil),
	}
}

func (c *scrapeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.mailboxDesc
	ch <- c.restartsDesc
	ch <- c.lagDesc
	ch <- c.storeDesc
	ch <- c.budgetDesc
}

func (c *scrapeCollector) Collect(ch chan<- prometheus.Metric) {
	if c.src.Actors != nil {
		for _, a := range c.src.Actors() {
			ch <- prometheus.MustNewConstMetric(c.mailboxDesc, prometheus.GaugeValue, float64(a.Mailbox), a.ID)
			ch <- prometheus.MustNewConstMetric(c.restartsDesc, prometheus.CounterValue, float64(a.Restarts), a.ID)
		}
	}
	if c.src.LastSync != nil {
		if t := c.src.LastSync(); !t.IsZero() {
			ch <- prometheus.MustNewConstMetric(c.lagDesc, prometheus.GaugeValue, time.Since(t).Seconds())
		}
	}
	if c.src.StoreBytes != nil {
		ch <- prometheus.MustNewConstMetric(c.storeDesc, prometheus.GaugeValue, float64(c.src.StoreBytes()))
	}
	if c.src.BudgetRemaining != nil {
		if n, ok := c.src.BudgetRemaining(); ok {
			ch <- prometheus.MustNewConstMetric(c.budgetDesc, prometheus.GaugeValue, float64(n))
		}
	}
}
