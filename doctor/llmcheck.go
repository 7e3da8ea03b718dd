package doctor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lisabot/lisa/adapters/llm"
	"github.com/lisabot/lisa/config"
	"github.com/lisabot/lisa/messages"
)

// maxListedModels bounds the model names a failed line lists.
const maxListedModels = 12

// llmSection: the LLM server answers and serves llm.model, runs it with
// a window no smaller than llm.context_window_tokens, takes a tool call's
// round trip and gives structured output — one line each.
func llmSection() Section {
	return Section{Name: "llm", Checks: []Check{
		{Name: "model", Run: checkModel},
		{Name: "context", Run: checkContext, Timeout: func(e *Env) time.Duration { return 4 * e.RequestTimeout }},
		{Name: "tools", Run: checkTools, Timeout: func(e *Env) time.Duration { return 2*e.Res.Config.LLM.RequestTimeout() + e.RequestTimeout }},
		{Name: "structured output", Run: checkStructured, Timeout: func(e *Env) time.Duration { return e.Res.Config.LLM.RequestTimeout() + e.RequestTimeout }},
		{Name: "budget", Run: checkBudget},
	}}
}

// LLM returns a client of the configured LLM server whose requests are
// bounded by RequestTimeout.
func (e *Env) LLM() *llm.Client { return e.llmClient(e.RequestTimeout) }

// llmClient returns a client like the daemon's, making one attempt per
// call, each bounded by timeout.
func (e *Env) llmClient(timeout time.Duration) *llm.Client {
	c := e.Res.Config.LLM
	return llm.New(llm.Config{BaseURL: c.BaseURL, APIKey: e.Res.LLMAPIKey.Reveal(), Model: c.Model,
		MaxOutputTokens: c.MaxOutputTokens, Temperature: c.Temperature, TokenLimitParameter: c.TokenLimitParameter,
		ResponseFormat: c.ResponseFormat, TextToolCalls: c.TextToolCalls,
		Timeout: timeout, MaxResponseCharacters: c.MaxResponseCharacters,
		HTTPClient: &http.Client{Timeout: timeout, Transport: e.transport}, MaxAttempts: 1})
}

// Models returns the model IDs the LLM server lists, asked once.
func (e *Env) Models() ([]string, error) {
	return e.models.get(func() ([]string, error) { return request(e, e.LLM().Models) })
}

// servedAs returns the listed name llm.model is served under: itself, or
// with Ollama's default tag ("name" is served as "name:latest").
func servedAs(models []string, model string) (string, bool) {
	if slices.Contains(models, model) {
		return model, true
	}
	if !strings.Contains(model, ":") && slices.Contains(models, model+":latest") {
		return model + ":latest", true
	}
	return "", false
}

// llmUnusable says why the checks after the model line cannot talk to
// llm.model ("" when they can, or when the server has no model list to
// tell by).
func (e *Env) llmUnusable() string {
	models, err := e.Models()
	var me *llm.ModelsError
	switch {
	case errors.As(err, &me) && (me.Status == http.StatusNotFound || me.Status == http.StatusMethodNotAllowed):
		return ""
	case err != nil:
		return "not checked: the LLM server did not answer GET /models (see the model line)"
	}
	if _, ok := servedAs(models, e.Res.Config.LLM.Model); len(models) > 0 && !ok {
		return "not checked: the LLM server does not serve llm.model (see the model line)"
	}
	return ""
}

