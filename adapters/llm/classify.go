package llm

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"

	openai "github.com/sashabaranov/go-openai"

	"github.com/lisabot/lisa/messages"
	"github.com/lisabot/lisa/sameorigin"
)

// Request parameters a server may refuse, as they are named on the wire.
const (
	paramMaxTokens           = "max_tokens"
	paramMaxCompletionTokens = "max_completion_tokens"
	paramTemperature         = "temperature"
	paramResponseFormat      = "response_format"
	paramToolChoice          = "tool_choice"
	paramStrict              = "strict"
)

// refusableParams are the parameters looked for in an error message that
// names no param field; the one named first wins ("'max_tokens' is not
// supported … use 'max_completion_tokens'").
var refusableParams = []string{paramMaxCompletionTokens, paramMaxTokens, paramTemperature, paramResponseFormat, paramToolChoice, paramStrict}

var (
	// toolsUnsupportedRE matches the servers' ways of saying the model or
	// server cannot take tools: Ollama ("… does not support tools"),
	// llama.cpp without --jinja ("tools param requires --jinja flag"; in
	// older builds "Unsupported param: tools"),
	// vLLM without a parser ("\"auto\" tool choice requires
	// --enable-auto-tool-choice and --tool-call-parser to be set"),
	// OpenRouter ("No endpoints found that support tool use").
	toolsUnsupportedRE = regexp.MustCompile(`(?i)does not support tools|tools? param requires --jinja|unsupported param: tools|tool choice requires --enable-auto-tool-choice|support tool use|does not support (function|tool) calling`)
	// contextTooLongRE matches context-length refusals: OpenAI and vLLM
	// ("maximum context length is …"), llama.cpp ("the request exceeds
	// the available context size"), LM Studio ("… greater than the
	// context length"), and others.
	contextTooLongRE = regexp.MustCompile(`(?i)context length|context size|context window|maximum context|too many tokens|prompt is too long|exceeds the (model'?s? )?(maximum|limit)`)
	// paramRefusedRE matches refusals of a request parameter.
	paramRefusedRE = regexp.MustCompile(`(?i)unsupported (param|parameter|value)|not supported with this model|must be one of|response_format|does not support|unrecognized|unknown (field|parameter)|extra (inputs|fields) (are )?not permitted`)
)

// classify maps a failed attempt to a body-free *messages.Error whose Err
// is a *messages.LLMFailure with the status, the cause and what the
// server said: passed through redact (when not nil), then bounded to
// maxServerMessage. The server's text may echo the prompt, so it is not
// part of the error's text. info is what the transport saw of the reply,
// or nil.
func classify(ctx context.Context, err error, info *attemptInfo, redact func(string) string) *messages.Error {
	le := classifyRaw(ctx, err, info)
	if f := messages.LLMFailureOf(le); f != nil && f.Message != "" {
		if redact != nil {
			f.Message = redact(f.Message)
		}
		f.Message = clipText(f.Message, maxServerMessage)
	}
	return le
}

