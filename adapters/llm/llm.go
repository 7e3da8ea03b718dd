package llm

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/lisabot/lisa/messages"
)

// Retry defaults for [Client.Chat].
const (
	DefaultMaxAttempts    = 3
	DefaultRetryBaseDelay = 500 * time.Millisecond
	DefaultRetryMaxDelay  = 10 * time.Second
)

// Config selects the endpoint, the generation limits and the retry policy.
type Config struct {
	// OnRetry, if set, is told about each retry (metrics).
	OnRetry func(code string)
	// BaseURL ends in /v1.
	BaseURL string
	// APIKey is sent as the bearer token; it is never logged.
	APIKey string
	// Model is the model name sent with every request.
	Model string
	// MaxOutputTokens is sent as max_tokens.
	MaxOutputTokens int
	// Temperature is sent as temperature.
	Temperature float32
	// Timeout bounds one HTTP attempt; the caller's deadline still
	// applies.
	Timeout time.Duration
	// MaxResponseCharacters truncates nothing: longer replies to
	// [Client.Complete] are rejected as bad responses. [Client.Chat]
	// leaves the answer-size check to the orchestrator.
	MaxResponseCharacters int
	// HTTPClient overrides the transport (tests); nil uses a client with
	// Timeout. A client without a Transport, like a nil HTTPClient, gets
	// one that ignores proxy environment variables; a caller's Transport
	// is used as it is.
	HTTPClient *http.Client
	// DisableStrictTools omits "strict": true from function tools, for
	// endpoints that reject it.
	DisableStrictTools bool
	// MaxAttempts bounds the attempts of one [Client.Chat] call; zero or
	// less means DefaultMaxAttempts, 1 disables retries.
	MaxAttempts int
	// RetryBaseDelay is the backoff before the second attempt; it doubles
	// for each further attempt. Zero or less means DefaultRetryBaseDelay.
	RetryBaseDelay time.Duration
	// RetryMaxDelay caps a backoff, and a Retry-After longer than it ends
	// the retries. Zero or less means DefaultRetryMaxDelay.
	RetryMaxDelay time.Duration
	// Jitter returns a number in [0, 1) that scales each backoff between
	// half and one and a half times its nominal value; nil uses
	// math/rand/v2.
	Jitter func() float64
	// Sleep waits d or until ctx ends; nil uses a timer.
	Sleep func(ctx context.Context, d time.Duration) error
}

// Client calls the chat-completions API. It is safe for concurrent use.
type Client struct {
	cfg  Config
	api  *openai.Client
	http *http.Client // what api sends with
}

// New returns a Client for cfg.
func New(cfg Config) *Client {
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = DefaultMaxAttempts
	}
	if cfg.RetryBaseDelay <= 0 {
		cfg.RetryBaseDelay = DefaultRetryBaseDelay
	}
	if cfg.RetryMaxDelay <= 0 {
		cfg.RetryMaxDelay = DefaultRetryMaxDelay
	}
	if cfg.Jitter == nil {
		cfg.Jitter = rand.Float64
	}
	if cfg.Sleep == nil {
		cfg.Sleep = sleep
	}
	oc := openai.DefaultConfig(cfg.APIKey)
	oc.BaseURL = strings.TrimRight(cfg.BaseURL, "/")
	// Assign a concrete client only: a nil *http.Client in go-openai's
	// interface field would be a non-nil interface that panics on use.
	hc := &http.Client{Timeout: cfg.Timeout}
	if cfg.HTTPClient != nil {
		copied := *cfg.HTTPClient
		hc = &copied
	}
	base := hc.Transport
	if base == nil {
		base = directTransport()
	}
	hc.Transport = retryAfterTap{base: base}
	oc.HTTPClient = hc
	return &Client{cfg: cfg, api: openai.NewClientWithConfig(oc), http: hc}
}

// directTransport is the transport of a client built without one: a
// copy of http.DefaultTransport with its Proxy function removed. Lisa
// never uses proxy environment variables (HTTP_PROXY, HTTPS_PROXY,
// NO_PROXY); a proxy must be configured explicitly, and no configuration
// key for one exists yet.
func directTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	return t
}

