package invocation

import (
	"context"
	"encoding/json"
	"time"

	"github.com/lisabot/lisa/messages"
	"github.com/lisabot/lisa/messages/roompb"
)

// The ports of the answer. Each is implemented outside actors/ (by an
// adapter, wired in cmd/lisa) or by a fake in tests; the data crossing
// them lives in package messages.

// ContextBuilder builds the bounded, escaped room context around an
// invocation, labelled as untrusted data.
type ContextBuilder interface {
	// Build returns the context block for the invoking event of c.
	Build(ctx context.Context, c *roompb.Candidate) (string, error)
}

// FactsBuilder is an optional capability of a [ContextBuilder]: the
// context block together with facts about the room for the prompt.
type FactsBuilder interface {
	// BuildWithFacts returns the context block for the invoking event of
	// c and the room's facts; facts it cannot learn are left empty.
	BuildWithFacts(ctx context.Context, c *roompb.Candidate) (string, messages.RoomFacts, error)
}

// ExcerptBuilder is an optional capability of a [ContextBuilder]: the
// context in parts (so that a request can leave out its oldest events
// when it would not fit the model's window) with the room's facts.
type ExcerptBuilder interface {
	// BuildExcerpt returns the context for the invoking event of c in
	// parts, the invoking message last, and the room's facts.
	BuildExcerpt(ctx context.Context, c *roompb.Candidate) (messages.Excerpt, messages.RoomFacts, error)
}

// LLM sends one chat-completion request. Implementations classify their
// failures as *messages.Error values and must be safe for concurrent use.
type LLM interface {
	// Chat returns the model's reply to req.
	Chat(ctx context.Context, req messages.ChatRequest) (messages.ChatResponse, error)
}

// Renderer turns an answer into the exact content of the reply event.
type Renderer interface {
	// Render returns the reply content and what the renderer changed in
	// it (links shown as text, see messages.Reply.CheckLinks), or an
	// error when nothing renderable is left (say, an answer with no
	// visible text).
	Render(r messages.Reply) (messages.Rendered, error)
}

// ToolSessions keeps the per-invocation state of the tools that need one
// (research: artifact store, sources, known URLs). Every invocation opens
// its own session and closes it when done; tool calls name it in
// [messages.ToolCall.Session]. Implementations must be safe for
// concurrent use.
type ToolSessions interface {
	// Specs lists the session tools, in the order offered to the model.
	Specs() []messages.ToolSpec
	// Open starts a session. known are the texts given to the model as
	// conversation (the invoking message and the room context), never
	// text the model wrote. It fails when too many sessions are open.
	Open(known ...string) (string, error)
	// Close ends the session id and frees its state.
	Close(id string)
}

// URLKnower is an optional capability of a [ToolSessions]: the URLs
// known to a session — those of the texts it was opened with and of its
// successful tool results (search results, fetched pages and the links
// in them). The answer's links are verified against them.
type URLKnower interface {
	// KnownURLs returns the URLs known to session id; none for a session
	// that is not open.
	KnownURLs(id string) []string
}

// ToolRunner runs one tool call, typically in the tool pool, and waits
// for its result. It must not be called from inside an actor's Receive.
// An error means no result came back (ctx ended, or the pool could not be
// reached); tool failures are results.
type ToolRunner interface {
	// Call runs call and returns its result.
	Call(ctx context.Context, call *messages.ToolCall) (*messages.ToolResult, error)
}

// Tool is one host-side capability offered to the model in the LLM loop.
// Implementations must be safe for concurrent use by several runs.
type Tool interface {
	// Spec describes the tool; Run reads it once per run.
	Spec() messages.ToolSpec
	// Call runs the tool with a JSON object of arguments that Run has
	// already checked against the basic shape of Spec().Parameters.
	// Failures are reported in the result, not by panicking.
	Call(ctx context.Context, args json.RawMessage) messages.ToolResult
}

// Limits bounds one run of the LLM loop. A zero or negative field takes
// its default.
type Limits struct {
	// MaxIterations bounds LLM requests, including a repair request.
	MaxIterations int
	// MaxToolCalls bounds tool calls, including invalid and failed ones.
	MaxToolCalls int
	// MaxParallelToolCalls bounds the calls of one model turn that run
	// at once; 1 runs them one after another.
	MaxParallelToolCalls int
	// MaxRequestCharacters bounds the characters of one request: every
	// message's content, every tool call's name and arguments, and the
	// tool specs.
	MaxRequestCharacters int
	// MaxResponseCharacters bounds the final answer's markdown.
	MaxResponseCharacters int
	// MaxToolOutputCharacters bounds the content of one tool result.
	MaxToolOutputCharacters int
	// ContextWindowTokens is the model's window: every request's prompt
	// stays within it less MaxOutputTokens, as Estimator estimates it. A
	// negative value turns the check off.
	ContextWindowTokens int
	// MaxOutputTokens is the room kept in the window for the answer
	// (llm.max_output_tokens).
	MaxOutputTokens int
	// Estimator estimates prompt tokens; share one between runs so that
	// what it learns from the server's counts carries over. Nil starts
	// from InitialBytesPerToken every time.
	Estimator *TokenEstimator
}

// Defaults for the fields of [Limits].
const (
	DefaultMaxIterations           = 8
	DefaultMaxToolCalls            = 6
	DefaultMaxParallelToolCalls    = 4
	DefaultMaxRequestCharacters    = 120000
	DefaultMaxResponseCharacters   = 12000
	DefaultMaxToolOutputCharacters = 30000
	DefaultContextWindowTokens     = 8192
	DefaultMaxOutputTokens         = 1024
)

// withDefaults replaces non-positive fields with their defaults.
func (l Limits) withDefaults() Limits {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&l.MaxIterations, DefaultMaxIterations)
	def(&l.MaxToolCalls, DefaultMaxToolCalls)
	def(&l.MaxParallelToolCalls, DefaultMaxParallelToolCalls)
	def(&l.MaxRequestCharacters, DefaultMaxRequestCharacters)
	def(&l.MaxResponseCharacters, DefaultMaxResponseCharacters)
	def(&l.MaxToolOutputCharacters, DefaultMaxToolOutputCharacters)
	if l.ContextWindowTokens == 0 {
		l.ContextWindowTokens = DefaultContextWindowTokens
	}
	def(&l.MaxOutputTokens, DefaultMaxOutputTokens)
	return l
}

// Prompt is the invocation-specific input to a run.
type Prompt struct {
	// Persona is the operator's persona text; it is placed after the host
	// policy and cannot override it.
	Persona string
	// ContextBlock is the bounded room context built by the context
	// builder; it is given to the model as untrusted data. Excerpt, when
	// set, replaces it with the same block in parts, so that its oldest
	// events can be left out when a request would not fit the window.
	ContextBlock string
	// Excerpt is the room context in parts (see ContextBlock).
	Excerpt *messages.Excerpt
	// Facts are given to the model ahead of the context block.
	Facts Facts
}

// excerpt returns the room context in parts: Excerpt, or ContextBlock as
// one part that cannot be shortened.
func (p Prompt) excerpt() messages.Excerpt {
	if p.Excerpt != nil {
		return *p.Excerpt
	}
	return messages.Excerpt{Open: p.ContextBlock}
}

// Facts are what the model is told about the moment and the room, in
// the first user message.
type Facts struct {
	// Now is the current time; zero leaves the date and time out.
	Now time.Time
	// Location is the persona's time zone, given besides UTC; nil or UTC
	// gives UTC only.
	Location *time.Location
	// Room holds the room's name and topic (untrusted) and Lisa's display
	// name.
	Room messages.RoomFacts
}
