package messages

import "errors"

// LLMCause tells the causes of a failed LLM request apart, finer than the
// Code of the [Error] that carries it: which setting or which part of the
// server is at fault. Causes appear in logs and metrics; they never carry
// text of the server's or the conversation's.
type LLMCause string

// LLM failure causes.
const (
	// CauseUnauthorized: the server refused the API key (401, 403).
	CauseUnauthorized LLMCause = "unauthorized"
	// CauseModelNotFound: the server does not know llm.model (404).
	CauseModelNotFound LLMCause = "model_not_found"
	// CauseContextTooLong: the request is longer than the server's
	// context window.
	CauseContextTooLong LLMCause = "context_too_long"
	// CauseParameterRefused: the server refused one parameter of the
	// request, named in [LLMFailure.Param].
	CauseParameterRefused LLMCause = "parameter_refused"
	// CauseToolsUnsupported: the server or the model cannot take tools.
	CauseToolsUnsupported LLMCause = "tools_unsupported"
	// CauseRateLimited: too many requests (429).
	CauseRateLimited LLMCause = "rate_limited"
	// CauseServerError: the server failed (5xx, or an error object in a
	// 200 reply).
	CauseServerError LLMCause = "server_error"
	// CauseRejected: any other refusal of the request (4xx).
	CauseRejected LLMCause = "rejected"
	// CauseTimeout: no answer in time.
	CauseTimeout LLMCause = "timeout"
	// CauseUnreachable: no connection, or it broke.
	CauseUnreachable LLMCause = "unreachable"
	// CauseMalformed: the reply could not be read as a chat completion.
	CauseMalformed LLMCause = "malformed_response"
	// CauseTooLarge: the reply was larger than Lisa accepts.
	CauseTooLarge LLMCause = "response_too_large"
)

// LLMFailure describes a failed LLM request for diagnosis: the HTTP
// status, the cause, the refused parameter and what the server said. It
// travels as the Err of a *[Error]. Message is the server's own text,
// with the secrets redacted, then bounded; it may echo the request, so it
// is kept out of the error's text and logged only by the LLM adapter.
type LLMFailure struct {
	// Status is the HTTP status of the reply; 0 when none came.
	Status int
	// Cause classifies the failure.
	Cause LLMCause
	// Param is the request parameter the server refused (for example
	// "max_tokens" or "temperature"), when it named one.
	Param string
	// Type and ServerCode are the server's error type and code, when it
	// sent them (for example "invalid_request_error",
	// "unsupported_parameter").
	Type, ServerCode string
	// Message is the server's error text, redacted, then bounded.
	Message string
	// Sent counts the attempts of the request (retries included) that
	// reached the server and failed: the request was written out whole,
	// or a reply began (an error status, a reply cut off or undecodable, a
	// timeout or a broken connection after the request was written). The
	// server may have done their work; their usage is unknown. 0 when no
	// attempt reached it: the connection was refused, the name did not
	// resolve, or the request was refused before it was sent.
	Sent int
}

// Error implements error without the server's text.
func (f *LLMFailure) Error() string {
	s := "cause " + string(f.Cause)
	if f.Param != "" {
		s += " (parameter " + f.Param + ")"
	}
	return s
}

// LLMFailureOf returns the LLMFailure err carries, or nil.
func LLMFailureOf(err error) *LLMFailure {
	var f *LLMFailure
	if errors.As(err, &f) {
		return f
	}
	return nil
}

// LLMCauseOf returns the cause of an LLM failure err carries, or "".
func LLMCauseOf(err error) LLMCause {
	if f := LLMFailureOf(err); f != nil {
		return f.Cause
	}
	return ""
}
