package llm

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	openai "github.com/sashabaranov/go-openai"

	"github.com/lisabot/lisa/messages"
	"github.com/lisabot/lisa/sameorigin"
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
	// MaxOutputTokens is sent as the token limit, under the name
	// TokenLimitParameter says.
	MaxOutputTokens int
	// TokenLimitParameter is the request field the token limit goes in:
	// "max_tokens" (empty means this) or "max_completion_tokens" (OpenAI's
	// reasoning models refuse max_tokens).
	TokenLimitParameter string
	// Temperature is sent as temperature; nil sends none, so the server
	// uses its default (some models refuse any other).
	Temperature *float64
	// ResponseFormat selects the structured output asked for on requests
	// in which no tool may be called: "json_schema" (the answer's schema
	// as response_format), "json_object", or "none" or empty (nothing:
	// the prompt alone asks for JSON).
	ResponseFormat string
	// TextToolCalls says when Chat reads tool calls the model wrote into
	// its text (<tool_call>{"name":…,"arguments":…}</tool_call>, LM
	// Studio's [TOOL_REQUEST]…[END_TOOL_REQUEST]) as tool calls, when
	// tools were offered and the server returned none: TextToolCallsAuto
	// (until the server has returned a native tool call), ...Always, or
	// ...Never; empty is Never. Only calls that stand on their own are
	// read (see parseTextToolCalls).
	TextToolCalls string
	// MaxResponseBytes bounds the body of one reply; zero or less means
	// DefaultMaxResponseBytes. A longer reply is a bad response.
	MaxResponseBytes int64
	// Logger receives every failed attempt of [Client.Chat] with its
	// status, cause and the server's message (redacted, bounded): those
	// only the operator can fix (a refused key, an unknown model, a
	// refused parameter, a request over the server's window) at ERROR
	// with the configuration key to check, once per cause and again each
	// hour it persists, and at WARN in between; the others at WARN. nil
	// logs nothing.
	Logger *slog.Logger
	// Redact, if set, replaces the secrets in a text (the secret
	// redactor of the logs); the server's message of a failure passes
	// through it, and the API key is redacted in any case, before the
	// message is bounded.
	Redact func(string) string
	// OnAttempt, if set, is told the outcome of each HTTP attempt of
	// [Client.Chat]: nil for a reply read in full, else its classified
	// failure (metrics, health). An attempt the caller cancelled is
	// neither told nor logged.
	OnAttempt func(err *messages.Error)
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

// Response formats of Config.ResponseFormat.
const (
	ResponseFormatJSONSchema = "json_schema"
	ResponseFormatJSONObject = "json_object"
	ResponseFormatNone       = "none"
)

// Modes of Config.TextToolCalls (the values of llm.text_tool_calls).
const (
	TextToolCallsAuto   = "auto"
	TextToolCallsAlways = "always"
	TextToolCallsNever  = "never"
)

// Token limit parameters of Config.TokenLimitParameter.
const (
	TokenLimitMaxTokens           = paramMaxTokens
	TokenLimitMaxCompletionTokens = paramMaxCompletionTokens
)

// Client calls the chat-completions API. It is safe for concurrent use.
type Client struct {
	cfg    Config
	api    *openai.Client
	http   *http.Client // what api sends with
	report *reporter
	// native is set once the server has answered with a native tool
	// call: in TextToolCallsAuto, text calls are then off.
	native atomic.Bool
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
	// The API key goes in a header that Go would copy to a redirect
	// target on the same host but another port or scheme.
	hc = sameorigin.Guard(hc)
	base := hc.Transport
	if base == nil {
		base = directTransport()
	}
	if cfg.MaxResponseBytes <= 0 {
		cfg.MaxResponseBytes = DefaultMaxResponseBytes
	}
	hc.Transport = wireTransport{base: base, maxBytes: cfg.MaxResponseBytes,
		zeroTemperature: cfg.Temperature != nil && *cfg.Temperature == 0}
	oc.HTTPClient = hc
	c := &Client{cfg: cfg, api: openai.NewClientWithConfig(oc), http: hc}
	c.report = &reporter{log: cfg.Logger, models: c.Models}
	return c
}

// redact replaces the secrets in s: those Config.Redact knows, and the
// API key.
func (c *Client) redact(s string) string {
	if c.cfg.Redact != nil {
		s = c.cfg.Redact(s)
	}
	if len(c.cfg.APIKey) >= minRedactedKey {
		s = strings.ReplaceAll(s, c.cfg.APIKey, redactedText)
	}
	return s
}

