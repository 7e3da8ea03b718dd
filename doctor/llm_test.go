package doctor_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/lisabot/lisa/devkit/llmscript"
	"github.com/lisabot/lisa/doctor"
	"github.com/lisabot/lisa/testkit/llmcorpus"
	"github.com/lisabot/lisa/testkit/llmfake"
)

// llmLine is one expected line of the llm section: its status, a piece of
// its message and a piece of its fix ("" when there is none to check).
type llmLine struct {
	status doctor.Status
	text   string
	fix    string
}

// replies returns the replies of the named corpus shapes, in order.
func replies(names ...string) []llmscript.Step {
	var out []llmscript.Step
	for _, n := range names {
		out = append(out, llmcorpus.ByName(n).Replies...)
	}
	return out
}

// TestDoctorLLMServerModes (#30): `lisa doctor --only llm` against the
// scripted model answering as vLLM, llama.cpp's llama-server, Ollama and
// LM Studio (their side endpoints from llmcorpus' server modes, their
// chat replies from the corpus shapes) prints one line per capability —
// the model list, the context window, a tool round trip, structured
// output — each ok, not supported or failed with the key or server
// setting to change, and exits 0, 1 or 2 accordingly. No secret is
// printed.
func TestDoctorLLMServerModes(t *testing.T) {
	answer := llmscript.Answer("kiwi")
	cases := []struct {
		name  string
		opts  []llmfake.Option
		model string // llm.model; "m" when empty
		extra string // more [llm] keys
		steps []llmscript.Step
		lines []llmLine // model, context window, tool calls, structured output
		code  int
	}{
		{name: "vLLM with the hermes parser", opts: llmcorpus.VLLMModels("m", 32768),
			steps: append(replies("vllm/hermes-tool-calls"), answer, llmcorpus.ByName("vllm/reasoning-content").Replies[0]),
			lines: []llmLine{
				{doctor.OK, `serves llm.model "m" (1 models listed)`, ""},
				{doctor.OK, "context window: vllm runs llm.model with a window of 32768 tokens (max_model_len in GET /v1/models); llm.context_window_tokens = 8192 fits", ""},
				{doctor.OK, "tool calls: ok — the model called web_search and answered after its result", ""},
				{doctor.OK, "structured output: ok — with response_format json_schema the reply is an answer object", ""},
			}, code: doctor.ExitOK},
		{name: "vLLM without --enable-auto-tool-choice, a short window", opts: llmcorpus.VLLMModels("m", 4096),
			steps: append(replies("vllm/no-auto-tool-choice"), llmcorpus.ByName("vllm/reasoning-content").Replies[0]),
			lines: []llmLine{
				{doctor.OK, `serves llm.model "m"`, ""},
				{doctor.Warning, "window of 4096 tokens (max_model_len in GET /v1/models), less than llm.context_window_tokens = 8192: vLLM refuses a longer request", "set llm.context_window_tokens = 4096, or give the model a longer window (vLLM's --max-model-len)"},
				{doctor.Warning, "tool calls: not supported — the server refused a request with tools; Lisa answers from the room alone, without research", "--enable-auto-tool-choice --tool-call-parser"},
				{doctor.OK, "structured output: ok", ""},
			}, code: doctor.ExitWarnings},
		{name: "llama.cpp --jinja, the call left as text", opts: llmcorpus.LlamaCppProps("m", 8192),
			steps: append(replies("llama.cpp/tool-call-as-text"), answer, llmcorpus.ByName("llama.cpp/answer").Replies[0]),
			lines: []llmLine{
				{doctor.OK, `serves llm.model "m"`, ""},
				{doctor.OK, "context window: llama.cpp runs llm.model with a window of 8192 tokens (n_ctx in GET /props); llm.context_window_tokens = 8192 fits", ""},
				{doctor.OK, "tool calls: ok — the model wrote its call to web_search as text, which Lisa runs (llm.text_tool_calls = \"auto\")", ""},
				{doctor.OK, "structured output: ok", ""},
			}, code: doctor.ExitOK},
		{name: "llama.cpp, the call left as text, text calls off", opts: llmcorpus.LlamaCppProps("m", 8192), extra: "text_tool_calls = false\n",
			steps: append(replies("llama.cpp/tool-call-as-text"), llmcorpus.ByName("llama.cpp/answer").Replies[0]),
			lines: []llmLine{
				{doctor.OK, `serves llm.model "m"`, ""},
				{doctor.OK, "8192 fits", ""},
				{doctor.Warning, "tool calls: the model wrote its call as text, which Lisa does not run while llm.text_tool_calls = \"never\"", "set llm.text_tool_calls = \"auto\""},
				{doctor.OK, "structured output: ok", ""},
			}, code: doctor.ExitWarnings},
		{name: "llama.cpp without --jinja, a small slot", opts: llmcorpus.LlamaCppProps("m", 2048),
			steps: append(replies("llama.cpp/no-jinja"), llmcorpus.ByName("llama.cpp/answer").Replies[0]),
			lines: []llmLine{
				{doctor.OK, `serves llm.model "m"`, ""},
				{doctor.Warning, "window of 2048 tokens (n_ctx in GET /props), less than llm.context_window_tokens = 8192: llama-server refuses a longer request", "--ctx-size"},
				{doctor.Warning, "tool calls: not supported", "start llama-server with --jinja"},
				{doctor.OK, "structured output: ok", ""},
			}, code: doctor.ExitWarnings},
		{name: "Ollama, no num_ctx, a model without tools", opts: llmcorpus.OllamaShow("m", 0, false),
			steps: append(replies("ollama/no-tools"), llmcorpus.ByName("ollama/answer").Replies[0]),
			lines: []llmLine{
				{doctor.OK, `serves llm.model "m" as "m:latest"`, ""},
				{doctor.Warning, "context window: ollama runs llm.model with Ollama's default window, 4096 tokens on a machine without a GPU (llm.model sets no num_ctx", "PARAMETER num_ctx in the model's Modelfile (or OLLAMA_CONTEXT_LENGTH for the server)"},
				{doctor.Warning, "tool calls: not supported", "`ollama show MODEL` lists tools among its capabilities"},
				{doctor.OK, "structured output: ok", ""},
			}, code: doctor.ExitWarnings},
		{name: "Ollama, num_ctx 16384, tools", opts: llmcorpus.OllamaShow("m", 16384, true),
			steps: append(replies("ollama/tool-calls"), answer, llmcorpus.ByName("ollama/answer").Replies[0]),
			lines: []llmLine{
				{doctor.OK, `serves llm.model "m" as "m:latest"`, ""},
				{doctor.OK, "context window: ollama runs llm.model with a window of 16384 tokens (num_ctx in POST /api/show); llm.context_window_tokens = 8192 fits", ""},
				{doctor.OK, "tool calls: ok — the model called web_search", ""},
				{doctor.OK, "structured output: ok", ""},
			}, code: doctor.ExitOK},
		{name: "Ollama, num_ctx below the window, tools, the answer cut at the limit", opts: llmcorpus.OllamaShow("m", 2048, true),
			steps: append(replies("ollama/tool-calls"), answer, llmcorpus.ByName("ollama/length").Replies[0]),
			lines: []llmLine{
				{doctor.OK, `serves llm.model "m" as "m:latest"`, ""},
				{doctor.Warning, "window of 2048 tokens (num_ctx in POST /api/show), less than llm.context_window_tokens = 8192: Ollama silently cuts the front of a longer prompt", "set llm.context_window_tokens = 2048"},
				{doctor.OK, "tool calls: ok", ""},
				{doctor.Warning, "structured output: the server took response_format json_schema, but the reply was cut at the token limit", "raise llm.max_output_tokens"},
			}, code: doctor.ExitWarnings},
		{name: "LM Studio refusing json_object", opts: []llmfake.Option{llmfake.WithModels("m")}, extra: "response_format = \"json_object\"\n",
			steps: append(replies("lmstudio/tool-calls"), answer, llmcorpus.ByName("lmstudio/json-object-refused").Replies[1]),
			lines: []llmLine{
				{doctor.OK, `serves llm.model "m"`, ""},
				{doctor.OK, "context window: not reported by this server", ""},
				{doctor.OK, "tool calls: ok", ""},
				{doctor.Failed, "structured output: failed — a request with response_format json_object", `set llm.response_format = "json_schema" or "none"`},
			}, code: doctor.ExitFailed},
		{name: "no structured output asked for", opts: []llmfake.Option{llmfake.WithModels("m")}, extra: "response_format = \"none\"\n",
			steps: append(replies("lmstudio/tool-calls"), answer),
			lines: []llmLine{
				{doctor.OK, `serves llm.model "m"`, ""},
				{doctor.OK, "context window: not reported", ""},
				{doctor.OK, "tool calls: ok", ""},
				{doctor.OK, `structured output: not asked for (llm.response_format = "none")`, ""},
			}, code: doctor.ExitOK},
		{name: "a model the server does not serve", opts: llmcorpus.VLLMModels("qwen3-8b", 32768), model: "qwen3:8b",
			lines: []llmLine{
				{doctor.Failed, `llm.model "qwen3:8b" is not among the models`, "set llm.model to one of the listed names"},
				{doctor.Skipped, "context window: not checked: the LLM server does not serve llm.model", ""},
				{doctor.Skipped, "tool calls: not checked", ""},
				{doctor.Skipped, "structured output: not checked", ""},
			}, code: doctor.ExitFailed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := llmfake.Start(t, append([]llmfake.Option{llmfake.WithAPIKey(llmKey)}, c.opts...)...)
			srv.Enqueue(c.steps...)
			model := c.model
			if model == "" {
				model = "m"
			}
			cfg := strings.Replace(offlineConfig("http://127.0.0.1:9", strings.TrimSuffix(srv.URL(), "/v1"), "http://127.0.0.1:9", "data"),
				`model = "m"`, `model = "`+model+`"`+"\n"+c.extra, 1)
			path := writeConfig(t, t.TempDir(), cfg)
			rep, err := doctor.Run(context.Background(), doctor.Options{ConfigPath: path, Getenv: offlineEnv, Only: []string{"llm"}})
			if err != nil {
				t.Fatal(err)
			}
			out := text(rep)
			if len(rep.Results) != len(c.lines) {
				t.Fatalf("%d lines, want %d:\n%s", len(rep.Results), len(c.lines), out)
			}
			for i, want := range c.lines {
				got := rep.Results[i]
				if got.Section != "llm" || got.Status != want.status || !strings.Contains(got.Message, want.text) || !strings.Contains(got.Fix, want.fix) {
					t.Errorf("line %d: want %s %q fix %q:\n%s", i+1, want.status, want.text, want.fix, out)
				}
			}
			if rep.Code() != c.code {
				t.Errorf("exit %d, want %d:\n%s", rep.Code(), c.code, out)
			}
			if srv.Pending() != 0 {
				t.Errorf("%d scripted replies left: the checks did not make the requests they should", srv.Pending())
			}
			noSecrets(t, out)
			checkDoctorRequests(t, srv.Requests(), c.model == "", !strings.Contains(c.extra, `"none"`))
		})
	}
}

