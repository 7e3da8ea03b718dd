package ollama

import (
	"fmt"
	"strings"
)

// Model says how [Server.Create] imports the tiny model.
type Model struct {
	// NumCtx is the model's PARAMETER num_ctx: the context window Ollama
	// runs it with. Zero leaves it unset, so Ollama's default applies
	// (4096 on a machine without a GPU).
	NumCtx int
	// Tools gives the model a ChatML template that uses .Tools, so Ollama
	// advertises and accepts tools; without it the model gets Ollama's
	// default template and every request with tools is refused ("… does
	// not support tools").
	Tools bool
	// Stops are more stop strings (PARAMETER stop): generation ends where
	// one appears, with finish_reason "stop", and the text before it is
	// the reply.
	Stops []string
}

// ShortStops end the random model's replies after a few tokens, as a
// trained model ends its turn: a word starting with a, h, m, s, t or w
// (with the space before it) stops generation, and what came before is
// the reply. Without them the model rarely emits its end token and every
// reply runs to max_tokens (finish_reason "length").
var ShortStops = []string{" a", " h", " m", " s", " t", " w"}

// chatMLTools is a ChatML template in Ollama's template language whose
// system turn lists the tools and asks for <tool_call> blocks (the
// Hermes/Qwen convention, which Ollama's tool parser reads back), and
// which renders tool calls and tool results in the conversation.
const chatMLTools = `{{- if .Messages }}
{{- if or .System .Tools }}<|im_start|>system
{{- if .System }}
{{ .System }}
{{- end }}
{{- if .Tools }}

# Tools

You may call functions to help with the user's request. Their signatures are within <tools></tools>:
<tools>
{{- range .Tools }}
{"type": "function", "function": {{ .Function }}}
{{- end }}
</tools>

To call one, write a JSON object with its name and arguments within <tool_call></tool_call>:
<tool_call>
{"name": <function-name>, "arguments": <args-json-object>}
</tool_call>
{{- end }}<|im_end|>
{{ end }}
{{- range $i, $_ := .Messages }}
{{- $last := eq (len (slice $.Messages $i)) 1 -}}
{{- if eq .Role "user" }}<|im_start|>user
{{ .Content }}<|im_end|>
{{ else if eq .Role "assistant" }}<|im_start|>assistant
{{ if .Content }}{{ .Content }}
{{- else if .ToolCalls }}<tool_call>
{{ range .ToolCalls }}{"name": "{{ .Function.Name }}", "arguments": {{ .Function.Arguments }}}
{{ end }}</tool_call>
{{- end }}{{ if not $last }}<|im_end|>
{{ end }}
{{- else if eq .Role "tool" }}<|im_start|>user
<tool_response>
{{ .Content }}
</tool_response><|im_end|>
{{ end }}
{{- if and (ne .Role "assistant") $last }}<|im_start|>assistant
{{ end }}
{{- end }}
{{- else }}
{{- if .System }}<|im_start|>system
{{ .System }}<|im_end|>
{{ end }}{{ if .Prompt }}<|im_start|>user
{{ .Prompt }}<|im_end|>
{{ end }}<|im_start|>assistant
{{ end }}{{ .Response }}{{ if .Response }}<|im_end|>{{ end }}`

// Modelfile returns the Modelfile that imports the model directory dir
// as m says.
func (m Model) Modelfile(dir string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "FROM %s\n", dir)
	if m.NumCtx > 0 {
		fmt.Fprintf(&b, "PARAMETER num_ctx %d\n", m.NumCtx)
	}
	if m.Tools {
		fmt.Fprintf(&b, "PARAMETER stop %q\nPARAMETER stop %q\n", tokIMEnd, tokIMStart)
		fmt.Fprintf(&b, "TEMPLATE \"\"\"%s\"\"\"\n", chatMLTools)
	}
	for _, stop := range m.Stops {
		fmt.Fprintf(&b, "PARAMETER stop %q\n", stop)
	}
	return b.String()
}
