package invocation

import (
	"context"
	"slices"
	"sync"

	"github.com/lisabot/lisa/messages"
)

// Estimates of the model's tokens, from bytes.
const (
	// InitialBytesPerToken is the estimate before the server has reported
	// any prompt_tokens: conservative (real tokenizers give 3–4.5 bytes
	// per token for English and markup, 2–3 for most other scripts), so
	// that the first request of a process already fits.
	InitialBytesPerToken = 2.5
	// minBytesPerToken and maxBytesPerToken bound what is learned.
	minBytesPerToken = 0.8
	maxBytesPerToken = 6.0
	// learnedMargin scales a learned ratio down, for the variance between
	// one conversation's text and the next.
	learnedMargin = 0.9
	// messageOverheadTokens stands for what a chat template adds around
	// each message (role markers, separators).
	messageOverheadTokens = 8
	// toolOverheadTokens stands for what a template adds around each
	// offered tool, beyond its name, description and schema.
	toolOverheadTokens = 16
	// fixedOverheadTokens stands for the template's fixed parts and a
	// structured-output schema.
	fixedOverheadTokens = 64
	// cappedFraction of the budget: a reported prompt_tokens at or above
	// it may be a server's silent cut (Ollama reports num_ctx when it
	// truncated), so it is read as "at least", never to relax.
	cappedFraction = 0.95
)

// TokenEstimator estimates the prompt tokens of a request from its bytes,
// starting from [InitialBytesPerToken] and corrected by the prompt_tokens
// the server reports for the requests it answered. One estimator serves
// every invocation of a process (the model's tokenizer does not change);
// it is safe for concurrent use. The zero value is ready to use.
type TokenEstimator struct {
	mu sync.Mutex
	// learned is the bytes per token measured on the last request whose
	// count could be trusted; 0 before any.
	learned float64
}

// ratio returns the bytes per token to estimate with.
func (e *TokenEstimator) ratio() float64 {
	if e == nil {
		return InitialBytesPerToken
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.learned == 0 {
		return InitialBytesPerToken
	}
	return e.learned * learnedMargin
}

// Tokens estimates the prompt tokens of a request of the given bytes,
// messages and tools.
func (e *TokenEstimator) Tokens(bytes, messages, tools int) int {
	return int(float64(bytes)/e.ratio()+0.999) + messages*messageOverheadTokens + tools*toolOverheadTokens + fixedOverheadTokens
}

// Observe learns from a request of the given bytes that the server
// counted promptTokens. A count at or near budget may have been cut by
// the server, so it can only tighten the estimate; below that, it is the
// measurement. Overheads are left out: the server's count includes the
// template, which the learned ratio then absorbs.
func (e *TokenEstimator) Observe(bytes, promptTokens, budget int) {
	if e == nil || promptTokens <= 0 || bytes <= 0 {
		return
	}
	observed := float64(bytes) / float64(promptTokens)
	observed = min(max(observed, minBytesPerToken), maxBytesPerToken)
	e.mu.Lock()
	defer e.mu.Unlock()
	current := e.learned
	if current == 0 {
		current = InitialBytesPerToken / learnedMargin
	}
	if budget > 0 && float64(promptTokens) >= cappedFraction*float64(budget) {
		// The true count may be higher than reported: never relax, and
		// tighten by a fifth beyond what was seen.
		e.learned = max(min(current, observed)*0.8, minBytesPerToken)
		return
	}
	e.learned = observed
}

// requestBytes counts the bytes of a request that become prompt tokens:
// every message's content, tool call IDs, names and arguments, and the
// tool specs.
func requestBytes(msgs []messages.ChatMessage, specs []messages.ToolSpec) int {
	n := 0
	for _, m := range msgs {
		n += len(m.Content) + len(m.ToolCallID)
		for _, c := range m.ToolCalls {
			n += len(c.ID) + len(c.Name) + len(c.Arguments)
		}
	}
	for _, s := range specs {
		n += len(s.Name) + len(s.Description) + len(s.Parameters)
	}
	return n
}

// fit returns the messages of the next request, made to fit the model's
// window: when the whole conversation would not, the room excerpt's
// oldest events are left out first (never the last, the invoking
// message), then every tool result is shortened to one common length.
// The system prompt, the facts and the invoking message always stay. It
// reports false when even that does not fit. Without a window (Limits
// say none) nothing is left out.
func (r *run) fit(ctx context.Context) ([]messages.ChatMessage, bool) {
	specs := r.reg.specs
	full := r.lim.MaxToolOutputCharacters
	budget := r.budget()
	if r.lim.ContextWindowTokens <= 0 {
		return r.assemble(0, full), true
	}
	events := r.excerpt.Events
	total := len(r.system) + len(r.intro) + len(r.excerpt.Open) + len(r.excerpt.Close) + len(r.tail) + requestBytes(nil, specs)
	for _, e := range events {
		total += len(e)
	}
	for _, t := range r.turns {
		total += turnBytes(t, full)
	}
	count := 2 + len(r.turns)
	tokens := func(bytes int) int { return r.est.Tokens(bytes, count, len(specs)) }
	dropped := 0
	for dropped < len(events)-1 && tokens(total) > budget {
		total -= len(events[dropped])
		dropped++
	}
	limit := full
	if tokens(total) > budget {
		toolFull := 0
		for _, t := range r.turns {
			if t.result != nil {
				toolFull += turnBytes(t, full)
			}
		}
		fits := func(c int) bool {
			n := total - toolFull
			for _, t := range r.turns {
				if t.result != nil {
					n += turnBytes(t, c)
				}
			}
			return tokens(n) <= budget
		}
		if toolFull == 0 || !fits(0) {
			return nil, false
		}
		lo, hi := 0, full // fits(lo) holds, fits(hi) does not
		for hi-lo > 1 {
			mid := (lo + hi) / 2
			if fits(mid) {
				lo = mid
			} else {
				hi = mid
			}
		}
		limit = lo
	}
	if dropped > 0 || limit < full {
		attemptFrom(ctx).trimmed(dropped, limit < full)
	}
	return r.assemble(dropped, limit), true
}

// turnBytes counts the bytes of one later message, its tool result cut
// to limit characters.
func turnBytes(t turn, limit int) int {
	n := len(t.msg.Content) + len(t.msg.ToolCallID)
	if t.result != nil {
		n += len(encodeResult(*t.result, t.sources, limit))
	}
	for _, c := range t.msg.ToolCalls {
		n += len(c.ID) + len(c.Name) + len(c.Arguments)
	}
	return n
}

// assemble builds the request's messages, the excerpt without its first
// dropped events and every tool result cut to limit characters.
func (r *run) assemble(dropped, limit int) []messages.ChatMessage {
	ex := r.excerpt
	ex.Events = ex.Events[dropped:]
	msgs := make([]messages.ChatMessage, 0, 2+len(r.turns))
	msgs = append(msgs,
		messages.ChatMessage{Role: messages.RoleSystem, Content: r.system},
		messages.ChatMessage{Role: messages.RoleUser, Content: r.intro + ex.Block() + r.tail})
	for _, t := range r.turns {
		m := t.msg
		m.ToolCalls = slices.Clone(m.ToolCalls)
		if t.result != nil {
			m.Content = encodeResult(*t.result, t.sources, limit)
		}
		msgs = append(msgs, m)
	}
	return msgs
}
