package llm

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/lisabot/lisa/messages"
)

// Config selects the endpoint and the generation limits.
type Config struct {
	// BaseURL ends in /v1.
	BaseURL         string
	APIKey          string
	Model           string
	MaxOutputTokens int
	Temperature     float32
	Timeout         time.Duration
	// MaxResponseCharacters truncates nothing: longer replies are
	// rejected as bad responses.
	MaxResponseCharacters int
	// HTTPClient overrides the transport (tests); nil uses a client with
	// Timeout.
	HTTPClient *http.Client
}

// Client calls the chat-completions API.
type Client struct {
	cfg Config
	api *openai.Client
}

// New returns a Client for cfg.
func New(cfg Config) *Client {
	oc := openai.DefaultConfig(cfg.APIKey)
	oc.BaseURL = strings.TrimRight(cfg.BaseURL, "/")
	// Assign a concrete client only: a nil *http.Client in go-openai's
	// interface field would be a non-nil interface that panics on use.
	if cfg.HTTPClient != nil {
		oc.HTTPClient = cfg.HTTPClient
	} else {
		oc.HTTPClient = &http.Client{Timeout: cfg.Timeout}
	}
	return &Client{cfg: cfg, api: openai.NewClientWithConfig(oc)}
}

// Complete sends a system prompt and one user message and returns the
// assistant's text.
func (c *Client) Complete(ctx context.Context, system, user string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
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
		return "", &messages.Error{Code: messages.CodeLLMBadResponse, Message: "response has no choices"}
	}
	text := strings.TrimSpace(resp.Choices[0].Message.Content)
	if text == "" {
		return "", &messages.Error{Code: messages.CodeLLMBadResponse, Message: "response is empty"}
	}
	if c.cfg.MaxResponseCharacters > 0 && len([]rune(text)) > c.cfg.MaxResponseCharacters {
		return "", &messages.Error{Code: messages.CodeLLMBadResponse, Message: "response exceeds max_response_characters"}
	}
	return text, nil
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
		return &messages.Error{Code: messages.CodeLLMBadResponse, Message: "LLM response could not be decoded"}
	case status == http.StatusTooManyRequests || status >= 500:
		return &messages.Error{Code: messages.CodeLLMUnavailable, Message: "LLM endpoint unavailable (HTTP " + http.StatusText(status) + ")"}
	case status == http.StatusOK:
		return &messages.Error{Code: messages.CodeLLMBadResponse, Message: "LLM response could not be decoded"}
	case status >= 400:
		return &messages.Error{Code: messages.CodeLLMRejected, Message: "LLM endpoint rejected the request (HTTP " + http.StatusText(status) + ")", Permanent: true}
	default:
		return &messages.Error{Code: messages.CodeLLMUnavailable, Message: "LLM endpoint unreachable"}
	}
}
