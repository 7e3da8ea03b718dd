package doctor

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/lisabot/lisa/adapters/llm"
	"github.com/lisabot/lisa/messages"
)

// maxListedModels bounds the model names a failed line lists.
const maxListedModels = 12

// llmSection: the LLM server answers and serves llm.model. Further checks
// of the model (context length, a tool call's round trip, structured
// output) belong here as more entries of Checks.
func llmSection() Section {
	return Section{Name: "llm", Checks: []Check{
		{Name: "model", Run: checkModel},
		{Name: "budget", Run: checkBudget},
	}}
}

// LLM returns a client of the configured LLM server whose requests are
// bounded by RequestTimeout.
func (e *Env) LLM() *llm.Client {
	c := e.Res.Config.LLM
	return llm.New(llm.Config{BaseURL: c.BaseURL, APIKey: e.Res.LLMAPIKey.Reveal(), Model: c.Model,
		MaxOutputTokens: c.MaxOutputTokens, Temperature: c.Temperature, TokenLimitParameter: c.TokenLimitParameter,
		ResponseFormat: c.ResponseFormat, TextToolCalls: c.TextToolCalls,
		Timeout: e.RequestTimeout, MaxResponseCharacters: c.MaxResponseCharacters,
		HTTPClient: e.HTTPClient(), MaxAttempts: 1})
}

func checkModel(ctx context.Context, e *Env) []Result {
	c := e.Res.Config.LLM
	base := strings.TrimRight(c.BaseURL, "/")
	models, err := e.LLM().Models(ctx)
	var me *llm.ModelsError
	if errors.As(err, &me) {
		return []Result{modelsFailure(e, base, me)}
	} else if err != nil {
		return []Result{{Status: Failed, Message: fmt.Sprintf("GET %s/models failed: %v", base, err), Fix: "llm.base_url"}}
	}
	switch {
	case len(models) == 0:
		return []Result{{Status: Warning, Message: fmt.Sprintf("%s answers, but GET /models lists no models; llm.model %q is not checked", base, c.Model)}}
	case !slices.Contains(models, c.Model):
		return []Result{{Status: Failed, Message: fmt.Sprintf("llm.model %q is not among the models %s serves: %s", c.Model, base, listModels(models)),
			Fix: "set llm.model to one of the listed names"}}
	}
	return []Result{{Status: OK, Message: fmt.Sprintf("%s answers and serves llm.model %q (%d models listed)", base, c.Model, len(models))}}
}

// modelsFailure is the line for a failed GET /models.
func modelsFailure(e *Env, base string, me *llm.ModelsError) Result {
	key := e.Res.Config.LLM.APIKey
	switch {
	case me.Status == http.StatusUnauthorized || me.Status == http.StatusForbidden:
		fix := fmt.Sprintf("llm.api_key (%s) must hold a key this server accepts", key)
		if key.IsZero() {
			fix = `the server wants a key: set llm.api_key = "env:NAME" and NAME in the environment`
		}
		return Result{Status: Failed, Message: fmt.Sprintf("%s refused the API key (HTTP %d on GET /models)", base, me.Status), Fix: fix}
	case me.Status == http.StatusNotFound || me.Status == http.StatusMethodNotAllowed:
		return Result{Status: Warning, Message: fmt.Sprintf("%s has no GET /models (HTTP %d), so llm.model %q is not checked", base, me.Status, e.Res.Config.LLM.Model),
			Fix: "llm.base_url ends in /v1 for OpenAI-compatible servers"}
	case me.Status != 0:
		return Result{Status: Failed, Message: fmt.Sprintf("%s answered GET /models with HTTP %d", base, me.Status), Fix: "llm.base_url"}
	case me.Err.Code == messages.CodeLLMTimeout:
		return Result{Status: Failed, Message: fmt.Sprintf("%s did not answer GET /models within %s", base, e.RequestTimeout), Fix: "llm.base_url"}
	case me.Cause != "":
		return Result{Status: Failed, Message: fmt.Sprintf("cannot reach %s: %s", base, me.Cause), Fix: "llm.base_url"}
	}
	return Result{Status: Failed, Message: fmt.Sprintf("GET %s/models failed: %s", base, me.Err.Message), Fix: "llm.base_url"}
}

// listModels names up to maxListedModels models, quoted, and how many
// more there are.
func listModels(models []string) string {
	shown := models[:min(len(models), maxListedModels)]
	q := make([]string, len(shown))
	for i, m := range shown {
		q[i] = fmt.Sprintf("%q", m)
	}
	s := strings.Join(q, ", ")
	if n := len(models) - len(shown); n > 0 {
		s += fmt.Sprintf(" and %d more", n)
	}
	return s
}