// Complete sends a system prompt and one user message and returns the
// assistant's text. It makes a single attempt.
func (c *Client) Complete(ctx context.Context, system, user string) (string, error) {
	ctx, cancel := c.attemptContext(ctx)
	defer cancel()
	resp, err := c.api.CreateChatCompletion(ctx, openai.ChatCompletionRequest{
		Model:       c.cfg.Model,
		MaxTokens:   c.cfg.MaxOutputTokens,
		Temperature: c.cfg.Temperature,
		Messages: []openai.ChatCompletionMessage{
			{Role: openai.ChatMessageRoleSystem, Content: system},
			{Role: openai.ChatMessageRoleUser, Content: user},
		},
	})
	if err != nil {
		return "", classify(ctx, err)
	}
	if len(resp.Choices) == 0 {
		return "", badResponse("response has no choices")
	}
	// Reasoning (reasoning_content, or <think> blocks in the content) is
	// dropped: it is never returned, logged or sent back.
	text := strings.TrimSpace(messages.StripReasoning(resp.Choices[0].Message.Content))
	if text == "" {
		return "", badResponse("response is empty")
	}
	if c.cfg.MaxResponseCharacters > 0 && len([]rune(text)) > c.cfg.MaxResponseCharacters {
		return "", badResponse("response exceeds max_response_characters")
	}
	return text, nil
}

// Chat implements the invocation LLM port: it sends the conversation and the tools
// (as strict function tools unless DisableStrictTools), validates the
// first choice, and retries rate limits, 5xx, timeouts and network errors
// with exponential backoff and jitter, honouring Retry-After, for at most
// MaxAttempts attempts and only while the caller's deadline leaves room
// for the wait. Permanent rejections and malformed responses are not
// retried. Errors are *messages.Error values without provider text.
func (c *Client) Chat(ctx context.Context, req messages.ChatRequest) (messages.ChatResponse, error) {
	oreq := c.chatRequest(req)
	for attempt := 1; ; attempt++ {
		resp, err := c.chatOnce(ctx, oreq)
		if err == nil {
			return resp, nil
		}
		if attempt >= c.cfg.MaxAttempts || !retryable(err) || ctx.Err() != nil {
			return messages.ChatResponse{}, err
		}
		wait := c.backoff(attempt)
		if err.RetryAfter > 0 {
			if err.RetryAfter > c.cfg.RetryMaxDelay {
				return messages.ChatResponse{}, err
			}
			wait = err.RetryAfter
		}
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) <= wait {
			return messages.ChatResponse{}, err
		}
		if c.cfg.Sleep(ctx, wait) != nil {
			return messages.ChatResponse{}, err
		}
		if c.cfg.OnRetry != nil {
			c.cfg.OnRetry(string(err.Code))
		}
	}
}

