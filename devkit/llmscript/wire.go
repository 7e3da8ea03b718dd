package llmscript

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
)

// Request is one recorded chat-completions request. The Authorization
// header value is deliberately not kept.
type Request struct {
	// Seq is the 0-based arrival index.
	Seq int
	// Time is the arrival time from the server's clock.
	Time time.Time
	// Authorized reports whether the bearer key matched (always true when
	// no key is required).
	Authorized bool
	// Model is the requested model.
	Model string
	// Messages are the conversation messages in order.
	Messages []Message
	// Tools are the offered function tools.
	Tools []Tool
	// ToolChoice is the raw tool_choice value, or nil.
	ToolChoice json.RawMessage
	// MaxTokens is max_tokens (0 if absent).
	MaxTokens int
	// MaxCompletionTokens is max_completion_tokens (0 if absent).
	MaxCompletionTokens int
	// Temperature is temperature, or nil if absent.
	Temperature *float64
	// ResponseFormat is the raw response_format value, or nil.
	ResponseFormat json.RawMessage
	// Stream reports whether streaming was requested (it is rejected).
	Stream bool
	// Body is the raw request body.
	Body []byte
	// ParseError is set when Body was not a valid request.
	ParseError string
}

// Message is one recorded conversation message.
type Message struct {
	// Role is "system", "user", "assistant" or "tool".
	Role string
	// Content is the text content; array content has its text parts joined.
	Content string
	// Name is the optional participant name.
	Name string
	// ToolCalls are the calls of an assistant message.
	ToolCalls []ToolCall
	// ToolCallID ties a tool message to its call.
	ToolCallID string
}

// Tool is one recorded function tool offered to the model.
type Tool struct {
	// Type is the tool type, normally "function".
	Type string
	// Name is the function name.
	Name string
	// Description is the function description.
	Description string
	// Parameters is the raw JSON schema of the arguments.
	Parameters json.RawMessage
	// Strict is the function's strict flag.
	Strict bool
}

// LastUser returns the content of the last "user" message, or "".
func (r Request) LastUser() string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == "user" {
			return r.Messages[i].Content
		}
	}
	return ""
}

// ToolNames returns the names of the offered tools in order.
func (r Request) ToolNames() []string {
	names := make([]string, len(r.Tools))
	for i, t := range r.Tools {
		names[i] = t.Name
	}
	return names
}

func (r Request) clone() Request {
	r.Body = bytes.Clone(r.Body)
	r.ToolChoice = bytes.Clone(r.ToolChoice)
	r.ResponseFormat = bytes.Clone(r.ResponseFormat)
	if r.Temperature != nil {
		t := *r.Temperature
		r.Temperature = &t
	}
	r.Messages = slices.Clone(r.Messages)
	for i := range r.Messages {
		r.Messages[i].ToolCalls = slices.Clone(r.Messages[i].ToolCalls)
	}
	r.Tools = slices.Clone(r.Tools)
	for i := range r.Tools {
		r.Tools[i].Parameters = bytes.Clone(r.Tools[i].Parameters)
	}
	return r
}

type wireFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type wireToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function wireFunction `json:"function"`
}

type wireRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role       string          `json:"role"`
		Content    json.RawMessage `json:"content"`
		Name       string          `json:"name"`
		ToolCalls  []wireToolCall  `json:"tool_calls"`
		ToolCallID string          `json:"tool_call_id"`
	} `json:"messages"`
	Tools []struct {
		Type     string `json:"type"`
		Function struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
			Strict      bool            `json:"strict"`
		} `json:"function"`
	} `json:"tools"`
	ToolChoice          json.RawMessage `json:"tool_choice"`
	MaxTokens           int             `json:"max_tokens"`
	MaxCompletionTokens int             `json:"max_completion_tokens"`
	Temperature         *float64        `json:"temperature"`
	ResponseFormat      json.RawMessage `json:"response_format"`
	Stream              bool            `json:"stream"`
}

