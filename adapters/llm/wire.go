package llm

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptrace"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
)

// DefaultMaxResponseBytes bounds the body of one reply when
// Config.MaxResponseBytes is not set: far above any answer Lisa accepts,
// far below what a model stuck in a loop can write.
const DefaultMaxResponseBytes = 4 << 20

// maxServerMessage bounds the server's error text kept in an LLMFailure,
// after the secrets in it are redacted.
const maxServerMessage = 300

// maxRawServerMessage bounds the server's error text read from a reply,
// before redaction: longer than maxServerMessage, so that a secret the
// server echoes near the cut is redacted whole rather than cut in two.
const maxRawServerMessage = 4096

// errResponseTooLarge ends a reply whose body exceeds the bound.
var errResponseTooLarge = errors.New("llm: response body exceeds the size limit")

// attemptInfo is what the transport learned about one attempt's reply,
// for classifying its failure: go-openai keeps neither headers nor the
// body of error replies in all of their shapes.
type attemptInfo struct {
	retryAfter string
	status     int
	// err is the server's error object, when the reply carried one (in
	// an error status, or in a 200 reply without choices).
	err *wireError
	// streamed reports that an unasked-for event stream was assembled.
	streamed bool
	// wrote reports that net/http wrote the whole request out
	// (httptrace's WroteRequest without an error); it may be set from the
	// transport's writing goroutine.
	wrote atomic.Bool
}

// reached reports whether the attempt reached the server: the request
// was written out whole, or a reply (any status) began. A refused
// connection, a name that did not resolve and a request refused before
// it was sent did not.
func (i *attemptInfo) reached() bool { return i.status != 0 || i.wrote.Load() }

// wireError is an error object as servers send it, in any of their
// shapes (see parseWireError).
type wireError struct {
	Message, Type, Code, Param string
	// Status is a status code the object itself named (code: 429).
	Status int
}

// infoKey keys the per-attempt *attemptInfo in a request context.
type infoKey struct{}

// wireTransport bounds and reads every reply, and turns the reply shapes
// real servers send into the one go-openai decodes (see normalizeChat).
type wireTransport struct {
	base     http.RoundTripper
	maxBytes int64
	// zeroTemperature adds "temperature": 0 to chat requests: go-openai
	// omits a zero temperature, and an operator who configured 0 wants
	// it sent.
	zeroTemperature bool
}

