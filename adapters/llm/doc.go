// Package llm adapts go-openai to Lisa: one chat-completion call against
// any OpenAI-compatible /v1 endpoint, with the configured model, token
// limit, temperature and timeout, and failures classified as
// messages.Error codes (rate limits and 5xx are transient, other 4xx are
// permanent). It never logs prompts, replies or keys.
package llm