func checkModel(ctx context.Context, e *Env) []Result {
	c := e.Res.Config.LLM
	base := strings.TrimRight(c.BaseURL, "/")
	models, err := e.Models()
	var me *llm.ModelsError
	if errors.As(err, &me) {
		return []Result{modelsFailure(e, base, me)}
	} else if err != nil {
		return []Result{{Status: Failed, Message: fmt.Sprintf("GET %s/models failed: %v", base, err), Fix: "llm.base_url"}}
	}
	name, ok := servedAs(models, c.Model)
	switch {
	case len(models) == 0:
		return []Result{{Status: Warning, Message: fmt.Sprintf("%s answers, but GET /models lists no models; llm.model %q is not checked", base, c.Model)}}
	case !ok:
		return []Result{{Status: Failed, Message: fmt.Sprintf("llm.model %q is not among the models %s serves: %s", c.Model, base, listModels(models)),
			Fix: "set llm.model to one of the listed names"}}
	case name != c.Model:
		return []Result{{Status: OK, Message: fmt.Sprintf("%s answers and serves llm.model %q as %q (%d models listed)", base, c.Model, name, len(models))}}
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

// ServerInfo returns what the LLM server tells of how it runs llm.model
// (see [llm.Client.Probe]), asked once.
func (e *Env) ServerInfo() (llm.ServerInfo, error) {
	return e.serverInfo.get(func() (llm.ServerInfo, error) {
		ctx, cancel := context.WithTimeout(e.ctx, 4*e.RequestTimeout)
		defer cancel()
		return e.LLM().Probe(ctx)
	})
}

// checkContext compares the window the server runs the model with, where
// it says, with llm.context_window_tokens.
func checkContext(_ context.Context, e *Env) []Result {
	if why := e.llmUnusable(); why != "" {
		return []Result{{Status: Skipped, Message: "context window: " + why}}
	}
	want := e.Res.Config.LLM.ContextWindowTokens
	info, err := e.ServerInfo()
	switch {
	case err != nil:
		return []Result{{Status: Warning, Message: fmt.Sprintf("context window: the server's window could not be read (%v); llm.context_window_tokens = %d is not checked", err, want)}}
	case info.ContextTokens == 0:
		return []Result{{Status: OK, Message: fmt.Sprintf("context window: not reported by this server (vLLM, llama.cpp and Ollama report it); llm.context_window_tokens = %d is not checked: keep it no larger than the model's window", want)}}
	}
	have := info.ContextTokens
	var found string
	if info.ContextDefault {
		found = fmt.Sprintf("context window: %s runs llm.model with Ollama's default window, %d tokens on a machine without a GPU (llm.model sets no num_ctx; OLLAMA_CONTEXT_LENGTH or a large GPU change it)", info.Server, have)
	} else {
		found = fmt.Sprintf("context window: %s runs llm.model with a window of %d tokens (%s)", info.Server, have, info.ContextField)
	}
	if have >= want {
		return []Result{{Status: OK, Message: fmt.Sprintf("%s; llm.context_window_tokens = %d fits", found, want)}}
	}
	var effect, raise string
	switch info.Server {
	case llm.ServerOllama:
		effect = "Ollama silently cuts the front of a longer prompt (the system prompt first)"
		raise = "PARAMETER num_ctx in the model's Modelfile"
		if info.ContextDefault {
			raise += " (or OLLAMA_CONTEXT_LENGTH for the server)"
		}
	case llm.ServerLlamaCpp:
		effect = "llama-server refuses a longer request"
		raise = "llama-server's --ctx-size (divided among --parallel slots)"
	case llm.ServerVLLM:
		effect = "vLLM refuses a longer request"
		raise = "vLLM's --max-model-len"
	}
	return []Result{{Status: Warning, Message: fmt.Sprintf("%s, less than llm.context_window_tokens = %d: %s", found, want, effect),
		Fix: fmt.Sprintf("set llm.context_window_tokens = %d, or give the model a longer window (%s)", have, raise)}}
}

// Test tool of the round trip.
const (
	echoTool   = "echo"
	echoWord   = "kiwi"
	echoSystem = "You are testing tool calls. Call the tool " + echoTool + " once with the word \"" + echoWord +
		"\". When its result comes back, answer with that word and nothing else."
	echoUser = "Run the " + echoTool + " tool with the word " + echoWord + "."
)

// echoSpec is the test tool.
var echoSpec = messages.ToolSpec{Name: echoTool, Description: "Returns the word it is given.",
	Parameters: json.RawMessage(`{"type":"object","properties":{"word":{"type":"string"}},"required":["word"],"additionalProperties":false}`)}

// checkTools makes one tiny tool round trip: a request offering a tool
// the model is told to call, and, when it does, the request carrying the
// call's result.
func checkTools(ctx context.Context, e *Env) []Result {
	if why := e.llmUnusable(); why != "" {
		return []Result{{Status: Skipped, Message: "tool calls: " + why}}
	}
	cl := e.llmClient(e.Res.Config.LLM.RequestTimeout())
	msgs := []messages.ChatMessage{{Role: messages.RoleSystem, Content: echoSystem}, {Role: messages.RoleUser, Content: echoUser}}
	tools := []messages.ToolSpec{echoSpec}
	resp, err := cl.Chat(ctx, messages.ChatRequest{Messages: msgs, Tools: tools, AnswerSchema: messages.AnswerSchema()})
	if err != nil {
		if messages.LLMCauseOf(err) == messages.CauseToolsUnsupported {
			return []Result{{Status: Warning, Message: "tool calls: not supported — the server refused a request with tools; Lisa answers from the room alone, without research",
				Fix: toolsFix(e, err)}}
		}
		return []Result{chatFailure(e, "tool calls", "a request with a tool", err)}
	}
	textKey := e.Res.Config.LLM.TextToolCalls
	if len(resp.ToolCalls) == 0 {
		if textKey == config.TextToolCallsNever && (strings.Contains(resp.Content, "<tool_call>") || strings.Contains(resp.Content, "[TOOL_REQUEST]")) {
			return []Result{{Status: Warning, Message: `tool calls: the model wrote its call as text, which Lisa does not run while llm.text_tool_calls = "never"`,
				Fix: `set llm.text_tool_calls = "auto"`}}
		}
		takes := "the server takes tools"
		if info, err := e.ServerInfo(); err == nil && slices.Contains(info.Capabilities, "tools") {
			takes += " (Ollama lists tools among llm.model's capabilities)"
		}
		return []Result{{Status: Warning, Message: "tool calls: " + takes + ", but the model answered without calling the test tool it was told to call; research needs a model that calls tools",
			Fix: "use a model trained for tool calling (llm.model)"}}
	}
	call := resp.ToolCalls[0]
	if call.ID == "" {
		call.ID = "call_doctor_1"
	}
	msgs = append(msgs, messages.ChatMessage{Role: messages.RoleAssistant, ToolCalls: []messages.ModelToolCall{call}},
		messages.ChatMessage{Role: messages.RoleTool, ToolCallID: call.ID, Content: `{"word":"` + echoWord + `"}`})
	if _, err := cl.Chat(ctx, messages.ChatRequest{Messages: msgs, Tools: tools, AnswerSchema: messages.AnswerSchema()}); err != nil {
		return []Result{chatFailure(e, "tool calls", "the request with the tool's result", err)}
	}
	how := "the model called " + call.Name + " and answered after its result"
	if resp.TextToolCalls {
		how = "the model wrote its call to " + call.Name + " as text, which Lisa runs (llm.text_tool_calls = " + strconv.Quote(textKey) + "), and answered after its result"
	}
	return []Result{{Status: OK, Message: "tool calls: ok — " + how}}
}

// toolsFix says how to give the model tools on the server at hand.
func toolsFix(e *Env, err error) string {
	info, _ := e.ServerInfo()
	msg := ""
	if f := messages.LLMFailureOf(err); f != nil {
		msg = f.Message
	}
	switch {
	case info.Server == llm.ServerOllama || strings.Contains(msg, "does not support tools"):
		return "use a model whose template supports tools (`ollama show MODEL` lists tools among its capabilities), in llm.model"
	case info.Server == llm.ServerLlamaCpp || strings.Contains(msg, "--jinja") || strings.Contains(msg, "Unsupported param: tools"):
		return "start llama-server with --jinja"
	case info.Server == llm.ServerVLLM || strings.Contains(msg, "--enable-auto-tool-choice"):
		return "start vLLM with --enable-auto-tool-choice --tool-call-parser PARSER (hermes for Qwen and Hermes models)"
	}
	return "use a server and model with tool calling (llm.base_url, llm.model)"
}

// checkStructured asks for the answer as structured output, as Lisa's
// repair request does.
func checkStructured(ctx context.Context, e *Env) []Result {
	format := e.Res.Config.LLM.ResponseFormat
	if format == llm.ResponseFormatNone {
		return []Result{{Status: OK, Message: `structured output: not asked for (llm.response_format = "none"): the prompt alone asks for JSON, and Lisa posts prose that is not`}}
	}
	if why := e.llmUnusable(); why != "" {
		return []Result{{Status: Skipped, Message: "structured output: " + why}}
	}
	cl := e.llmClient(e.Res.Config.LLM.RequestTimeout())
	resp, err := cl.Chat(ctx, messages.ChatRequest{AnswerSchema: messages.AnswerSchema(), Messages: []messages.ChatMessage{
		{Role: messages.RoleSystem, Content: `Answer with one JSON object: {"markdown": "<your answer>", "source_urls": []}.`},
		{Role: messages.RoleUser, Content: "Say hello in three words."},
	}})
	if err != nil {
		return []Result{chatFailure(e, "structured output", fmt.Sprintf("a request with response_format %s", format), err)}
	}
	var answer struct {
		Markdown *string `json:"markdown"`
	}
	switch {
	case json.Unmarshal([]byte(strings.TrimSpace(resp.Content)), &answer) == nil && answer.Markdown != nil:
		return []Result{{Status: OK, Message: fmt.Sprintf("structured output: ok — with response_format %s the reply is an answer object", format)}}
	case resp.FinishReason == "length":
		return []Result{{Status: Warning, Message: fmt.Sprintf("structured output: the server took response_format %s, but the reply was cut at the token limit before the object closed", format),
			Fix: "raise llm.max_output_tokens"}}
	}
	fix := `Lisa repairs such replies once and then posts the prose; llm.response_format = "json_schema" or "json_object" may suit this server better`
	return []Result{{Status: Warning, Message: fmt.Sprintf("structured output: the server took response_format %s, but the reply is not an answer object (the server may ignore response_format)", format),
		Fix: fix}}
}

// chatFailure is the line for a chat request that failed: the failure
// without the server's text, and the key to change.
func chatFailure(e *Env, what, request string, err error) Result {
	f := messages.LLMFailureOf(err)
	msg := fmt.Sprintf("%s: failed — the server refused %s: %s", what, request, messages.ErrorCode(err))
	var me *messages.Error
	if errors.As(err, &me) {
		msg = fmt.Sprintf("%s: failed — %s: %s", what, request, me.Message)
	}
	fix := llm.Fix(err)
	if f != nil && f.Cause == messages.CauseTimeout {
		msg = fmt.Sprintf("%s: failed — %s got no answer within llm.request_timeout_seconds (%d)", what, request, e.Res.Config.LLM.RequestTimeoutSeconds)
		fix = "raise llm.request_timeout_seconds, or use a faster model or machine"
	}
	return Result{Status: Failed, Message: msg, Fix: fix}
}