// Redaction of the API key in the server's messages.
const (
	redactedText = "[REDACTED]"
	// minRedactedKey keeps a very short key (a placeholder such as
	// "none") from shredding ordinary words.
	minRedactedKey = 6
)

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
	ctx, info := withInfo(ctx)
	req := openai.ChatCompletionRequest{
		Model: c.cfg.Model,
		Messages: []openai.ChatCompletionMessage{
			{Role: openai.ChatMessageRoleSystem, Content: system},
			{Role: openai.ChatMessageRoleUser, Content: user},
		},
	}
	c.setLimits(&req)
	resp, err := c.api.CreateChatCompletion(ctx, req)
	if err != nil {
		return "", classify(ctx, err, info, c.redact)
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
//
// Every failure that some attempt reached the server carries how many did
// in [messages.LLMFailure.Sent], and a reply after failed attempts that
// did carries their number in [messages.ChatResponse.Unanswered], so that
// the work the server may have done for them can be counted (budget.LLM).
func (c *Client) Chat(ctx context.Context, req messages.ChatRequest) (messages.ChatResponse, error) {
	oreq := c.chatRequest(req)
	sent := 0 // failed attempts that reached the server
	for attempt := 1; ; attempt++ {
		resp, reached, err := c.chatOnce(ctx, oreq)
		if err != nil && reached {
			sent++
		}
		if err != nil && errors.Is(ctx.Err(), context.Canceled) {
			// The caller gave up (a redacted question, a shutdown): no
			// failure of the server's to log or count.
			return messages.ChatResponse{}, withSent(err, sent)
		}
		if c.cfg.OnAttempt != nil {
			c.cfg.OnAttempt(err)
		}
		if err == nil {
			if len(resp.ToolCalls) > 0 {
				c.sawNativeToolCalls()
			} else if c.readsTextToolCalls() && len(req.Tools) > 0 && !req.AnswerOnly {
				// A reply over the limit is refused before any parsing: the
				// body may be megabytes of markers. Either refusal is of a
				// reply that came, so of an attempt that reached the server.
				if c.cfg.MaxResponseCharacters > 0 && utf8.RuneCountInString(resp.Content) > c.cfg.MaxResponseCharacters {
					return messages.ChatResponse{}, withSent(badResponse("response exceeds max_response_characters"), sent+1)
				}
				calls, rest, perr := parseTextToolCalls(ctx, resp.Content)
				if perr != nil {
					return messages.ChatResponse{}, withSent(classify(ctx, perr, nil, c.redact), sent+1)
				}
				if len(calls) > 0 {
					resp.ToolCalls, resp.Content, resp.TextToolCalls = calls, rest, true
				}
			}
			resp.Unanswered = sent
			return resp, nil
		}
		wait, retry := c.retryWait(ctx, attempt, err)
		c.report.failed(ctx, c.cfg.Model, err, attempt, retry)
		if !retry {
			return messages.ChatResponse{}, withSent(err, sent)
		}
		if c.cfg.Sleep(ctx, wait) != nil {
			return messages.ChatResponse{}, withSent(err, sent)
		}
		if c.cfg.OnRetry != nil {
			c.cfg.OnRetry(string(err.Code))
		}
	}
}

// retryWait returns how long to wait before the next attempt after the
// failure err of the given attempt, and false when there is to be none:
// the failure is not transient, the attempts are spent, the server asks
// for a longer wait than RetryMaxDelay, or ctx ends before the wait.
func (c *Client) retryWait(ctx context.Context, attempt int, err *messages.Error) (time.Duration, bool) {
	if attempt >= c.cfg.MaxAttempts || !retryable(err) || ctx.Err() != nil {
		return 0, false
	}
	wait := c.backoff(attempt)
	if err.RetryAfter > 0 {
		if err.RetryAfter > c.cfg.RetryMaxDelay {
			return 0, false
		}
		wait = err.RetryAfter
	}
	if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) <= wait {
		return 0, false
	}
	return wait, true
}