// parse fills r from a JSON request body.
func (r *Request) parse(body []byte) error {
	var w wireRequest
	if err := json.Unmarshal(body, &w); err != nil {
		return err
	}
	r.Model, r.ToolChoice, r.ResponseFormat = w.Model, w.ToolChoice, w.ResponseFormat
	r.MaxTokens, r.MaxCompletionTokens = w.MaxTokens, w.MaxCompletionTokens
	r.Temperature, r.Stream = w.Temperature, w.Stream
	for _, m := range w.Messages {
		content, err := textContent(m.Content)
		if err != nil {
			return fmt.Errorf("message %d content: %w", len(r.Messages), err)
		}
		msg := Message{Role: m.Role, Content: content, Name: m.Name, ToolCallID: m.ToolCallID}
		for _, c := range m.ToolCalls {
			msg.ToolCalls = append(msg.ToolCalls, ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: c.Function.Arguments})
		}
		r.Messages = append(r.Messages, msg)
	}
	for _, t := range w.Tools {
		f := t.Function
		r.Tools = append(r.Tools, Tool{Type: t.Type, Name: f.Name, Description: f.Description, Parameters: f.Parameters, Strict: f.Strict})
	}
	return nil
}

// textContent decodes message content: a string, null, or an array of
// parts whose "text" fields are joined with newlines.
func textContent(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", err
	}
	texts := make([]string, 0, len(parts))
	for _, p := range parts {
		if p.Type == "text" {
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, "\n"), nil
}

type wireCompletion struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []wireChoice `json:"choices"`
	Usage   struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		TotalTokens      int `json:"total_tokens"`
	} `json:"usage"`
}

type wireChoice struct {
	Index   int `json:"index"`
	Message struct {
		Role      string         `json:"role"`
		Content   *string        `json:"content"`
		ToolCalls []wireToolCall `json:"tool_calls,omitempty"`
	} `json:"message"`
	FinishReason string `json:"finish_reason"`
}

// completion builds the reply body for a text or tool-calls step.
func (s *Server) completion(req Request, step Step) wireCompletion {
	var c wireCompletion
	c.ID = fmt.Sprintf("chatcmpl-fake-%d", req.Seq)
	c.Object, c.Created, c.Model = "chat.completion", s.now().Unix(), req.Model
	if c.Model == "" {
		c.Model = s.models[0]
	}
	c.Choices = make([]wireChoice, 1)
	ch := &c.Choices[0]
	ch.Message.Role, ch.FinishReason = "assistant", step.finishReason
	completion := words(step.content)
	if step.kind == kindText {
		content := step.content
		ch.Message.Content = &content
	}
	for i, call := range step.calls {
		if call.ID == "" {
			call.ID = fmt.Sprintf("call_fake_%d_%d", req.Seq, i)
		}
		ch.Message.ToolCalls = append(ch.Message.ToolCalls,
			wireToolCall{ID: call.ID, Type: "function", Function: wireFunction{call.Name, call.Arguments}})
		completion += 1 + words(call.Arguments)
	}
	u := Usage{CompletionTokens: completion}
	for _, m := range req.Messages {
		u.PromptTokens += 1 + words(m.Content)
	}
	if step.usage != nil {
		u = *step.usage
	}
	c.Usage.PromptTokens, c.Usage.CompletionTokens = u.PromptTokens, u.CompletionTokens
	c.Usage.TotalTokens = u.PromptTokens + u.CompletionTokens
	return c
}

func words(s string) int { return len(strings.Fields(s)) }

func (s *Server) listModels(w http.ResponseWriter) {
	type model struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	list := struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}{Object: "list", Data: []model{}}
	for _, m := range s.models {
		list.Data = append(list.Data, model{ID: m, Object: "model", OwnedBy: "llmscript"})
	}
	writeJSON(w, http.StatusOK, list)
}

// writeError writes an error step as an OpenAI-style error body.
func writeError(w http.ResponseWriter, step Step) {
	type apiError struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    string  `json:"code"`
	}
	writeJSON(w, step.status, struct {
		Error apiError `json:"error"`
	}{apiError{Message: step.content, Type: step.errType, Code: step.errCode}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil { // unreachable: all reply types marshal
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
