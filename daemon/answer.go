package daemon

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/lisabot/lisa/actors/invocation"
	"github.com/lisabot/lisa/actors/tools"
	"github.com/lisabot/lisa/adapters/llm"
	"github.com/lisabot/lisa/adapters/logging"
	"github.com/lisabot/lisa/adapters/matrix"
	"github.com/lisabot/lisa/adapters/metrics"
	"github.com/lisabot/lisa/adapters/render"
	"github.com/lisabot/lisa/adapters/research"
	"github.com/lisabot/lisa/adapters/roomctx"
	"github.com/lisabot/lisa/adapters/search"
	"github.com/lisabot/lisa/adapters/web"
	"github.com/lisabot/lisa/budget"
	"github.com/lisabot/lisa/config"
	"github.com/lisabot/lisa/messages"
	"github.com/lisabot/lisa/messages/roompb"
)

// The adapters behind the answer's ports.
var (
	_ invocation.LLM            = (*llm.Client)(nil)
	_ invocation.ContextBuilder = (*roomctx.Builder)(nil)
	_ roomctx.Fetcher           = (*matrix.Client)(nil)
	_ roomctx.ThreadFetcher     = (*matrix.Client)(nil)
	_ roomctx.HistoryFetcher    = (*matrix.Client)(nil)
	_ roomctx.StateFetcher      = (*matrix.Client)(nil)
	_ invocation.FactsBuilder   = (*roomctx.Builder)(nil)
	_ invocation.FactsBuilder   = measuredContext{}
	_ invocation.ExcerptBuilder = (*roomctx.Builder)(nil)
	_ invocation.ExcerptBuilder = measuredContext{}
	_ invocation.Renderer       = renderer{}
	_ invocation.ToolSessions   = (*research.Service)(nil)
	_ invocation.URLKnower      = (*research.Service)(nil)
	_ invocation.ToolRunner     = (*tools.Client)(nil)
	_ tools.Handler             = (*research.Service)(nil)
	_ research.LimitedSearcher  = (*search.Client)(nil)
	_ research.Fetcher          = (*web.Fetcher)(nil)
	_ research.Converter        = Converter(nil)
)

// toolConcurrency bounds the concurrent calls of a tool in the pool
// (absent: up to the pool's workers). Conversion is the CPU-heavy one.
var toolConcurrency = map[string]int{research.ConvertTool: 2}

// newAnswerer builds the production answerer for res: its adapters wired
// to the ports of invocation.Answerer. The research tools are registered
// as handlers of pool, where their calls run; met, if not nil, measures
// the ports.
func newAnswerer(res config.Resolved, session *matrix.Client, log *slog.Logger, pool *tools.Client, met *metrics.Metrics) *invocation.Answerer {
	cfg := res.Config
	deps := research.Deps{
		Fetch: web.NewFetcher(web.Config{
			ConnectTimeout: cfg.Web.ConnectTimeout(), ReadTimeout: cfg.Web.ReadTimeout(), TotalTimeout: cfg.Web.TotalTimeout(),
			MaxRedirects: cfg.Web.MaxRedirects, MaxDownloadBytes: int64(cfg.Web.MaxDownloadBytes),
			UserAgent: cfg.Web.UserAgent, AllowPrivateAddresses: cfg.Web.AllowPrivateAddresses,
		}),
		Convert:     NewConverter(cfg, log),
		ValidateURL: web.ValidateURL,

		MaxToolOutputCharacters: cfg.Web.MaxToolOutputCharacters,
		MaxTotalArtifactBytes:   int64(cfg.Web.MaxTotalArtifactBytes),
		MaxSearchResults:        cfg.Search.MaxResults,
		// Pages convert as they arrive, beside the fetches still running
		// and the model's next turn, within the converter's limit.
		EarlyConversions: toolConcurrency[research.ConvertTool],
	}
	if cfg.Search.Enabled() {
		deps.Search = search.New(search.Config{Endpoint: cfg.Search.Endpoint, APIKey: res.SearchAPIKey.Reveal(),
			MaxResults: cfg.Search.MaxResults, Timeout: cfg.Search.Timeout(), UserAgent: cfg.Web.UserAgent})
	}
	sessions := research.New(deps)
	for _, spec := range sessions.Specs() {
		pool.Register(spec.Name, sessions, toolConcurrency[spec.Name])
	}
	var (
		contextPort invocation.ContextBuilder = roomctx.New(session, cfg.Matrix.UserID, roomctx.Limits{
			MaxEvents: cfg.Context.MaxEvents, MaxCharacters: cfg.Context.MaxCharacters,
			MaxEventCharacters: cfg.Context.MaxEventCharacters, MaxReplyDepth: cfg.Context.MaxReplyDepth,
			WindowStepEvents: cfg.Context.WindowStepEvents,
		}).WithLogger(log)
		llmPort  invocation.LLM        = llmClient(cfg, res.LLMAPIKey.Reveal(), logging.NewRedactor(io.Discard, res.Secrets()).Redact, met, log)
		toolPort invocation.ToolRunner = pool
	)
	if met != nil {
		contextPort = measuredContext{next: contextPort, m: met}
		llmPort = measuredLLM{next: llmPort, m: met}
		toolPort = measuredTools{next: toolPort, m: met}
	}
	// Outermost: a request refused for budget is neither sent nor counted
	// as a request.
	llmPort = budget.LLM(llmPort)
	return invocation.NewAnswerer(invocation.AnswererConfig{
		Context:  contextPort,
		LLM:      llmPort,
		Render:   renderer{r: render.New(), m: met},
		Sessions: sessions,
		Tools:    toolPort,
		Persona:  res.Persona,
		Limits: invocation.Limits{
			MaxIterations: cfg.LLM.MaxIterations, MaxToolCalls: cfg.LLM.MaxToolCalls,
			MaxParallelToolCalls: cfg.LLM.MaxParallelToolCalls,
			MaxRequestCharacters: cfg.LLM.MaxRequestCharacters, MaxResponseCharacters: cfg.LLM.MaxResponseCharacters,
			MaxToolOutputCharacters: cfg.Web.MaxToolOutputCharacters,
			ContextWindowTokens:     cfg.LLM.ContextWindowTokens, MaxOutputTokens: cfg.LLM.MaxOutputTokens,
		},
		GenericError:  cfg.Persona.GenericError,
		OverloadError: cfg.Persona.OverloadError,
		Now:           time.Now,
		Location:      personaLocation(cfg.Persona.TimeZone, log),
		Logger:        log,
	})
}

