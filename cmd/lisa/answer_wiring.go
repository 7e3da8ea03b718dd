package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"time"

	"github.com/lisabot/lisa/actors/orchestrate"
	"github.com/lisabot/lisa/adapters/llm"
	"github.com/lisabot/lisa/adapters/matrix"
	"github.com/lisabot/lisa/adapters/metrics"
	"github.com/lisabot/lisa/adapters/pandoc"
	"github.com/lisabot/lisa/adapters/render"
	"github.com/lisabot/lisa/adapters/research"
	"github.com/lisabot/lisa/adapters/roomctx"
	"github.com/lisabot/lisa/adapters/search"
	"github.com/lisabot/lisa/adapters/web"
	"github.com/lisabot/lisa/config"
	"github.com/lisabot/lisa/messages"
	"github.com/lisabot/lisa/messages/roompb"
)

// answerer produces one reply: the room's context around the invocation,
// the LLM loop with its tools, and the renderer. Fallbacks are the
// persona's own words from the configuration.
type answerer struct {
	metrics  *metrics.Metrics // nil: not measured
	context  *roomctx.Builder
	research *research.Deps // nil: no tools
	llm      orchestrate.LLM
	tools    []orchestrate.Tool
	persona  string
	limits   orchestrate.Limits
	render   *render.Renderer
	generic  string
	overload string
}

func (a answerer) Invoke(ctx context.Context, c *roompb.Candidate, _ uint32) ([]byte, error) {
	start := time.Now()
	block, err := a.context.Build(ctx, c)
	if err != nil {
		return nil, err
	}
	llm := a.llm
	if a.metrics != nil {
		a.metrics.Phase("context", time.Since(start))
		llm = measuredLLM{next: a.llm, m: a.metrics}
	}
	tools := append([]orchestrate.Tool(nil), a.tools...) // never write into a.tools: it is shared
	if a.research != nil {
		// A fresh session per invocation: its own artifacts, sources and
		// known URLs. fetch_web_page fetches only URLs known to it: those
		// of the invoking message and the room context, then of search
		// results and fetched pages.
		sess := research.NewSession(*a.research)
		sess.AllowURLsIn(c.GetBody())
		sess.AllowURLsIn(block)
		tools = append(tools, sess.Tools()...)
	}
	if a.metrics != nil {
		for i, t := range tools {
			tools[i] = measuredTool{next: t, m: a.metrics}
		}
	}
	ans, err := orchestrate.Run(ctx, llm, tools, orchestrate.Prompt{Persona: a.persona, ContextBlock: block}, a.limits)
	if err != nil {
		return nil, err // transient failures are retried; the last attempt's failure becomes generic_error
	}
	markdown := ans.Markdown
	switch ans.Fallback {
	case orchestrate.FallbackGeneric:
		markdown, ans.SourceURLs = a.generic, nil
	case orchestrate.FallbackOverload:
		markdown, ans.SourceURLs = a.overload, nil
	}
	sources := make([]render.Source, 0, len(ans.SourceURLs))
	for _, u := range ans.SourceURLs {
		sources = append(sources, render.Source{URL: u, Title: ans.Titles[u]})
	}
	invoking := render.Invoking{EventID: c.GetEventId(), Sender: c.GetSender(), Body: c.GetBody()}
	content, err := a.render.Render(render.Answer{Markdown: markdown, Sources: sources, InReplyTo: invoking})
	if err != nil {
		// Nothing renderable (say, an answer with no visible text):
		// asking the model again would likely repeat it. Answer with the
		// persona's error instead.
		content, err = a.render.Render(render.Answer{Markdown: a.generic, InReplyTo: invoking})
		if err != nil {
			return nil, &messages.Error{Code: messages.CodeInternal, Message: "reply could not be rendered", Permanent: true}
		}
	}
	return content, nil
}

// measuredLLM counts requests and times them.
type measuredLLM struct {
	next orchestrate.LLM
	m    *metrics.Metrics
}

