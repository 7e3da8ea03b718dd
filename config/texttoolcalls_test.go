package config

import (
	"strings"
	"testing"
)

// TestTextToolCallsValues (#39 item 8): llm.text_tool_calls is "auto" by
// default and takes "auto", "always" or "never" from the file or the
// environment; the booleans of earlier versions still load (true is
// "auto", false "never"); anything else is refused naming the values.
func TestTextToolCallsValues(t *testing.T) {
	if d := Default().LLM.TextToolCalls; d != TextToolCallsAuto {
		t.Fatalf("default %q", d)
	}
	withLLM := func(line string) string {
		return strings.Replace(minimalTOML, "[llm]\n", "[llm]\n"+line+"\n", 1)
	}
	for _, tc := range []struct {
		file, env, want string
	}{
		{file: `text_tool_calls = "auto"`, want: TextToolCallsAuto},
		{file: `text_tool_calls = "always"`, want: TextToolCallsAlways},
		{file: `text_tool_calls = "never"`, want: TextToolCallsNever},
		{file: `text_tool_calls = true`, want: TextToolCallsAuto},
		{file: `text_tool_calls = false`, want: TextToolCallsNever},
		{file: `text_tool_calls = "false"`, want: TextToolCallsNever},
		{env: "always", want: TextToolCallsAlways},
		{env: "false", want: TextToolCallsNever},
		{env: " TRUE ", want: TextToolCallsAuto},
		{file: `text_tool_calls = true`, env: "never", want: TextToolCallsNever},
	} {
		var env LookupEnv
		if tc.env != "" {
			env = mapEnv(map[string]string{"LISA_LLM__TEXT_TOOL_CALLS": tc.env})
		}
		got, err := Load(writeFile(t, t.TempDir(), "lisa.toml", withLLM(tc.file)), env)
		if err == nil {
			err = got.Validate()
		}
		if err != nil || got.LLM.TextToolCalls != tc.want {
			t.Errorf("file %q, env %q: %q, %v; want %q", tc.file, tc.env, got.LLM.TextToolCalls, err, tc.want)
		}
	}
	for _, bad := range []string{`text_tool_calls = "yes"`, `text_tool_calls = ""`, `text_tool_calls = 1`} {
		got, err := Load(writeFile(t, t.TempDir(), "lisa.toml", withLLM(bad)), nil)
		if err == nil {
			err = got.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), "llm.text_tool_calls") {
			t.Errorf("%s: %v, want a problem naming the key", bad, err)
		}
		if bad != `text_tool_calls = 1` {
			wantProblem(t, problemsOf(t, err), "llm.text_tool_calls", `"auto", "always" or "never"`)
		}
	}
}