// personaLocation loads persona.time_zone, which config validation has
// already checked; should loading still fail, the prompt gives UTC only.
func personaLocation(name string, log *slog.Logger) *time.Location {
	loc, err := time.LoadLocation(name)
	if err != nil {
		log.Error("persona.time_zone cannot be loaded; the prompt gives UTC only", "time_zone", name)
		return time.UTC
	}
	return loc
}

// llmClient builds the LLM client: every failure's server message passes
// through redact, every attempt is counted by its outcome and kept for
// `lisa health` (see observeLLM).
func llmClient(cfg config.Config, key string, redact func(string) string, met *metrics.Metrics, log *slog.Logger) *llm.Client {
	return llm.New(llm.Config{
		OnRetry: met.LLMRetry, Logger: log, Redact: redact, OnAttempt: observeLLM(met),
		BaseURL: cfg.LLM.BaseURL, APIKey: key, Model: cfg.LLM.Model,
		MaxOutputTokens: cfg.LLM.MaxOutputTokens, Temperature: cfg.LLM.Temperature, TokenLimitParameter: cfg.LLM.TokenLimitParameter,
		ResponseFormat: cfg.LLM.ResponseFormat, TextToolCalls: cfg.LLM.TextToolCalls,
		Timeout: cfg.LLM.RequestTimeout(), MaxResponseCharacters: cfg.LLM.MaxResponseCharacters,
		// One request per room with an active invocation.
		HTTPClient: &http.Client{Timeout: cfg.LLM.RequestTimeout(), Transport: PooledTransport(cfg.Runtime.MaxConcurrentRooms + 2)},
	})
}

// refusingCauses are the LLM failures after which the server refuses
// every request until the configuration changes: a refused key, an
// unknown model, a refused parameter, any other refusal of the request
// (a wrong llm.base_url). `lisa health` is degraded from one of them
// until a request is answered. A request over the server's window and
// tools the model cannot take concern some requests, not every one.
var refusingCauses = map[messages.LLMCause]bool{
	messages.CauseUnauthorized: true, messages.CauseModelNotFound: true,
	messages.CauseParameterRefused: true, messages.CauseRejected: true,
}

// observeLLM returns what the LLM client tells of each attempt, or nil
// without metrics: a failure is counted by its cause, a refusal of every
// request kept for `lisa health` until an attempt is answered.
func observeLLM(met *metrics.Metrics) func(*messages.Error) {
	if met == nil {
		return nil
	}
	return func(err *messages.Error) {
		if err == nil {
			met.LLMAnswered()
			return
		}
		f := messages.LLMFailureOf(err)
		if f == nil || f.Cause == "" {
			met.LLMFailed(string(err.Code), 0, false)
			return
		}
		met.LLMFailed(string(f.Cause), f.Status, err.Permanent && refusingCauses[f.Cause])
	}
}