// chatRequest converts an orchestrator request to the wire request.
func (c *Client) chatRequest(req messages.ChatRequest) openai.ChatCompletionRequest {
	out := openai.ChatCompletionRequest{
		Model:    c.cfg.Model,
		Messages: make([]openai.ChatCompletionMessage, 0, len(req.Messages)),
	}
	c.setLimits(&out)
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
	switch {
	case len(out.Tools) > 0 && req.AnswerOnly:
		out.ToolChoice = "none"
	case len(out.Tools) > 0:
		out.ToolChoice = "auto"
	}
	if len(req.AnswerSchema) > 0 && (len(out.Tools) == 0 || req.AnswerOnly) {
		switch c.cfg.ResponseFormat {
		case ResponseFormatJSONSchema:
			out.ResponseFormat = &openai.ChatCompletionResponseFormat{
				Type: openai.ChatCompletionResponseFormatTypeJSONSchema,
				JSONSchema: &openai.ChatCompletionResponseFormatJSONSchema{
					Name: "lisa_answer", Schema: req.AnswerSchema, Strict: true,
				},
			}
		case ResponseFormatJSONObject:
			out.ResponseFormat = &openai.ChatCompletionResponseFormat{Type: openai.ChatCompletionResponseFormatTypeJSONObject}
		}
	}
	return out
}

// setLimits puts the token limit under the configured name, and the
// temperature when one is configured (zero goes through the transport,
// since go-openai omits it).
func (c *Client) setLimits(r *openai.ChatCompletionRequest) {
	if c.cfg.TokenLimitParameter == TokenLimitMaxCompletionTokens {
		r.MaxCompletionTokens = c.cfg.MaxOutputTokens
	} else {
		r.MaxTokens = c.cfg.MaxOutputTokens
	}
	if c.cfg.Temperature != nil {
		r.Temperature = float32(*c.cfg.Temperature)
	}
}

// withSent records on e's failure that n attempts reached the server.
func withSent(e *messages.Error, n int) *messages.Error {
	if f := messages.LLMFailureOf(e); f != nil {
		f.Sent = n
	}
	return e
}

// chatOnce makes one attempt and validates the reply. It reports whether
// the attempt reached the server (see attemptInfo.reached): always so
// when a reply was read.
func (c *Client) chatOnce(ctx context.Context, req openai.ChatCompletionRequest) (messages.ChatResponse, bool, *messages.Error) {
	ctx, cancel := c.attemptContext(ctx)
	defer cancel()
	ctx, info := withInfo(ctx)
	resp, err := c.api.CreateChatCompletion(ctx, req)
	if err != nil {
		le := classify(ctx, err, info, c.redact)
		if retryable(le) {
			le.RetryAfter = parseRetryAfter(info.retryAfter, time.Now())
		}
		return messages.ChatResponse{}, info.reached(), le
	}
	out, le := chatResponse(resp)
	return out, true, le
}

// chatResponse validates a decoded reply and converts it.
func chatResponse(resp openai.ChatCompletionResponse) (messages.ChatResponse, *messages.Error) {
	if len(resp.Choices) == 0 {
		return messages.ChatResponse{}, badResponse("response has no choices")
	}
	choice := resp.Choices[0]
	msg := choice.Message
	// msg.ReasoningContent (DeepSeek-style reasoning_content) is ignored,
	// and <think> blocks before the content are removed: reasoning never
	// reaches the caller, so never a room, a log or a later request.
	out := messages.ChatResponse{Content: messages.StripReasoning(msg.Content),
		Usage:        messages.TokenUsage{PromptTokens: max(resp.Usage.PromptTokens, 0), CompletionTokens: max(resp.Usage.CompletionTokens, 0)},
		FinishReason: string(choice.FinishReason), Refusal: strings.TrimSpace(msg.Refusal)}
	for _, tc := range msg.ToolCalls {
		// Some servers leave the id out (llama.cpp for templates that
		// make none); the loop gives such calls one.
		if tc.Function.Name == "" {
			return messages.ChatResponse{}, badResponse("tool call lacks a name")
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
	return &messages.Error{Code: messages.CodeLLMBadResponse, Message: msg, Err: &messages.LLMFailure{Status: http.StatusOK, Cause: messages.CauseMalformed}}
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

// readsTextToolCalls reports whether Chat reads tool calls from the text
// now.
func (c *Client) readsTextToolCalls() bool {
	switch c.cfg.TextToolCalls {
	case TextToolCallsAlways:
		return true
	case TextToolCallsAuto:
		return !c.native.Load()
	}
	return false
}

// sawNativeToolCalls notes that the server parses tool calls itself; in
// TextToolCallsAuto the first one turns text calls off, with one INFO.
func (c *Client) sawNativeToolCalls() {
	if c.native.CompareAndSwap(false, true) && c.cfg.TextToolCalls == TextToolCallsAuto && c.cfg.Logger != nil {
		c.cfg.Logger.Info("the LLM server returns native tool calls: tool calls written into the text are not run from now on",
			"key", "llm.text_tool_calls", "value", TextToolCallsAuto)
	}
}
