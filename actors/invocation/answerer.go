package invocation

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/lisabot/lisa/messages"
	"github.com/lisabot/lisa/messages/roompb"
)

// AnswererConfig is what an [Answerer] is made of: its ports, the persona
// and the loop's limits.
type AnswererConfig struct {
	// Context builds the room context block (required).
	Context ContextBuilder
	// LLM answers chat requests (required).
	LLM LLM
	// Render makes the reply content (required).
	Render Renderer
	// Sessions, when set, gives each invocation its session tools, whose
	// calls run through Tools.
	Sessions ToolSessions
	// Tools runs the session tools' calls (the tool pool); required when
	// Sessions is set.
	Tools ToolRunner
	// Persona is the operator's persona text.
	Persona string
	// Limits bounds each run of the LLM loop.
	Limits Limits
	// GenericError and OverloadError are the persona's in-character
	// replies for FallbackGeneric and FallbackOverload.
	GenericError, OverloadError string
	// Now is the clock the prompt's date and time are read from; nil
	// means time.Now.
	Now func() time.Time
	// Location is the persona's time zone (persona.time_zone), given to
	// the model besides UTC; nil means UTC only.
	Location *time.Location
	// Logger receives the one warning that research is off because the
	// model or server cannot take tools; nil logs nothing.
	Logger *slog.Logger
}

// Answerer produces the reply to one invocation: the room context, the
// LLM loop with the invocation's own tools, and the rendered reply, with
// the persona's own words for the fallbacks. It implements [Invoker] and
// is safe for concurrent use.
type Answerer struct {
	cfg AnswererConfig
	// est learns the model's bytes per token from every invocation.
	est TokenEstimator
	// toolsOff is set once the server has said that the model cannot
	// take tools: from then on, questions are answered without them.
	toolsOff atomic.Bool
}

// NewAnswerer returns an Answerer over cfg's ports.
func NewAnswerer(cfg AnswererConfig) *Answerer {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Answerer{cfg: cfg}
}

// Invoke implements [Invoker]. Failures to build the context, to open a
// tool session and of the LLM are returned for the invocation layer to
// retry or report; a run that ends in a fallback, or an answer with
// nothing renderable, yields the persona's error as the reply.
func (a *Answerer) Invoke(ctx context.Context, c *roompb.Candidate, _ uint32) ([]byte, error) {
	excerpt, room, err := a.buildContext(ctx, c)
	if err != nil {
		return nil, err
	}
	block := excerpt.Block()
	var tools []Tool
	known := func() []string { return nil }
	if s := a.cfg.Sessions; s != nil {
		// A fresh session per invocation: its own artifacts, sources and
		// known URLs. fetch_web_page fetches only URLs known to it: those
		// of the invoking message and the room context, then of search
		// results and fetched pages. The answer's links are checked
		// against the same URLs, so the session is opened even when the
		// model takes no tools.
		id, err := s.Open(c.GetBody(), block)
		if err != nil {
			return nil, &messages.Error{Code: messages.CodeInternal, Message: "no tool session available", Err: err}
		}
		defer s.Close(id)
		if k, ok := s.(URLKnower); ok {
			known = func() []string { return k.KnownURLs(id) }
		}
		if a.cfg.Tools != nil && !a.toolsOff.Load() {
			for _, spec := range s.Specs() {
				tools = append(tools, sessionTool{spec: spec, run: a.cfg.Tools, session: id})
			}
		}
	}
	facts := Facts{Now: a.cfg.Now(), Location: a.cfg.Location, Room: room}
	lim := a.cfg.Limits
	lim.Estimator = &a.est
	prompt := Prompt{Persona: a.cfg.Persona, Excerpt: &excerpt, Facts: facts}
	ans, err := Run(ctx, a.cfg.LLM, tools, prompt, lim)
	if err != nil && len(tools) > 0 && messages.LLMCauseOf(err) == messages.CauseToolsUnsupported {
		// The model cannot take tools: answer from the room alone, with a
		// system prompt that offers none, and offer none from now on.
		a.researchOff(ctx)
		ans, err = Run(ctx, a.cfg.LLM, nil, prompt, lim)
	}
	if err != nil {
		return nil, err // transient failures are retried; the last attempt's failure becomes generic_error
	}
	if ans.Fallback == messages.FallbackNone {
		ans.ToolURLs = append(ans.ToolURLs, known()...)
	}
	return a.render(ctx, c, ans)
}