// renderer adapts the render adapter to the invocation's Renderer port;
// m, if not nil, counts the answer links shown as text.
type renderer struct {
	r *render.Renderer
	m *metrics.Metrics
}

func (r renderer) Render(reply messages.Reply) (messages.Rendered, error) {
	sources := make([]render.Source, len(reply.Sources))
	for i, s := range reply.Sources {
		sources[i] = render.Source{URL: s.URL, Title: s.Title}
	}
	out, err := r.r.RenderReply(render.Answer{Markdown: reply.Markdown, Sources: sources, InReplyTo: render.Invoking{
		EventID: string(reply.InReplyTo.EventID), Sender: string(reply.InReplyTo.Sender), Body: reply.InReplyTo.Body,
		ThreadRoot: string(reply.InReplyTo.ThreadRoot),
	}, CheckLinks: reply.CheckLinks, KnownURLs: reply.KnownURLs})
	if err != nil {
		return messages.Rendered{}, err
	}
	if r.m != nil && out.LinksUnverified > 0 {
		r.m.LinksUnverified(out.LinksUnverified)
	}
	return messages.Rendered{Content: out.Content, LinksUnverified: out.LinksUnverified}, nil
}

// measuredContext times the context phase.
type measuredContext struct {
	next invocation.ContextBuilder
	m    *metrics.Metrics
}

func (c measuredContext) Build(ctx context.Context, cand *roompb.Candidate) (string, error) {
	block, _, err := c.BuildWithFacts(ctx, cand)
	return block, err
}

// BuildWithFacts times the context phase, room facts included when the
// builder gives them.
func (c measuredContext) BuildWithFacts(ctx context.Context, cand *roompb.Candidate) (string, messages.RoomFacts, error) {
	start := time.Now()
	var (
		block string
		facts messages.RoomFacts
		err   error
	)
	if fb, ok := c.next.(invocation.FactsBuilder); ok {
		block, facts, err = fb.BuildWithFacts(ctx, cand)
	} else {
		block, err = c.next.Build(ctx, cand)
	}
	if err == nil {
		c.m.Phase("context", time.Since(start))
	}
	return block, facts, err
}

// BuildExcerpt times the context phase, the context in parts when the
// builder gives them.
func (c measuredContext) BuildExcerpt(ctx context.Context, cand *roompb.Candidate) (messages.Excerpt, messages.RoomFacts, error) {
	eb, ok := c.next.(invocation.ExcerptBuilder)
	if !ok {
		block, facts, err := c.BuildWithFacts(ctx, cand)
		return messages.Excerpt{Open: block}, facts, err
	}
	start := time.Now()
	ex, facts, err := eb.BuildExcerpt(ctx, cand)
	if err == nil {
		c.m.Phase("context", time.Since(start))
	}
	return ex, facts, err
}

// measuredLLM counts requests and times them.
type measuredLLM struct {
	next invocation.LLM
	m    *metrics.Metrics
}

func (l measuredLLM) Chat(ctx context.Context, req messages.ChatRequest) (messages.ChatResponse, error) {
	start := time.Now()
	resp, err := l.next.Chat(ctx, req)
	l.m.Phase("llm", time.Since(start))
	if err != nil {
		l.m.LLMRequest(string(messages.ErrorCode(err)))
	} else {
		l.m.LLMRequest("ok")
	}
	return resp, err
}

// measuredTools counts tool calls, results and output bytes, and times
// them (queueing in the pool included).
type measuredTools struct {
	next invocation.ToolRunner
	m    *metrics.Metrics
}

func (t measuredTools) Call(ctx context.Context, call *messages.ToolCall) (*messages.ToolResult, error) {
	start := time.Now()
	res, err := t.next.Call(ctx, call)
	t.m.Phase("tools", time.Since(start))
	switch {
	case err != nil:
		t.m.ToolCall(call.Name, string(messages.ToolTimeout), 0)
	case res == nil:
		t.m.ToolCall(call.Name, string(messages.ToolFailed), 0)
	case res.OK:
		t.m.ToolCall(call.Name, "ok", len(res.Content))
	default:
		t.m.ToolCall(call.Name, res.Code, len(res.Content))
	}
	return res, err
}

// ProductionInvoker builds Lisa's answerer for a session: room context,
// the LLM loop with the research tools in the tool pool, and the
// renderer, measured by the metrics.
func ProductionInvoker(res config.Resolved, log *slog.Logger) InvokerFactory {
	return func(session *matrix.Client) func(*tools.Client, *metrics.Metrics) invocation.Invoker {
		return func(pool *tools.Client, met *metrics.Metrics) invocation.Invoker {
			return newAnswerer(res, session, log, pool, met)
		}
	}
}