func (l measuredLLM) Chat(ctx context.Context, req orchestrate.ChatRequest) (orchestrate.ChatResponse, error) {
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

// measuredTool counts calls, results and output bytes, and times them.
type measuredTool struct {
	next orchestrate.Tool
	m    *metrics.Metrics
}

func (t measuredTool) Spec() orchestrate.ToolSpec { return t.next.Spec() }

func (t measuredTool) Call(ctx context.Context, args json.RawMessage) orchestrate.ToolResult {
	start := time.Now()
	res := t.next.Call(ctx, args)
	t.m.Phase("tools", time.Since(start))
	result := "ok"
	if !res.OK {
		result = res.Code
	}
	t.m.ToolCall(t.next.Spec().Name, result, len(res.Content))
	return res
}

// newAnswerer builds the production answerer for res; its research tools
// run in pool, and it reports to met.
func newAnswerer(res config.Resolved, session *matrix.Client, log *slog.Logger, pool research.Runner, met *metrics.Metrics) answerer {
	cfg := res.Config
	deps := &research.Deps{
		Fetch: web.NewFetcher(web.Config{
			ConnectTimeout: cfg.Web.ConnectTimeout(), ReadTimeout: cfg.Web.ReadTimeout(), TotalTimeout: cfg.Web.TotalTimeout(),
			MaxRedirects: cfg.Web.MaxRedirects, MaxDownloadBytes: int64(cfg.Web.MaxDownloadBytes),
			UserAgent: cfg.Web.UserAgent, AllowPrivateAddresses: cfg.Web.AllowPrivateAddresses,
		}),
		Convert: pandoc.New(pandoc.Config{Timeout: cfg.Web.PandocTimeout(), MaxOutputBytes: 4 * cfg.Web.MaxToolOutputCharacters, Logger: log}),
		Runner:  pool,

		MaxToolOutputCharacters: cfg.Web.MaxToolOutputCharacters,
		MaxTotalArtifactBytes:   int64(cfg.Web.MaxTotalArtifactBytes),
	}
	if cfg.Search.Enabled() {
		deps.Search = search.New(search.Config{Endpoint: cfg.Search.Endpoint, APIKey: res.SearchAPIKey.Reveal(),
			MaxResults: cfg.Search.MaxResults, Timeout: cfg.Search.Timeout(), UserAgent: cfg.Web.UserAgent})
	}
	return answerer{
		metrics:  met,
		research: deps,
		context: roomctx.New(session, cfg.Matrix.UserID, roomctx.Limits{
			MaxEvents: cfg.Context.MaxEvents, MaxCharacters: cfg.Context.MaxCharacters,
			MaxEventCharacters: cfg.Context.MaxEventCharacters, MaxReplyDepth: cfg.Context.MaxReplyDepth,
		}).WithLogger(log),
		llm:     llmClient(cfg, res.LLMAPIKey.Reveal(), met),
		persona: res.Persona,
		limits: orchestrate.Limits{
			MaxIterations: cfg.LLM.MaxIterations, MaxToolCalls: cfg.LLM.MaxToolCalls,
			MaxRequestCharacters: cfg.LLM.MaxRequestCharacters, MaxResponseCharacters: cfg.LLM.MaxResponseCharacters,
			MaxToolOutputCharacters: cfg.Web.MaxToolOutputCharacters,
		},
		render:   render.New(),
		generic:  cfg.Persona.GenericError,
		overload: cfg.Persona.OverloadError,
	}
}

func llmClient(cfg config.Config, key string, met *metrics.Metrics) *llm.Client {
	return llm.New(llm.Config{
		OnRetry: met.LLMRetry,
		BaseURL: cfg.LLM.BaseURL, APIKey: key, Model: cfg.LLM.Model,
		MaxOutputTokens: cfg.LLM.MaxOutputTokens, Temperature: float32(cfg.LLM.Temperature),
		Timeout: cfg.LLM.RequestTimeout(), MaxResponseCharacters: cfg.LLM.MaxResponseCharacters,
		// One request per room with an active invocation.
		HTTPClient: &http.Client{Timeout: cfg.LLM.RequestTimeout(), Transport: pooledTransport(cfg.Runtime.MaxConcurrentRooms + 2)},
	})
}
