package ollama_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lisabot/lisa/testkit/ollama"
)

// TestTinyModelFiles: the model directory holds the files Ollama's
// converter reads; model.safetensors' header describes exactly the data
// after it; the tokenizer's merges join tokens of its vocabulary; and the
// same seed writes the same bytes.
func TestTinyModelFiles(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	for _, dir := range []string{a, b} {
		if err := ollama.WriteTinyModel(dir, 42); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"config.json", "tokenizer.json", "tokenizer_config.json", "generation_config.json", "model.safetensors"} {
		x, err := os.ReadFile(filepath.Join(a, name))
		if err != nil {
			t.Fatal(err)
		}
		y, _ := os.ReadFile(filepath.Join(b, name))
		if !bytes.Equal(x, y) {
			t.Errorf("%s differs between two writes with the same seed", name)
		}
	}
	st, _ := os.ReadFile(filepath.Join(a, "model.safetensors"))
	n := binary.LittleEndian.Uint64(st[:8])
	var header map[string]json.RawMessage
	if err := json.Unmarshal(st[8:8+n], &header); err != nil || n%8 != 0 {
		t.Fatalf("header (%d bytes): %v", n, err)
	}
	end := 0
	for name, raw := range header {
		if name == "__metadata__" {
			continue
		}
		var ti struct {
			Dtype   string `json:"dtype"`
			Shape   []int  `json:"shape"`
			Offsets [2]int `json:"data_offsets"`
		}
		if err := json.Unmarshal(raw, &ti); err != nil {
			t.Fatal(err)
		}
		size := 4
		for _, d := range ti.Shape {
			size *= d
		}
		if ti.Dtype != "F32" || ti.Offsets[1]-ti.Offsets[0] != size {
			t.Errorf("%s: %+v", name, ti)
		}
		end = max(end, ti.Offsets[1])
	}
	if len(header) != 1+1+2*9+2 || int(8+n)+end != len(st) {
		t.Fatalf("%d tensors, data ends at %d of %d bytes", len(header)-1, int(8+n)+end, len(st))
	}
	var tok struct {
		Model struct {
			Vocab  map[string]int `json:"vocab"`
			Merges []string       `json:"merges"`
		} `json:"model"`
	}
	raw, _ := os.ReadFile(filepath.Join(a, "tokenizer.json"))
	if err := json.Unmarshal(raw, &tok); err != nil {
		t.Fatal(err)
	}
	if len(tok.Model.Merges) < 300 {
		t.Fatalf("%d merges", len(tok.Model.Merges))
	}
	for _, m := range tok.Model.Merges {
		l, r, ok := strings.Cut(m, " ")
		_, okL := tok.Model.Vocab[l]
		_, okR := tok.Model.Vocab[r]
		_, okLR := tok.Model.Vocab[l+r]
		if !ok || !okL || !okR || !okLR {
			t.Fatalf("merge %q joins tokens outside the vocabulary", m)
		}
	}
}

// TestModelfile: num_ctx and the tools template appear only when asked.
func TestModelfile(t *testing.T) {
	with := ollama.Model{NumCtx: 512, Tools: true, Stops: []string{" a"}}.Modelfile("/m")
	without := ollama.Model{}.Modelfile("/m")
	if !strings.HasPrefix(with, "FROM /m\nPARAMETER num_ctx 512\n") || !strings.Contains(with, "{{- if .Tools }}") || !strings.Contains(with, `PARAMETER stop "<|im_end|>"`) ||
		!strings.HasSuffix(with, "PARAMETER stop \" a\"\n") {
		t.Errorf("with tools:\n%s", with)
	}
	if without != "FROM /m\n" {
		t.Errorf("without: %q", without)
	}
}

// TestServer (real Ollama): the server lists the three models, reports
// num_ctx in /api/show's parameters (not model_info's trained length),
// answers a chat request with text, refuses tools for the model without
// a tools template, and silently cuts a prompt longer than num_ctx,
// saying so only in its log.
func TestServer(t *testing.T) {
	s := ollama.Start(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	call := func(method, url, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	status, body := call(http.MethodGet, s.URL()+"/models", "")
	for _, m := range []string{ollama.ModelTools, ollama.ModelCtx512, ollama.ModelNoTools} {
		if status != 200 || !strings.Contains(body, `"id":"`+m+`:latest"`) {
			t.Fatalf("GET /v1/models: %d %s", status, body)
		}
	}
	status, body = call(http.MethodPost, s.Root()+"/api/show", `{"model":"`+ollama.ModelCtx512+`"}`)
	var show struct {
		Parameters   string         `json:"parameters"`
		ModelInfo    map[string]any `json:"model_info"`
		Capabilities []string       `json:"capabilities"`
	}
	if err := json.Unmarshal([]byte(body), &show); err != nil || status != 200 {
		t.Fatalf("POST /api/show: %d %s", status, body)
	}
	if !strings.Contains(show.Parameters, "num_ctx") || !strings.Contains(show.Parameters, "512") ||
		show.ModelInfo["llama.context_length"] != float64(ollama.TinyTrainedContext) || !strings.Contains(strings.Join(show.Capabilities, ","), "tools") {
		t.Errorf("POST /api/show: %s", body)
	}
	chat := func(model, extra, content string) (int, string) {
		b, _ := json.Marshal(content)
		return call(http.MethodPost, s.URL()+"/chat/completions",
			`{"model":"`+model+`","max_tokens":20,"messages":[{"role":"user","content":`+string(b)+`}]`+extra+`}`)
	}
	if status, body := chat(ollama.ModelTools, "", "Hello there"); status != 200 || !strings.Contains(body, `"object":"chat.completion"`) {
		t.Fatalf("chat: %d %s", status, body)
	}
	tools := `,"tools":[{"type":"function","function":{"name":"echo","parameters":{"type":"object","properties":{}}}}]`
	if status, body := chat(ollama.ModelNoTools, tools, "Hello"); status != 400 || !strings.Contains(body, "does not support tools") {
		t.Fatalf("tools on the model without: %d %s", status, body)
	}
	if status, body := chat(ollama.ModelTools, tools, "Hello"); status != 200 {
		t.Fatalf("tools on the model with: %d %s", status, body)
	}
	if strings.Contains(s.Log(), "truncating input prompt") {
		t.Fatal("short prompts were truncated")
	}
	status, body = chat(ollama.ModelCtx512, "", strings.Repeat("the water and the world ", 400))
	if status != 200 || !strings.Contains(body, `"prompt_tokens":512`) {
		t.Fatalf("long prompt: %d %s", status, body)
	}
	if !strings.Contains(s.Log(), "truncating input prompt") {
		t.Fatalf("the server did not log the cut:\n%s", s.Log())
	}
}
