package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// Server dialects [Client.Probe] recognises.
const (
	ServerVLLM     = "vllm"
	ServerLlamaCpp = "llama.cpp"
	ServerOllama   = "ollama"
)

// OllamaDefaultContext is the window Ollama (v0.17) gives a model whose
// Modelfile sets no num_ctx, on a machine without a GPU and without
// OLLAMA_CONTEXT_LENGTH (with 24 GB of VRAM it is 32768, with 48 GB
// 262144): ollama v0.17.4 server/routes.go (Serve, "vram-based default
// context").
const OllamaDefaultContext = 4096

// ServerInfo is what a server tells about how it runs llm.model, beyond
// the OpenAI API.
type ServerInfo struct {
	// Server is the dialect the information came from: [ServerVLLM],
	// [ServerLlamaCpp], [ServerOllama], or "" when the server reports
	// nothing Lisa reads (OpenAI, LM Studio, a proxy).
	Server string
	// ContextTokens is the window the server runs the model with; 0 when
	// not reported.
	ContextTokens int
	// ContextField says where ContextTokens was read: "max_model_len in
	// GET /v1/models" (vLLM), "n_ctx in GET /props" (llama.cpp: the
	// window of one slot), "num_ctx in POST /api/show" (Ollama).
	ContextField string
	// ContextDefault is set when Ollama's model sets no num_ctx:
	// ContextTokens is then [OllamaDefaultContext], an assumption.
	ContextDefault bool
	// TrainedTokens is the length the model was trained for, where the
	// server says (Ollama's model_info "<arch>.context_length"); it is
	// not the window the server runs.
	TrainedTokens int
	// Capabilities are Ollama's capabilities of the model ("completion",
	// "tools", …); nil when not reported.
	Capabilities []string
}

// Probe asks the server how it runs the model, in the dialects of the
// servers that say: vLLM's max_model_len in GET /v1/models
// (vllm/entrypoints/openai/protocol.py, ModelCard), llama.cpp's GET /props
// (default_generation_settings.n_ctx, the context of one slot:
// tools/server/server-context.cpp, get_props), and Ollama's POST
// /api/show (the num_ctx line of its parameters text — model_info's
// context_length is the trained length, not the window; ollama v0.17.4
// server/routes.go, ShowHandler). The last two live beside /v1, at the
// server's root. A probe that fails or does not match means "not this
// server"; a server that matches none gives an empty ServerInfo and no
// error. Each request is bounded by Timeout and sends the API key.
func (c *Client) Probe(ctx context.Context) (ServerInfo, error) {
	base := strings.TrimRight(c.cfg.BaseURL, "/")
	root := strings.TrimSuffix(base, "/v1")
	var models struct {
		Data []struct {
			ID          string `json:"id"`
			MaxModelLen int    `json:"max_model_len"`
			OwnedBy     string `json:"owned_by"`
		} `json:"data"`
	}
	if err := c.getJSON(ctx, http.MethodGet, base+"/models", nil, &models); err != nil && ctx.Err() != nil {
		return ServerInfo{}, ctx.Err()
	}
	for _, m := range models.Data {
		if m.ID == c.cfg.Model && m.MaxModelLen > 0 {
			return ServerInfo{Server: ServerVLLM, ContextTokens: m.MaxModelLen, ContextField: "max_model_len in GET /v1/models"}, nil
		}
	}
	var props struct {
		Settings *struct {
			NCtx int `json:"n_ctx"`
		} `json:"default_generation_settings"`
		TotalSlots int `json:"total_slots"`
	}
	if err := c.getJSON(ctx, http.MethodGet, root+"/props", nil, &props); err == nil && props.Settings != nil && props.Settings.NCtx > 0 {
		return ServerInfo{Server: ServerLlamaCpp, ContextTokens: props.Settings.NCtx, ContextField: "n_ctx in GET /props"}, nil
	} else if ctx.Err() != nil {
		return ServerInfo{}, ctx.Err()
	}
	var show struct {
		Parameters   *string        `json:"parameters"`
		ModelInfo    map[string]any `json:"model_info"`
		Capabilities []string       `json:"capabilities"`
	}
	body, _ := json.Marshal(map[string]string{"model": c.cfg.Model})
	if err := c.getJSON(ctx, http.MethodPost, root+"/api/show", body, &show); err == nil && (show.ModelInfo != nil || show.Parameters != nil) {
		info := ServerInfo{Server: ServerOllama, Capabilities: show.Capabilities}
		if show.Capabilities == nil {
			info.Capabilities = []string{}
		}
		for k, v := range show.ModelInfo {
			if n, ok := v.(float64); ok && strings.HasSuffix(k, ".context_length") {
				info.TrainedTokens = int(n)
			}
		}
		if show.Parameters != nil {
			info.ContextTokens = numCtx(*show.Parameters)
		}
		if info.ContextTokens > 0 {
			info.ContextField = "num_ctx in POST /api/show"
		} else {
			info.ContextTokens, info.ContextDefault = OllamaDefaultContext, true
			info.ContextField = "Ollama's default (the model sets no num_ctx)"
		}
		return info, nil
	} else if ctx.Err() != nil {
		return ServerInfo{}, ctx.Err()
	}
	return ServerInfo{}, nil
}

// numCtx reads "num_ctx N" from Ollama's parameters text (one parameter a
// line, name and value separated by spaces); 0 when absent.
func numCtx(params string) int {
	for _, line := range strings.Split(params, "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && f[0] == "num_ctx" {
			if n, err := strconv.Atoi(f[1]); err == nil && n > 0 {
				return n
			}
		}
	}
	return 0
}

// getJSON sends one request (body as JSON, or none) with the API key and
// decodes a 200 reply into out.
func (c *Client) getJSON(ctx context.Context, method, url string, body []byte, out any) error {
	ctx, cancel := c.attemptContext(ctx)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.cfg.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.cfg.APIKey)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}
