package llm

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lisabot/lisa/messages"
)

// maxListedModels bounds the model names a model_not_found report lists.
const maxListedModels = 20

// reportEvery is how often a cause that persists is reported again.
const reportEvery = time.Hour

// reporter logs the failures only the operator can fix — a key the
// server refuses, a model it does not know, a parameter it will not take,
// a request longer than its window — at ERROR, once per cause (and again
// after reportEvery if it persists), with the configuration key to
// change. Rooms that keep asking do not repeat the line, and nothing is
// retried because of it. The lines hold no text of the server's and no
// secret.
type reporter struct {
	log    *slog.Logger
	models func(context.Context) ([]string, error)
	now    func() time.Time

	mu   sync.Mutex
	seen map[string]time.Time
}

// permanentCauses are the causes the reporter logs.
var permanentCauses = map[messages.LLMCause]bool{
	messages.CauseUnauthorized: true, messages.CauseModelNotFound: true, messages.CauseParameterRefused: true,
	messages.CauseContextTooLong: true, messages.CauseRejected: true,
}

// failed reports le once per cause; it lists the server's models for a
// model_not_found.
func (r *reporter) failed(ctx context.Context, model string, le *messages.Error) {
	f := messages.LLMFailureOf(le)
	if r == nil || r.log == nil || f == nil || !permanentCauses[f.Cause] {
		return
	}
	key := string(f.Cause) + "/" + f.Param + "/" + strconv.Itoa(f.Status)
	now := time.Now
	if r.now != nil {
		now = r.now
	}
	r.mu.Lock()
	if r.seen == nil {
		r.seen = map[string]time.Time{}
	}
	last, done := r.seen[key]
	if done && now().Sub(last) < reportEvery {
		r.mu.Unlock()
		return
	}
	r.seen[key] = now()
	r.mu.Unlock()
	attrs := []any{"code", le.Code, "cause", f.Cause, "status", f.Status}
	if f.Param != "" {
		attrs = append(attrs, "param", f.Param)
	}
	attrs = append(attrs, "fix", fixFor(f))
	if f.Cause == messages.CauseModelNotFound && r.models != nil {
		names, err := r.models(ctx)
		switch {
		case err != nil:
			attrs = append(attrs, "server_models", "unavailable ("+string(messages.ErrorCode(err))+")")
		default:
			attrs = append(attrs, "model", clipText(model, 100), "server_models", listModels(names))
		}
	}
	r.log.ErrorContext(ctx, "the LLM server refuses every request until the configuration changes; rooms get the persona's error", attrs...)
}

// listModels renders the server's model names for a log line, bounded.
func listModels(names []string) string {
	if len(names) == 0 {
		return "(none listed)"
	}
	out := make([]string, 0, min(len(names), maxListedModels))
	for _, n := range names[:min(len(names), maxListedModels)] {
		out = append(out, clipText(n, 100))
	}
	s := strings.Join(out, ", ")
	if len(names) > maxListedModels {
		s += ", … (" + strconv.Itoa(len(names)) + " in all)"
	}
	return s
}

// Fix says which configuration key to change for the LLM failure err
// carries (as the ERROR line for it does); "" when it carries none.
func Fix(err error) string {
	f := messages.LLMFailureOf(err)
	if f == nil {
		return ""
	}
	return fixFor(f)
}

// fixFor says which configuration key to change for a cause.
func fixFor(f *messages.LLMFailure) string {
	switch f.Cause {
	case messages.CauseUnauthorized:
		return "check llm.api_key (the environment variable it names) and the account's access to llm.model"
	case messages.CauseModelNotFound:
		return "set llm.model to one of the names the server lists (server_models)"
	case messages.CauseContextTooLong:
		return "set llm.context_window_tokens to at most the server's context length (or give the model a longer one)"
	case messages.CauseParameterRefused:
		switch f.Param {
		case paramMaxTokens:
			return `set llm.token_limit_parameter = "max_completion_tokens"`
		case paramMaxCompletionTokens:
			return `set llm.token_limit_parameter = "max_tokens"`
		case paramTemperature:
			return "remove llm.temperature (then none is sent) or set the value the model accepts"
		case paramResponseFormat:
			return `set llm.response_format = "json_schema" or "none"`
		case paramToolChoice, paramStrict:
			return "the server refuses Lisa's tool settings; use a server or model with OpenAI-style tool calling"
		}
		return "check the [llm] settings against what the server accepts"
	default:
		return "check llm.base_url (it ends in /v1) and llm.model"
	}
}
