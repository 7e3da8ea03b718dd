package invocation

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"

	"github.com/lisabot/lisa/messages"
)

// Fallback reasons, logged with the fallback they select.
const (
	reasonMaxIterations = "max_iterations"
	reasonMaxToolCalls  = "max_tool_calls"
	reasonRequestSize   = "request_too_large"
	reasonWindow        = "context_window"
	reasonInvalidAnswer = "invalid_answer"
	reasonUnrenderable  = "unrenderable"
)

// toolOK is the outcome counted for a successful tool call.
const toolOK = "ok"

// codeFinalNotJSON is logged (and counted in the attempt's line) when the
// model's prose is posted because it never sent the answer contract.
const codeFinalNotJSON = "final_not_json"

// attempt records what one attempt did — LLM requests, tool calls by
// outcome, reported tokens, a fallback — for the attempt's final log
// line, and logs each tool failure and fallback as it happens, with its
// code and never a URL, a body or a prompt. It travels in the context of
// the attempt (see withAttempt); its methods do nothing on a nil
// receiver, so code run without one (tests, other callers) need not
// care. Safe for concurrent use.
type attempt struct {
	log *slog.Logger

	mu               sync.Mutex
	iterations       int
	tools            map[string]int // outcome ("ok" or failure code) -> calls
	promptTokens     int
	completionTokens int
	usageReported    bool
	fallback         messages.Fallback
	reason           string
	// form is how the final answer came (formJSON, formProse, …); ""
	// without one.
	form          string
	hostSources   bool
	proseAnswers  int
	textCalls     int
	eventsDropped int
	toolsCut      bool
}

// attemptKey keys the attempt in a context.
type attemptKey struct{}

// withAttempt returns ctx carrying a new attempt that logs to log.
func withAttempt(ctx context.Context, log *slog.Logger) (context.Context, *attempt) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	a := &attempt{log: log, tools: map[string]int{}}
	return context.WithValue(ctx, attemptKey{}, a), a
}

// attemptFrom returns the attempt ctx carries, or nil.
func attemptFrom(ctx context.Context) *attempt {
	a, _ := ctx.Value(attemptKey{}).(*attempt)
	return a
}

// llmResponse counts one answered LLM request and its reported usage.
func (a *attempt) llmResponse(u messages.TokenUsage) {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.iterations++
	if u.Reported() {
		a.usageReported = true
		a.promptTokens += u.PromptTokens
		a.completionTokens += u.CompletionTokens
	}
}

// toolResult counts one tool call by outcome and logs a failure with its
// code.
func (a *attempt) toolResult(ctx context.Context, tool string, res messages.ToolResult) {
	if a == nil {
		return
	}
	outcome := toolOK
	if !res.OK {
		outcome = res.Code
		if outcome == "" {
			outcome = CodeToolFailed
		}
		a.log.WarnContext(ctx, "tool call failed", "tool", clip(tool, maxNameRunes), "code", outcome, "retryable", res.Retryable)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.tools[outcome]++
}

// fellBack records and logs that the answer is replaced by the persona's
// error f, and why.
func (a *attempt) fellBack(ctx context.Context, f messages.Fallback, reason string) {
	if a == nil {
		return
	}
	a.log.WarnContext(ctx, "answer replaced by the persona's error", "fallback", f.String(), "reason", reason)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.fallback, a.reason = f, reason
}

// textToolCalls counts tool calls read from the model's text.
func (a *attempt) textToolCalls(n int) {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.textCalls += n
}

// finalNotJSON records and logs that the model answered in prose even
// after the repair request, and that its prose is posted.
func (a *attempt) finalNotJSON(ctx context.Context) {
	if a == nil {
		return
	}
	a.log.WarnContext(ctx, "the model answered in prose after the repair request; posting its text as the answer", "code", codeFinalNotJSON)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.proseAnswers++
}

// answered records how the final answer came and whether the host listed
// the sources.
func (a *attempt) answered(form string, sources int) {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.form = form
	a.hostSources = form != formJSON && sources > 0
}

// trimmed records that a request left out the excerpt's oldest events,
// or shortened tool output, to fit the model's window (the most of each
// over the attempt).
func (a *attempt) trimmed(events int, toolsCut bool) {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.eventsDropped = max(a.eventsDropped, events)
	a.toolsCut = a.toolsCut || toolsCut
}

// logAttrs returns the counts for the final log line: iterations, tool
// calls in all and by outcome, the fallback if any, and the tokens if the
// server reported them.
// counts returns the attempt's LLM requests and tool calls by outcome,
// for the event trail.
func (a *attempt) counts() messages.AttemptStats {
	if a == nil {
		return messages.AttemptStats{}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return messages.AttemptStats{LLMRequests: a.iterations, Tools: maps.Clone(a.tools)}
}

func (a *attempt) logAttrs() []any {
	a.mu.Lock()
	defer a.mu.Unlock()
	calls, failed := 0, 0
	outcomes := make([]any, 0, len(a.tools))
	for _, k := range slices.Sorted(maps.Keys(a.tools)) {
		calls += a.tools[k]
		if k != toolOK {
			failed += a.tools[k]
		}
		outcomes = append(outcomes, slog.Int(k, a.tools[k]))
	}
	attrs := []any{"iterations", a.iterations, "tool_calls", calls, "tool_calls_failed", failed, slog.Group("tool_outcomes", outcomes...)}
	if a.fallback != messages.FallbackNone {
		attrs = append(attrs, "fallback", a.fallback.String(), "fallback_reason", a.reason)
	}
	if a.form != "" {
		attrs = append(attrs, "answer_form", a.form)
	}
	if a.hostSources {
		attrs = append(attrs, "sources_by_host", true)
	}
	if a.proseAnswers > 0 {
		attrs = append(attrs, codeFinalNotJSON, a.proseAnswers)
	}
	if a.textCalls > 0 {
		attrs = append(attrs, "text_tool_calls", a.textCalls)
	}
	if a.eventsDropped > 0 || a.toolsCut {
		attrs = append(attrs, "window_events_dropped", a.eventsDropped, "window_tool_output_cut", a.toolsCut)
	}
	if a.usageReported {
		attrs = append(attrs, "prompt_tokens", a.promptTokens, "completion_tokens", a.completionTokens)
	}
	return attrs
}