// classifyRaw is classify before the server's text is redacted and
// bounded.
func classifyRaw(ctx context.Context, err error, info *attemptInfo) *messages.Error {
	f := &messages.LLMFailure{}
	var apiErr *openai.APIError
	var reqErr *openai.RequestError
	switch {
	case errors.As(err, &apiErr):
		f.Status = apiErr.HTTPStatusCode
	case errors.As(err, &reqErr):
		f.Status = reqErr.HTTPStatusCode
	}
	if info != nil {
		if f.Status == 0 && info.status != 0 && info.err != nil {
			f.Status = info.status
		}
		if we := info.err; we != nil {
			f.Message, f.Type, f.ServerCode, f.Param = we.Message, we.Type, we.Code, we.Param
		}
	}
	if f.Message == "" && apiErr != nil {
		f.Message, f.Type = clipText(apiErr.Message, maxRawServerMessage), apiErr.Type
		if f.Param == "" && apiErr.Param != nil {
			f.Param = *apiErr.Param
		}
	}
	var syntaxErr *json.SyntaxError
	var typeErr *json.UnmarshalTypeError
	var redirectErr *sameorigin.Error
	status := f.Status
	switch {
	case errors.As(err, &redirectErr):
		// The server redirected to another origin, which the client
		// refuses to follow with the API key: a configuration to fix.
		f.Cause = messages.CauseRejected
		return failure(messages.CodeLLMRejected, "LLM endpoint "+redirectErr.Error()+": set llm.base_url to it", true, f)
	case errors.Is(err, errResponseTooLarge):
		f.Cause = messages.CauseTooLarge
		return failure(messages.CodeLLMBadResponse, "LLM response exceeded the size limit", false, f)
	case ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded):
		f.Cause = messages.CauseTimeout
		return failure(messages.CodeLLMTimeout, "LLM request timed out", false, f)
	case status == 0 && (errors.As(err, &syntaxErr) || errors.As(err, &typeErr) || errors.Is(err, io.ErrUnexpectedEOF)):
		f.Cause, f.Status = messages.CauseMalformed, statusOf(info)
		return failure(messages.CodeLLMBadResponse, "LLM response could not be decoded", false, f)
	case status >= 400 && toolsUnsupportedRE.MatchString(f.Message):
		// llama.cpp answers this one with a 500: it is still a refusal.
		f.Cause = messages.CauseToolsUnsupported
		return failure(messages.CodeLLMRejected, "LLM server or model does not support tools (HTTP "+strconv.Itoa(status)+")", true, f)
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		f.Cause = messages.CauseUnauthorized
		return failure(messages.CodeLLMRejected, "LLM endpoint refused the API key (HTTP "+strconv.Itoa(status)+")", true, f)
	case status == http.StatusNotFound:
		f.Cause = messages.CauseRejected
		if strings.Contains(strings.ToLower(f.Message), "model") || f.ServerCode == "model_not_found" {
			f.Cause = messages.CauseModelNotFound
			return failure(messages.CodeLLMRejected, "LLM endpoint does not know the model (HTTP 404)", true, f)
		}
		return failure(messages.CodeLLMRejected, "LLM endpoint not found (HTTP 404)", true, f)
	case status == http.StatusTooManyRequests:
		f.Cause = messages.CauseRateLimited
		return failure(messages.CodeLLMUnavailable, "LLM endpoint unavailable (HTTP "+http.StatusText(status)+")", false, f)
	case status == http.StatusOK:
		f.Cause = messages.CauseMalformed
		return failure(messages.CodeLLMBadResponse, "LLM response could not be decoded", false, f)
	case status >= 400 && status < 500 && (f.Type == "exceed_context_size_error" || f.ServerCode == "context_length_exceeded" || contextTooLongRE.MatchString(f.Message)):
		f.Cause = messages.CauseContextTooLong
		return failure(messages.CodeLLMRejected, "LLM request exceeds the server's context window (HTTP "+strconv.Itoa(status)+")", true, f)
	case status >= 400 && status < 500 && refusedParam(f) != "":
		f.Cause, f.Param = messages.CauseParameterRefused, refusedParam(f)
		return failure(messages.CodeLLMRejected, "LLM endpoint refused the parameter "+f.Param+" (HTTP "+strconv.Itoa(status)+")", true, f)
	case status >= 500:
		f.Cause = messages.CauseServerError
		return failure(messages.CodeLLMUnavailable, "LLM endpoint unavailable (HTTP "+http.StatusText(status)+")", false, f)
	case status >= 400:
		f.Cause = messages.CauseRejected
		return failure(messages.CodeLLMRejected, "LLM endpoint rejected the request (HTTP "+http.StatusText(status)+")", true, f)
	case status == 0 && !isTransport(err):
		// The client refused the request before sending it (go-openai
		// checks some model/parameter combinations locally): retrying
		// cannot help; the configuration must change.
		f.Cause, f.Param = messages.CauseParameterRefused, localParam(err)
		if f.Param == "" {
			f.Cause = messages.CauseRejected
		}
		return failure(messages.CodeLLMRejected, "LLM request refused by the client library (check llm.model and limits)", true, f)
	default:
		f.Cause = messages.CauseUnreachable
		return failure(messages.CodeLLMUnavailable, "LLM endpoint unreachable", false, f)
	}
}

// failure builds the classified error.
func failure(code messages.Code, msg string, permanent bool, f *messages.LLMFailure) *messages.Error {
	return &messages.Error{Code: code, Message: msg, Permanent: permanent, Err: f}
}

// statusOf returns the status the transport saw, or 0.
func statusOf(info *attemptInfo) int {
	if info == nil {
		return 0
	}
	return info.status
}

// refusedParam names the parameter a 4xx refusal is about: the param
// field when the server named one of Lisa's parameters, else one named in
// the message of a refusal that reads like one; "" when none is known.
func refusedParam(f *messages.LLMFailure) string {
	for _, p := range refusableParams {
		if f.Param == p {
			return p
		}
	}
	if !paramRefusedRE.MatchString(f.Message) && f.ServerCode != "unsupported_parameter" && f.ServerCode != "unsupported_value" {
		return ""
	}
	msg := strings.ToLower(f.Message)
	best, at := "", len(msg)
	for _, p := range refusableParams {
		if i := strings.Index(msg, p); i >= 0 && i < at {
			best, at = p, i
		}
	}
	return best
}

// localParam names the parameter of a refusal by go-openai's own checks.
func localParam(err error) string {
	switch {
	case errors.Is(err, openai.ErrReasoningModelMaxTokensDeprecated), errors.Is(err, openai.ErrO1MaxTokensDeprecated):
		return paramMaxTokens
	case errors.Is(err, openai.ErrReasoningModelLimitationsOther), errors.Is(err, openai.ErrReasoningSamplingUnsupported),
		errors.Is(err, openai.ErrO1BetaLimitationsOther):
		return paramTemperature
	}
	return ""
}