// RoundTrip implements http.RoundTripper.
func (t wireTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	chat := r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/chat/completions")
	if chat && t.zeroTemperature && r.Body != nil {
		nr, err := withZeroTemperature(r)
		if err != nil {
			return nil, err
		}
		r = nr
	}
	resp, err := t.base.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	info, _ := r.Context().Value(infoKey{}).(*attemptInfo)
	if info != nil {
		info.retryAfter = resp.Header.Get("Retry-After")
		info.status = resp.StatusCode
	}
	body, err := readBounded(resp.Body, t.maxBytes)
	_ = resp.Body.Close()
	if err != nil {
		return nil, err
	}
	ok := resp.StatusCode >= 200 && resp.StatusCode < 300
	switch {
	case !ok:
		if we := parseWireError(body); we != nil && info != nil {
			info.err = we
		}
	case chat:
		if isEventStream(resp.Header.Get("Content-Type"), body) {
			if assembled, aerr := assembleStream(body); aerr == nil {
				body = assembled
				if info != nil {
					info.streamed = true
				}
			}
		}
		if we, status := errorInOK(body); we != nil {
			// A 200 that carries an error object and no choices: a
			// failure, with the status the object names or 502.
			if info != nil {
				info.err, info.status = we, status
			}
			resp.StatusCode, resp.Status = status, strconv.Itoa(status)+" "+http.StatusText(status)
			body = canonicalError(we)
		} else if n, changed := normalizeChat(body); changed {
			body = n
		}
		resp.Header.Set("Content-Type", "application/json")
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	resp.Header.Del("Content-Length")
	return resp, nil
}

// withZeroTemperature returns a copy of r whose JSON body also says
// "temperature": 0, unless it names a temperature already.
func withZeroTemperature(r *http.Request) (*http.Request, error) {
	body, err := io.ReadAll(r.Body)
	_ = r.Body.Close()
	if err != nil {
		return nil, err
	}
	var probe struct {
		Temperature *json.RawMessage `json:"temperature"`
	}
	if json.Unmarshal(body, &probe) == nil && probe.Temperature == nil && bytes.HasPrefix(bytes.TrimSpace(body), []byte("{")) {
		trimmed := bytes.TrimSpace(body)
		body = append([]byte(`{"temperature":0,`), trimmed[1:]...)
		if bytes.Equal(bytes.TrimSpace(trimmed[1:]), []byte("}")) {
			body = []byte(`{"temperature":0}`)
		}
	}
	nr := r.Clone(r.Context())
	nr.Body = io.NopCloser(bytes.NewReader(body))
	nr.ContentLength = int64(len(body))
	nr.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	return nr, nil
}

// readBounded reads all of rc, failing with errResponseTooLarge past max
// bytes. A body that never ends is cut by the request's deadline.
func readBounded(rc io.Reader, max int64) ([]byte, error) {
	body, err := io.ReadAll(io.LimitReader(rc, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(body)) > max {
		return nil, errResponseTooLarge
	}
	return body, nil
}

// parseWireError reads the error object of a reply body, in the shapes
// servers use:
//
//	{"error": {"message", "type", "code", "param"}}   OpenAI, Ollama, llama.cpp, newer vLLM
//	{"error": "text"}                                   LM Studio
//	{"object": "error", "message", "type", "code"}      older vLLM, Mistral
//	{"detail": "text"}                                  FastAPI-based servers
//	any other text                                      proxies' HTML or plain pages
//
// It returns nil for an empty body.
func parseWireError(body []byte) *wireError {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return nil
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(body, &top) != nil {
		return &wireError{Message: clipText(string(body), maxRawServerMessage)}
	}
	if raw, ok := top["error"]; ok {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return &wireError{Message: clipText(s, maxRawServerMessage)}
		}
		var obj map[string]json.RawMessage
		if json.Unmarshal(raw, &obj) == nil {
			return errorFields(obj)
		}
	}
	if _, ok := top["message"]; ok {
		return errorFields(top)
	}
	if raw, ok := top["detail"]; ok {
		return &wireError{Message: clipText(detailText(raw), maxRawServerMessage)}
	}
	return &wireError{Message: clipText(string(body), maxRawServerMessage)}
}

// errorFields reads message, type, code and param of an error object;
// code may be a string or a number.
func errorFields(obj map[string]json.RawMessage) *wireError {
	we := &wireError{
		Message: clipText(rawText(obj["message"]), maxRawServerMessage),
		Type:    rawText(obj["type"]),
		Param:   rawText(obj["param"]),
	}
	if raw := obj["code"]; len(raw) > 0 {
		var n json.Number
		if json.Unmarshal(raw, &n) == nil {
			if i, err := n.Int64(); err == nil && i >= 100 && i <= 599 {
				we.Status = int(i)
			}
			we.Code = n.String()
		} else {
			we.Code = rawText(raw)
		}
	}
	return we
}

// rawText renders a JSON value as text: a string as itself, null as "",
// anything else as its JSON.
func rawText(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// detailText reads a FastAPI "detail": a string, or pydantic's list of
// validation errors, of which only where ("loc") and what ("msg") are
// kept — their "input" echoes the request, the room's messages with it.
func detailText(raw json.RawMessage) string {
	var items []struct {
		Loc []any  `json:"loc"`
		Msg string `json:"msg"`
	}
	if json.Unmarshal(raw, &items) != nil {
		return rawText(raw)
	}
	parts := make([]string, 0, len(items))
	for _, it := range items {
		loc := make([]string, 0, len(it.Loc))
		for _, l := range it.Loc {
			loc = append(loc, fmt.Sprint(l))
		}
		parts = append(parts, strings.Join(loc, ".")+": "+it.Msg)
	}
	return strings.Join(parts, "; ")
}

// errorInOK reports an error object in a 2xx chat reply that has no
// choices, and the status it stands for: the one its code names when that
// is an HTTP error status, else 502.
func errorInOK(body []byte) (*wireError, int) {
	var probe struct {
		Error   json.RawMessage   `json:"error"`
		Choices []json.RawMessage `json:"choices"`
	}
	if json.Unmarshal(body, &probe) != nil || len(probe.Error) == 0 || string(probe.Error) == "null" || len(probe.Choices) > 0 {
		return nil, 0
	}
	we := parseWireError(body)
	if we == nil {
		return nil, 0
	}
	if we.Status >= 400 {
		return we, we.Status
	}
	return we, http.StatusBadGateway
}

// canonicalError renders we as an OpenAI error body.
func canonicalError(we *wireError) []byte {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": we.Message, "type": we.Type, "code": we.Code, "param": we.Param}})
	return b
}

// isEventStream reports whether a reply is a server-sent event stream,
// by its content type or, when that is wrong, by its first line.
func isEventStream(contentType string, body []byte) bool {
	if mt, _, err := mime.ParseMediaType(contentType); err == nil && mt == "text/event-stream" {
		return true
	}
	t := bytes.TrimLeft(body, " \t\r\n")
	return bytes.HasPrefix(t, []byte("data:")) || bytes.HasPrefix(t, []byte("event:"))
}

// streamChunk is one chat.completion.chunk of an event stream.
type streamChunk struct {
	ID      string `json:"id"`
	Model   string `json:"model"`
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Role      string          `json:"role"`
			Content   json.RawMessage `json:"content"`
			Refusal   string          `json:"refusal"`
			ToolCalls []struct {
				Index    *int   `json:"index"`
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct {
					Name      string          `json:"name"`
					Arguments json.RawMessage `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		// Some servers send whole messages in their chunks.
		Message *json.RawMessage `json:"message"`
		// Text is a completions-style chunk's text.
		Text         *string `json:"text"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *json.RawMessage `json:"usage"`
	Error json.RawMessage  `json:"error"`
}

// assembleStream turns a server-sent event stream of chat completion
// chunks into one chat.completion body: the first choice's content
// deltas joined, its tool calls assembled by index, the last finish
// reason and the usage. A stream that carries an error object becomes
// that error object.
func assembleStream(body []byte) ([]byte, error) {
	var (
		content  strings.Builder
		refusal  strings.Builder
		id, mod  string
		finish   string
		usage    *json.RawMessage
		calls    = map[int]*wireCall{}
		order    []int
		sawChunk bool
	)
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 0, 64<<10), len(body)+1)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		data, ok := strings.CutPrefix(line, "data:")
		if !ok {
			continue
		}
		data = strings.TrimSpace(data)
		if data == "" || data == "[DONE]" {
			continue
		}
		var ch streamChunk
		if err := json.Unmarshal([]byte(data), &ch); err != nil {
			return nil, err
		}
		if len(ch.Error) > 0 && string(ch.Error) != "null" {
			return []byte(`{"error":` + string(ch.Error) + `}`), nil
		}
		sawChunk = true
		id, mod = firstNonEmpty(id, ch.ID), firstNonEmpty(mod, ch.Model)
		if ch.Usage != nil {
			usage = ch.Usage
		}
		for _, c := range ch.Choices {
			if c.Index != 0 {
				continue
			}
			if c.FinishReason != nil && *c.FinishReason != "" {
				finish = *c.FinishReason
			}
			if c.Text != nil {
				content.WriteString(*c.Text)
			}
			content.WriteString(textOf(c.Delta.Content))
			refusal.WriteString(c.Delta.Refusal)
			for i, tc := range c.Delta.ToolCalls {
				idx := i
				if tc.Index != nil {
					idx = *tc.Index
				}
				wc, seen := calls[idx]
				if !seen {
					wc = &wireCall{}
					calls[idx] = wc
					order = append(order, idx)
				}
				wc.ID = firstNonEmpty(wc.ID, tc.ID)
				wc.Name += tc.Function.Name
				wc.Args.WriteString(rawArgs(tc.Function.Arguments))
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if !sawChunk {
		return nil, errors.New("llm: event stream without chunks")
	}
	sort.Ints(order)
	msg := map[string]any{"role": "assistant", "content": content.String()}
	if refusal.Len() > 0 {
		msg["refusal"] = refusal.String()
	}
	if len(order) > 0 {
		tcs := make([]map[string]any, 0, len(order))
		for _, i := range order {
			c := calls[i]
			tcs = append(tcs, map[string]any{"id": c.ID, "type": "function",
				"function": map[string]any{"name": c.Name, "arguments": c.Args.String()}})
		}
		msg["tool_calls"] = tcs
	}
	out := map[string]any{"id": id, "object": "chat.completion", "model": mod,
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}}}
	if usage != nil {
		out["usage"] = usage
	}
	return json.Marshal(out)
}

// wireCall is a tool call being assembled from stream deltas.
type wireCall struct {
	ID, Name string
	Args     strings.Builder
}

// rawArgs renders tool call arguments as the string the OpenAI format
// wants: a string as itself, an object or other value as its JSON.
func rawArgs(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(bytes.TrimSpace(raw))
}

// textOf renders message content: a string as itself, an array of parts
// as its text parts joined (parts of other types, such as Mistral's
// "thinking" chunks, are left out), null as "".
func textOf(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) == nil {
		var b strings.Builder
		for _, p := range parts {
			if p.Type == "text" {
				b.WriteString(p.Text)
			}
		}
		return b.String()
	}
	return ""
}

// normalizeChat rewrites the parts of a chat completion that go-openai
// cannot decode although real servers send them: tool call arguments
// given as an object instead of a JSON string (llama.cpp), and content
// given as an array of parts (Mistral's reasoning models). It reports
// whether it changed anything; an undecodable body is left alone for
// the decoder to refuse.
func normalizeChat(body []byte) ([]byte, bool) {
	var top map[string]json.RawMessage
	if json.Unmarshal(body, &top) != nil {
		return body, false
	}
	var choices []map[string]json.RawMessage
	if json.Unmarshal(top["choices"], &choices) != nil {
		return body, false
	}
	changed := false
	for _, ch := range choices {
		var msg map[string]json.RawMessage
		if json.Unmarshal(ch["message"], &msg) != nil {
			continue
		}
		msgChanged := false
		if c := bytes.TrimSpace(msg["content"]); len(c) > 0 && c[0] == '[' {
			msg["content"], _ = json.Marshal(textOf(c))
			msgChanged = true
		}
		var calls []map[string]json.RawMessage
		if json.Unmarshal(msg["tool_calls"], &calls) == nil {
			callsChanged := false
			for _, call := range calls {
				var fn map[string]json.RawMessage
				if json.Unmarshal(call["function"], &fn) != nil {
					continue
				}
				if a := bytes.TrimSpace(fn["arguments"]); len(a) > 0 && a[0] != '"' && string(a) != "null" {
					fn["arguments"], _ = json.Marshal(string(a))
					call["function"], _ = json.Marshal(fn)
					callsChanged = true
				}
				if id := bytes.TrimSpace(call["id"]); len(id) > 0 && id[0] != '"' && string(id) != "null" {
					call["id"], _ = json.Marshal(string(id)) // a numeric id
					callsChanged = true
				}
			}
			if callsChanged {
				msg["tool_calls"], _ = json.Marshal(calls)
				msgChanged = true
			}
		}
		if msgChanged {
			ch["message"], _ = json.Marshal(msg)
			changed = true
		}
	}
	if !changed {
		return body, false
	}
	top["choices"], _ = json.Marshal(choices)
	out, err := json.Marshal(top)
	if err != nil {
		return body, false
	}
	return out, true
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// clipText bounds s to n bytes at a rune boundary, marking the cut.
func clipText(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }

// withInfo returns ctx carrying a fresh attemptInfo, and tracing the
// request's writing into it.
func withInfo(ctx context.Context) (context.Context, *attemptInfo) {
	info := &attemptInfo{}
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteRequest: func(w httptrace.WroteRequestInfo) {
		if w.Err == nil {
			info.wrote.Store(true)
		}
	}})
	return context.WithValue(ctx, infoKey{}, info), info
}

// String describes a wire error for tests, without its message.
func (we *wireError) String() string {
	return fmt.Sprintf("type=%q code=%q param=%q status=%d", we.Type, we.Code, we.Param, we.Status)
}