// researchOff turns the tools off for good (until a restart), with one
// warning that says why and what to change.
func (a *Answerer) researchOff(ctx context.Context) {
	if a.toolsOff.Swap(true) {
		return
	}
	a.cfg.Logger.WarnContext(ctx, "research is off: the LLM server says the model cannot take tools; questions are answered from the room alone until Lisa restarts",
		"code", messages.CodeLLMRejected, "cause", messages.CauseToolsUnsupported,
		"fix", "use a model whose chat template supports tools (Ollama: one that lists the tools capability), start llama-server with --jinja, or vLLM with --enable-auto-tool-choice --tool-call-parser …")
}

// buildContext builds the context in parts when the builder can give
// them, else as one block, with the room facts when the builder can give
// them.
func (a *Answerer) buildContext(ctx context.Context, c *roompb.Candidate) (messages.Excerpt, messages.RoomFacts, error) {
	if eb, ok := a.cfg.Context.(ExcerptBuilder); ok {
		return eb.BuildExcerpt(ctx, c)
	}
	if fb, ok := a.cfg.Context.(FactsBuilder); ok {
		block, room, err := fb.BuildWithFacts(ctx, c)
		return messages.Excerpt{Open: block}, room, err
	}
	block, err := a.cfg.Context.Build(ctx, c)
	return messages.Excerpt{Open: block}, messages.RoomFacts{}, err
}

// render makes the reply content for ans, replacing fallbacks and
// unrenderable answers with the persona's texts. The model's answer has
// its links checked against the URLs of the invocation (ans.ToolURLs,
// which Invoke completes with the session's known URLs); the persona's
// texts are the operator's and are not checked.
func (a *Answerer) render(ctx context.Context, c *roompb.Candidate, ans messages.Answer) ([]byte, error) {
	markdown, check := ans.Markdown, ans.Fallback == messages.FallbackNone
	switch ans.Fallback {
	case messages.FallbackGeneric:
		markdown, ans.SourceURLs = a.cfg.GenericError, nil
	case messages.FallbackOverload:
		markdown, ans.SourceURLs = a.cfg.OverloadError, nil
	}
	sources := make([]messages.Source, 0, len(ans.SourceURLs))
	for _, u := range ans.SourceURLs {
		sources = append(sources, messages.Source{URL: u, Title: ans.Titles[u]})
	}
	invoking := messages.Invoking{EventID: messages.EventID(c.GetEventId()), Sender: messages.UserID(c.GetSender()), Body: c.GetBody(),
		ThreadRoot: messages.EventID(c.GetThreadRootEventId())}
	reply := messages.Reply{Markdown: markdown, Sources: sources, InReplyTo: invoking, CheckLinks: check}
	if check {
		reply.KnownURLs = ans.ToolURLs
	}
	out, err := a.cfg.Render.Render(reply)
	if err != nil {
		// Nothing renderable (say, an answer with no visible text):
		// asking the model again would likely repeat it. Answer with the
		// persona's error instead.
		attemptFrom(ctx).fellBack(ctx, messages.FallbackGeneric, reasonUnrenderable)
		out, err = a.cfg.Render.Render(messages.Reply{Markdown: a.cfg.GenericError, InReplyTo: invoking})
		if err != nil {
			return nil, &messages.Error{Code: messages.CodeInternal, Message: "reply could not be rendered", Permanent: true}
		}
		return out.Content, nil
	}
	if check {
		attemptFrom(ctx).linksChecked(out.LinksUnverified)
	}
	return out.Content, nil
}

// sessionTool is one tool of an invocation's session: its calls go to
// the ToolRunner (the tool pool) as typed messages naming the session.
type sessionTool struct {
	spec    messages.ToolSpec
	run     ToolRunner
	session string
}

// Spec implements Tool.
func (t sessionTool) Spec() messages.ToolSpec { return t.spec }

// Call implements Tool: the invocation's context bounds the call, and
// its deadline travels with it.
func (t sessionTool) Call(ctx context.Context, args json.RawMessage) messages.ToolResult {
	call := &messages.ToolCall{Name: t.spec.Name, Args: args, Session: t.session}
	if d, ok := ctx.Deadline(); ok {
		call.Deadline = d
	}
	res, err := t.run.Call(ctx, call)
	if err != nil {
		// No result came back; the loop logs the timeout code.
		return *messages.ToolFailure(messages.ToolTimeout, "the tool did not finish in time", false)
	}
	if res == nil {
		return *messages.ToolFailure(messages.ToolFailed, "the tool failed unexpectedly", false)
	}
	return *res
}
