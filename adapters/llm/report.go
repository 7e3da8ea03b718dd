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

// reporter logs every failed attempt of a chat request with Lisa's
// error code, the cause that tells the failures apart, the HTTP status
// (0 when no reply came), a refused parameter and the server's own
// message (redacted and bounded by classify). The failures only the
// operator can fix — a key the server refuses, a model it does not know,
// a parameter it will not take, a request longer than its window — are
// logged at ERROR once per cause (and again after reportEvery if it
// persists), with the configuration key to check; in between, and for
// every other failure (transient ones, which may be retried), at WARN.
// Nothing is retried because of a line. No line holds a prompt, a reply
// or a key.
type reporter struct {
	log    *slog.Logger
	models func(context.Context) ([]string, error)
	now    func() time.Time

	mu   sync.Mutex
	seen map[string]time.Time
}

// permanentCauses are the causes only the operator can fix: logged at
// ERROR once per cause, with the key to check.
var permanentCauses = map[messages.LLMCause]bool{
	messages.CauseUnauthorized: true, messages.CauseModelNotFound: true, messages.CauseParameterRefused: true,
	messages.CauseContextTooLong: true, messages.CauseRejected: true,
}

// RefusedMessage is the message of the ERROR line that says the LLM
// server refuses every request until the configuration changes; the
// line names the setting to check (fix).
const RefusedMessage = "the LLM server refuses every request until the configuration changes; rooms get the persona's error"

// Messages of the reporter's lines.
const (
	// msgRefused is the ERROR line of a cause only the operator can fix.
	msgRefused = RefusedMessage
	// msgRefusedAgain is the WARN line of the same cause within
	// reportEvery.
	msgRefusedAgain = "the LLM server refused the request again; the configuration must change"
	// msgFailed is the WARN line of any other failure.
	msgFailed = "LLM request failed"
)

// failed logs the failure le of the given attempt; retry says whether
// another attempt follows. A model_not_found's ERROR line lists the
// server's models.
func (r *reporter) failed(ctx context.Context, model string, le *messages.Error, attempt int, retry bool) {
	if r == nil || r.log == nil || le == nil {
		return
	}
	f := messages.LLMFailureOf(le)
	if f == nil {
		f = &messages.LLMFailure{}
	}
	attrs := []any{"code", le.Code, "cause", f.Cause, "status", f.Status}
	if f.Param != "" {
		attrs = append(attrs, "param", f.Param)
	}
	if f.Message != "" {
		attrs = append(attrs, "server_message", f.Message)
	}
	if !permanentCauses[f.Cause] {
		attrs = append(attrs, "attempt", attempt, "retry", retry)
		r.log.WarnContext(ctx, msgFailed, attrs...)
		return
	}
	attrs = append(attrs, "fix", fixFor(f))
	if !r.first(string(f.Cause) + "/" + f.Param + "/" + strconv.Itoa(f.Status)) {
		r.log.WarnContext(ctx, msgRefusedAgain, attrs...)
		return
	}
	if f.Cause == messages.CauseModelNotFound && r.models != nil {
		names, err := r.models(ctx)
		switch {
		case err != nil:
			attrs = append(attrs, "server_models", "unavailable ("+string(messages.ErrorCode(err))+")")
		default:
			attrs = append(attrs, "model", clipText(model, 100), "server_models", listModels(names))
		}
	}
	r.log.ErrorContext(ctx, msgRefused, attrs...)
}

// first reports whether key is reported for the first time, or the
// first time in reportEvery, and notes it.
func (r *reporter) first(key string) bool {
	now := time.Now
	if r.now != nil {
		now = r.now
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen == nil {
		r.seen = map[string]time.Time{}
	}
	if last, done := r.seen[key]; done && now().Sub(last) < reportEvery {
		return false
	}
	r.seen[key] = now()
	return true
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