// chatRequest converts an orchestrator request to the wire request.
func (c *Client) chatRequest(req messages.ChatRequest) openai.ChatCompletionRequest {
	out := openai.ChatCompletionRequest{
		Model:       c.cfg.Model,
		MaxTokens:   c.cfg.MaxOutputTokens,
		Temperature: c.cfg.Temperature,
		Messages:    make([]openai.ChatCompletionMessage, 0, len(req.Messages)),
	}
	for _, m := range req.Messages {
		om := openai.ChatCompletionMessage{Role: m.Role, Content: m.Content, ToolCallID: m.ToolCallID}
		for _, tc := range m.ToolCalls {
			om.ToolCalls = append(om.ToolCalls, openai.ToolCall{
				ID:       tc.ID,
				Type:     openai.ToolTypeFunction,
				Function: openai.FunctionCall{Name: tc.Name, Arguments: tc.Arguments},
			})
		}
		out.Messages = append(out.Messages, om)
	}
	for _, t := range req.Tools {
		params := t.Parameters
		if len(params) == 0 {
			params = json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`)
		}
		out.Tools = append(out.Tools, openai.Tool{
			Type: openai.ToolTypeFunction,
			Function: &openai.FunctionDefinition{
				Name:        t.Name,
				Description: t.Description,
				Strict:      !c.cfg.DisableStrictTools,
				Parameters:  params,
			},
		})
	}
	if len(out.Tools) > 0 {
		out.ToolChoice = "auto"
	}
	return out
}

// chatOnce makes one attempt and validates the reply.
func (c *Client) chatOnce(ctx context.Context, req openai.ChatCompletionRequest) (messages.ChatResponse, *messages.Error) {
	ctx, cancel := c.attemptContext(ctx)
	defer cancel()
	var retryAfter string
	resp, err := c.api.CreateChatCompletion(context.WithValue(ctx, retryAfterKey{}, &retryAfter), req)
	if err != nil {
		le := classify(ctx, err)
		if retryable(le) {
			le.RetryAfter = parseRetryAfter(retryAfter, time.Now())
		}
		return messages.ChatResponse{}, le
	}
	if len(resp.Choices) == 0 {
		return messages.ChatResponse{}, badResponse("response has no choices")
	}
	msg := resp.Choices[0].Message
	// msg.ReasoningContent (DeepSeek-style reasoning_content) is ignored,
	// and <think> blocks before the content are removed: reasoning never
	// reaches the caller, so never a room, a log or a later request.
	out := messages.ChatResponse{Content: messages.StripReasoning(msg.Content),
		Usage: messages.TokenUsage{PromptTokens: max(resp.Usage.PromptTokens, 0), CompletionTokens: max(resp.Usage.CompletionTokens, 0)}}
	for _, tc := range msg.ToolCalls {
		if tc.ID == "" || tc.Function.Name == "" {
			return messages.ChatResponse{}, badResponse("tool call lacks an id or a name")
		}
		if tc.Type != "" && tc.Type != openai.ToolTypeFunction {
			return messages.ChatResponse{}, badResponse("tool call has an unsupported type")
		}
		out.ToolCalls = append(out.ToolCalls, messages.ModelToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
	}
	return out, nil
}

// attemptContext bounds one attempt by Timeout within ctx.
func (c *Client) attemptContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if c.cfg.Timeout <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, c.cfg.Timeout)
}

// backoff returns the jittered delay after the given failed attempt.
func (c *Client) backoff(attempt int) time.Duration {
	d := c.cfg.RetryBaseDelay
	for i := 1; i < attempt && d < c.cfg.RetryMaxDelay; i++ {
		d *= 2
	}
	d = time.Duration(float64(d) * (0.5 + c.cfg.Jitter()))
	return min(d, c.cfg.RetryMaxDelay)
}

// retryable reports whether a failure may succeed on another attempt.
func retryable(e *messages.Error) bool {
	return !e.Permanent && (e.Code == messages.CodeLLMUnavailable || e.Code == messages.CodeLLMTimeout)
}

func badResponse(msg string) *messages.Error {
	return &messages.Error{Code: messages.CodeLLMBadResponse, Message: msg}
}

// classify maps a go-openai error to a body-free messages.Error. The
// provider's error message is not kept: it may echo the prompt.
func classify(ctx context.Context, err error) *messages.Error {
	var apiErr *openai.APIError
	var reqErr *openai.RequestError
	status := 0
	switch {
	case errors.As(err, &apiErr):
		status = apiErr.HTTPStatusCode
	case errors.As(err, &reqErr):
		status = reqErr.HTTPStatusCode
	}
	var syntaxErr *json.SyntaxError
	switch {
	case ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded):
		return &messages.Error{Code: messages.CodeLLMTimeout, Message: "LLM request timed out"}
	case errors.As(err, &syntaxErr) || errors.Is(err, io.ErrUnexpectedEOF):
		return badResponse("LLM response could not be decoded")
	case status == http.StatusTooManyRequests || status >= 500:
		return &messages.Error{Code: messages.CodeLLMUnavailable, Message: "LLM endpoint unavailable (HTTP " + http.StatusText(status) + ")"}
	case status == http.StatusOK:
		return badResponse("LLM response could not be decoded")
	case status >= 400:
		return &messages.Error{Code: messages.CodeLLMRejected, Message: "LLM endpoint rejected the request (HTTP " + http.StatusText(status) + ")", Permanent: true}
	case status == 0 && !isTransport(err):
		// The client refused the request before sending it (go-openai
		// checks some model/parameter combinations locally): retrying
		// cannot help; the configuration must change.
		return &messages.Error{Code: messages.CodeLLMRejected, Message: "LLM request refused by the client library (check llm.model and limits)", Permanent: true}
	default:
		return &messages.Error{Code: messages.CodeLLMUnavailable, Message: "LLM endpoint unreachable"}
	}
}

// isTransport reports whether err came from the network (the request may
// succeed if repeated).
func isTransport(err error) bool {
	var uerr *url.Error
	var nerr net.Error
	var oerr *net.OpError
	return errors.As(err, &uerr) || errors.As(err, &nerr) || errors.As(err, &oerr) ||
		errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED)
}

// retryAfterKey keys the per-attempt slot that receives the Retry-After
// header; go-openai does not expose headers of error responses.
type retryAfterKey struct{}

// retryAfterTap copies the Retry-After response header into the slot in
// the request context, if any.
type retryAfterTap struct{ base http.RoundTripper }

// RoundTrip implements http.RoundTripper.
func (t retryAfterTap) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(r)
	if err == nil {
		if slot, ok := r.Context().Value(retryAfterKey{}).(*string); ok {
			*slot = resp.Header.Get("Retry-After")
		}
	}
	return resp, err
}

// parseRetryAfter reads delay-seconds or an HTTP date; it returns 0 when
// the header is absent or unusable.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		return time.Duration(min(secs, int64(24*time.Hour/time.Second))) * time.Second
	}
	if at, err := http.ParseTime(v); err == nil && at.After(now) {
		return at.Sub(now)
	}
	return 0
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
