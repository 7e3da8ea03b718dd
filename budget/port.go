package budget

import (
	"context"
	"errors"

	"github.com/lisabot/lisa/messages"
	"github.com/lisabot/lisa/messages/roompb"
)

// LLMPort sends one chat-completion request (invocation.LLM).
type LLMPort interface {
	Chat(ctx context.Context, req messages.ChatRequest) (messages.ChatResponse, error)
}

// InvokerPort answers one attempt of an invocation (invocation.Invoker).
type InvokerPort interface {
	Invoke(ctx context.Context, c *roompb.Candidate, attempt uint32) ([]byte, error)
}

// scope is what an invocation's requests are counted against.
type scope struct {
	meter   *Meter
	room    string
	event   string
	attempt uint32
}

type scopeKey struct{}

func scopeFrom(ctx context.Context) *scope {
	s, _ := ctx.Value(scopeKey{}).(*scope)
	return s
}

// Invoker wraps next so that the LLM requests of an attempt are counted
// and checked by m (through [LLM]), and checks the budgets before the
// attempt starts: a question arriving when a budget is spent costs no
// context fetch and no request. An attempt that ends in the room's budget
// notice of the day is answered with notice(c), the rendered
// persona.budget_error; a refused one fails with
// messages.CodeRefusedBudget.
func Invoker(next InvokerPort, m *Meter, notice func(*roompb.Candidate) []byte) InvokerPort {
	return invokerFunc(func(ctx context.Context, c *roompb.Candidate, attempt uint32) ([]byte, error) {
		ctx = context.WithValue(ctx, scopeKey{}, &scope{meter: m, room: c.GetRoomId(), event: c.GetEventId(), attempt: attempt})
		var err error
		if m.Limited() {
			err = m.Check(ctx, c.GetRoomId(), c.GetEventId())
		}
		var content []byte
		if err == nil {
			content, err = next.Invoke(ctx, c, attempt)
		}
		var le *messages.Error
		if errors.As(err, &le) && le.Code == messages.CodeBudgetExhausted {
			return notice(c), nil
		}
		return content, err
	})
}

type invokerFunc func(ctx context.Context, c *roompb.Candidate, attempt uint32) ([]byte, error)

func (f invokerFunc) Invoke(ctx context.Context, c *roompb.Candidate, attempt uint32) ([]byte, error) {
	return f(ctx, c, attempt)
}

// LLM wraps next: within an invocation scoped by [Invoker], every request
// is checked against the budgets first (none is sent when one is spent)
// and its usage is recorded as the response arrives — as the server
// reported it, or estimated from bytes ([Estimate]) and marked so when it
// reported none. Outside a scope requests pass unchanged.
//
// A request that failed after it reached the server (next says so in
// messages.LLMFailure.Sent: a timeout after the request was written, an
// error status, a reply cut off or undecodable) may have cost the server
// its whole prompt, so each such attempt is recorded as the request's
// prompt estimated from bytes, with no completion, marked estimated; so
// is each attempt a reply reports as retried
// (messages.ChatResponse.Unanswered). A request that never reached the
// server (a refused connection, a name that did not resolve, a request
// refused before it was sent) records nothing, nor does a failure next
// tells nothing about.
func LLM(next LLMPort) LLMPort { return meteredLLM{next: next} }

type meteredLLM struct{ next LLMPort }

func (l meteredLLM) Chat(ctx context.Context, req messages.ChatRequest) (messages.ChatResponse, error) {
	s := scopeFrom(ctx)
	if s == nil {
		return l.next.Chat(ctx, req)
	}
	if s.meter.Limited() {
		if err := s.meter.Check(ctx, s.room, s.event); err != nil {
			return messages.ChatResponse{}, err
		}
	}
	resp, err := l.next.Chat(ctx, req)
	unanswered := resp.Unanswered
	if err != nil {
		unanswered = 0
		if f := messages.LLMFailureOf(err); f != nil {
			unanswered = f.Sent
		}
	}
	for range unanswered {
		// Each is its own record (its own ID): the server was asked that
		// many times.
		s.meter.Record(ctx, s.room, s.event, s.attempt, Estimate(RequestBytes(req)), 0, true)
	}
	if err != nil {
		return resp, err
	}
	prompt, completion, est := int64(resp.Usage.PromptTokens), int64(resp.Usage.CompletionTokens), false
	if !resp.Usage.Reported() {
		prompt, completion, est = Estimate(RequestBytes(req)), Estimate(ResponseBytes(resp)), true
	}
	s.meter.Record(ctx, s.room, s.event, s.attempt, prompt, completion, est)
	return resp, nil
}

// BytesPerToken is the ratio by which usage is estimated where the server
// reports none. Real tokenizers give about 4 bytes a token for English
// prose and 3 for JSON and code, so 3 errs high for the requests Lisa
// makes; only text in scripts of 3-byte characters may count more tokens.
const BytesPerToken = 3

// Estimate is the conservative token estimate of n bytes.
func Estimate(n int) int64 { return int64((n + BytesPerToken - 1) / BytesPerToken) }

// RequestBytes counts the bytes a request sends as text: every message's
// content and tool calls, and the tool specs.
func RequestBytes(req messages.ChatRequest) int {
	n := len(req.AnswerSchema)
	for _, s := range req.Tools {
		n += len(s.Name) + len(s.Description) + len(s.Parameters)
	}
	for _, m := range req.Messages {
		n += len(m.Role) + len(m.Content) + len(m.ToolCallID)
		for _, c := range m.ToolCalls {
			n += len(c.ID) + len(c.Name) + len(c.Arguments)
		}
	}
	return n
}

// ResponseBytes counts the bytes of a reply: its text, refusal and tool
// calls.
func ResponseBytes(resp messages.ChatResponse) int {
	n := len(resp.Content) + len(resp.Refusal)
	for _, c := range resp.ToolCalls {
		n += len(c.ID) + len(c.Name) + len(c.Arguments)
	}
	return n
}