// checkDoctorRequests: the tool round trip offers exactly the test tool
// and, when the model called it, sends its result back under the call's
// ID; the structured-output request asks for the answer schema, offers no
// tool and names the configured token limit; every request carries the
// key.
func checkDoctorRequests(t *testing.T, reqs []llmscript.Request, served, structuredAsked bool) {
	t.Helper()
	if !served {
		if len(reqs) != 0 {
			t.Errorf("%d chat requests for a model the server does not serve", len(reqs))
		}
		return
	}
	if len(reqs) < 2 {
		t.Fatalf("%d chat requests, want the tool round trip and the structured-output request", len(reqs))
	}
	for _, r := range reqs {
		if !r.Authorized {
			t.Errorf("request %d without the key", r.Seq)
		}
	}
	first := reqs[0]
	if len(first.Tools) != 1 || first.Tools[0].Name != "echo" || first.ResponseFormat != nil {
		t.Errorf("tool request: tools %+v, response_format %s", first.Tools, first.ResponseFormat)
	}
	if len(reqs) == 3 || (!structuredAsked && len(reqs) == 2) {
		second := reqs[1]
		last := second.Messages[len(second.Messages)-1]
		prev := second.Messages[len(second.Messages)-2]
		if last.Role != "tool" || len(prev.ToolCalls) != 1 || last.ToolCallID != prev.ToolCalls[0].ID || last.ToolCallID == "" {
			t.Errorf("the tool's result is not sent back under the call's ID: %+v", second.Messages)
		}
	}
	if !structuredAsked {
		if last := reqs[len(reqs)-1]; len(last.Tools) == 0 {
			t.Errorf("a structured-output request was sent with llm.response_format = \"none\"")
		}
		return
	}
	structured := reqs[len(reqs)-1]
	if len(structured.Tools) != 0 || structured.MaxTokens == 0 {
		t.Errorf("structured-output request: tools %+v, max_tokens %d", structured.Tools, structured.MaxTokens)
	}
	var rf struct {
		Type       string `json:"type"`
		JSONSchema *struct {
			Schema json.RawMessage `json:"schema"`
		} `json:"json_schema"`
	}
	if structured.ResponseFormat != nil {
		if err := json.Unmarshal(structured.ResponseFormat, &rf); err != nil {
			t.Fatal(err)
		}
		if rf.Type == "json_schema" && (rf.JSONSchema == nil || !strings.Contains(string(rf.JSONSchema.Schema), `"source_urls"`)) {
			t.Errorf("json_schema without the answer schema: %s", structured.ResponseFormat)
		}
	}
}
