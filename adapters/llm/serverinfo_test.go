package llm

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/lisabot/lisa/testkit/llmcorpus"
	"github.com/lisabot/lisa/testkit/llmfake"
)

// TestProbe: the window each server reports is read where it reports it
// (vLLM's max_model_len, llama.cpp's n_ctx, Ollama's num_ctx — not the
// trained length — or Ollama's default), with the key; a server that
// reports nothing gives an empty ServerInfo and no error.
func TestProbe(t *testing.T) {
	const key = "sk-probe-key-1"
	for _, c := range []struct {
		name  string
		opts  []llmfake.Option
		model string
		want  ServerInfo
	}{
		{"vLLM", llmcorpus.VLLMModels("m", 32768), "m",
			ServerInfo{Server: ServerVLLM, ContextTokens: 32768, ContextField: "max_model_len in GET /v1/models"}},
		{"vLLM, another model", llmcorpus.VLLMModels("other", 32768), "m", ServerInfo{}},
		{"llama.cpp", llmcorpus.LlamaCppProps("m", 4096), "m",
			ServerInfo{Server: ServerLlamaCpp, ContextTokens: 4096, ContextField: "n_ctx in GET /props"}},
		{"Ollama with num_ctx", llmcorpus.OllamaShow("m", 2048, true), "m",
			ServerInfo{Server: ServerOllama, ContextTokens: 2048, ContextField: "num_ctx in POST /api/show",
				TrainedTokens: llmcorpus.OllamaTrainedContext, Capabilities: []string{"completion", "tools"}}},
		{"Ollama without num_ctx", llmcorpus.OllamaShow("m", 0, false), "m",
			ServerInfo{Server: ServerOllama, ContextTokens: OllamaDefaultContext, ContextDefault: true,
				ContextField: "Ollama's default (the model sets no num_ctx)", TrainedTokens: llmcorpus.OllamaTrainedContext,
				Capabilities: []string{"completion"}}},
		{"OpenAI-like: nothing reported", []llmfake.Option{llmfake.WithModels("m")}, "m", ServerInfo{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := llmfake.Start(t, append([]llmfake.Option{llmfake.WithAPIKey(key)}, c.opts...)...)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			got, err := New(Config{BaseURL: srv.URL(), APIKey: key, Model: c.model, Timeout: 5 * time.Second}).Probe(ctx)
			if err != nil || !reflect.DeepEqual(got, c.want) {
				t.Fatalf("Probe = %+v, %v; want %+v", got, err, c.want)
			}
			// Without the key the side endpoints answer 401: nothing is read.
			got, err = New(Config{BaseURL: srv.URL(), APIKey: "wrong", Model: c.model, Timeout: 5 * time.Second}).Probe(ctx)
			if err != nil || !reflect.DeepEqual(got, ServerInfo{}) {
				t.Fatalf("Probe with a wrong key = %+v, %v", got, err)
			}
		})
	}
}

func TestNumCtx(t *testing.T) {
	for in, want := range map[string]int{
		"stop                           \"<|im_end|>\"\nnum_ctx                        512": 512,
		"num_ctx 8192":       8192,
		"stop \"x\"":         0,
		"num_ctx lots":       0,
		"num_ctx 0":          0,
		"":                   0,
		"num_ctx_extra 1024": 0,
	} {
		if got := numCtx(in); got != want {
			t.Errorf("numCtx(%q) = %d, want %d", in, got, want)
		}
	}
}
