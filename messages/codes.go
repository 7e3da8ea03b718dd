package messages

import (
	"errors"
	"time"
)

// Code classifies a failure. Codes appear in the journal, in logs and in
// metrics; they never carry message bodies or secrets.
type Code string

// Failure codes shared by the actors and adapters.
const (
	CodeOK                Code = "ok"
	CodeLLMUnavailable    Code = "llm_unavailable"
	CodeLLMTimeout        Code = "llm_timeout"
	CodeLLMBadResponse    Code = "llm_bad_response"
	CodeLLMRejected       Code = "llm_rejected"
	CodeInvocationPanic   Code = "invocation_panic"
	CodeInvocationLost    Code = "invocation_lost"
	CodeDeadline          Code = "deadline"
	CodeMatrixRateLimit   Code = "matrix_rate_limited"
	CodeMatrixForbidden   Code = "matrix_forbidden"
	CodeMatrixUnavailable Code = "matrix_unavailable"
	CodeMatrixRejected    Code = "matrix_rejected"
	CodeCursorRejected    Code = "matrix_cursor_rejected"
	CodeStorage           Code = "storage"
	CodeShutdown          Code = "shutdown"
	CodeInternal          Code = "internal"
	// CodeBudgetExhausted: a token budget is spent; the question gets
	// persona.budget_error, the room's one notice of the day.
	CodeBudgetExhausted Code = "budget_exhausted"
	// CodeRefusedBudget: a token budget is spent and the room had its
	// notice today; the question ends without a reply.
	CodeRefusedBudget Code = "refused_budget"
)

// ErrStopping is the cause (context.Cause) with which Lisa cancels her own
// requests when an actor stops or restarts. Such a failure says nothing
// about the server that was asked.
var ErrStopping = errors.New("lisa cancelled the request: stopping")

// Error is an error carrying a Code and a safe, body-free message.
type Error struct {
	// Code classifies the failure.
	Code Code
	// Message says what failed, without bodies or secrets.
	Message string
	// Permanent failures are not retried.
	Permanent bool
	// Ambiguous failures may have taken effect anyway (a send whose
	// response was lost).
	Ambiguous bool
	// Unreachable failures are the server not taking or dropping the
	// connection (refused, reset, closed early) or a gateway in front of
	// it saying it is down (502, 503, 504): the server may be
	// restarting.
	Unreachable bool
	// RetryAfter is the server's requested delay, if it named one.
	RetryAfter time.Duration
	// Err is the cause.
	Err error
}

// ErrRateLimitWait is the cause of a CodeMatrixRateLimit error for a
// request that was not made: the homeserver's rate limit still held the
// account (adapters/matrix). It is no refusal of the homeserver's and is
// not counted as one.
var ErrRateLimitWait = errors.New("not sent: the homeserver's rate limit still holds the account")

// Error implements error.
func (e *Error) Error() string {
	if e.Err != nil {
		return string(e.Code) + ": " + e.Message + ": " + e.Err.Error()
	}
	return string(e.Code) + ": " + e.Message
}

// Unwrap returns the wrapped cause.
func (e *Error) Unwrap() error { return e.Err }

// ErrorCode extracts the Code of err, or CodeInternal when err carries none.
func ErrorCode(err error) Code {
	if err == nil {
		return CodeOK
	}
	for e := err; e != nil; {
		if le, ok := e.(*Error); ok {
			return le.Code
		}
		u, ok := e.(interface{ Unwrap() error })
		if !ok {
			break
		}
		e = u.Unwrap()
	}
	return CodeInternal
}
