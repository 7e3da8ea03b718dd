package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lisabot/lisa/config"
	"github.com/lisabot/lisa/testkit/golden"
	"github.com/lisabot/lisa/testkit/need"
)

// Canary values: if any of these shows up in output, a secret leaked.
const (
	canaryLiteral = "syt_bGlzYQ_CANARYCANARY_1a2b3c"
	canaryToken   = "syt_CANARY_TOKEN_FROM_ENV_77"
	canaryLLMKey  = "sk-CANARY-LLM-KEY-88"
	canarySearch  = "CANARY_SEARCH_KEY_99"
)

// canaryEnv holds every canary secret under the names the configs use.
func canaryEnv() map[string]string {
	return map[string]string{
		"LISA_MATRIX_ACCESS_TOKEN": canaryToken,
		"LISA_LLM_API_KEY":         canaryLLMKey,
		"LISA_SEARCH_API_KEY":      canarySearch,
	}
}

const canaryConfig = `
[matrix]
homeserver_url = "https://matrix.example.org"
user_id = "@lisa:example.org"
device_id = "LISABOT"
access_token = %q
allowed_room_ids = ["!room:example.org", "!other:example.org"]
mention_aliases = ["Lisa"]

[llm]
base_url = "http://127.0.0.1:8000/v1"
api_key = "env:LISA_LLM_API_KEY"
model = "canary-test-model"

[persona]
path = "persona.md"

[search]
endpoint = "https://search.example.org/search"
api_key = "env:LISA_SEARCH_API_KEY"

[runtime]
data_dir = "state"
`

// writeCanaryConfig writes a config whose access_token is tokenRef, next
// to a persona file, and returns the config path.
func writeCanaryConfig(t *testing.T, tokenRef string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "persona.md"), []byte("You are Lisa."), 0o600); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "lisa.toml")
	if err := os.WriteFile(p, []byte(fmt.Sprintf(canaryConfig, tokenRef)), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// assertNoCanaries fails if any canary appears in any of texts.
func assertNoCanaries(t *testing.T, what string, texts ...string) {
	t.Helper()
	for _, text := range texts {
		for _, c := range []string{canaryLiteral, canaryToken, canaryLLMKey, canarySearch} {
			if strings.Contains(text, c) {
				t.Errorf("%s leaks canary %s:\n%s", what, c, text)
			}
		}
	}
}

func TestCheckConfigCanarySecrets(t *testing.T) {
	t.Run("literal secret rejected", func(t *testing.T) {
		p := writeCanaryConfig(t, canaryLiteral)
		r := runLisa(t, canaryEnv(), "check-config", "--config", p)
		if r.code != exitUsage {
			t.Errorf("exit code %d, want %d", r.code, exitUsage)
		}
		if !strings.HasPrefix(r.stderr, "matrix.access_token: ") || !strings.Contains(r.stderr, "env:NAME") {
			t.Errorf("stderr does not name the key and the fix:\n%s", r.stderr)
		}
		assertNoCanaries(t, "check-config output", r.stdout, r.stderr)

		cfg, loadErr := config.Load(p, config.LookupEnv(func(string) (string, bool) { return "", false }))
		validateErr := cfg.Validate()
		_, resolveErr := config.LoadAndResolve(p, lookupFrom(canaryEnv()))
		for _, err := range []error{loadErr, validateErr, resolveErr} {
			if err != nil {
				assertNoCanaries(t, "error", err.Error())
			}
		}
		assertNoCanaries(t, "Config", fmt.Sprintf("%v %+v %#v", cfg, cfg, cfg))
	})

	t.Run("env secrets accepted", func(t *testing.T) {
		p := writeCanaryConfig(t, "env:LISA_MATRIX_ACCESS_TOKEN")
		env := canaryEnv()
		env["LISA_WEB__CONVERTER"] = need.Converter(t)
		r := runLisa(t, env, "check-config", "--config", p)
		if r.code != exitOK {
			t.Fatalf("exit code %d, want 0\nstderr: %s", r.code, r.stderr)
		}
		for _, want := range []string{"config OK", "rooms:      2", "canary-test-model", "https://matrix.example.org"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("summary lacks %q:\n%s", want, r.stdout)
			}
		}
		assertNoCanaries(t, "check-config output", r.stdout, r.stderr)

		res, err := config.LoadAndResolve(p, lookupFrom(canaryEnv()))
		if err != nil {
			t.Fatal(err)
		}
		if res.MatrixAccessToken.Reveal() != canaryToken {
			t.Fatal("the token was not resolved, so this test proves nothing")
		}
		assertNoCanaries(t, "Resolved", fmt.Sprintf("%v %+v %#v %s", res, res, res, res.MatrixAccessToken))
	})

	t.Run("env secret unset", func(t *testing.T) {
		p := writeCanaryConfig(t, "env:LISA_MATRIX_ACCESS_TOKEN")
		env := canaryEnv()
		delete(env, "LISA_LLM_API_KEY")
		r := runLisa(t, env, "check-config", "--config", p)
		if r.code != exitUsage || r.stderr != "llm.api_key: refers to the environment variable LISA_LLM_API_KEY, which is not set\n" {
			t.Errorf("exit %d, stderr:\n%s", r.code, r.stderr)
		}
		assertNoCanaries(t, "check-config output", r.stdout, r.stderr)
	})
}

// lookupFrom adapts a map to config.LookupEnv.
func lookupFrom(m map[string]string) config.LookupEnv {
	return func(name string) (string, bool) {
		v, ok := m[name]
		return v, ok
	}
}

func TestCheckConfigExample(t *testing.T) {
	env := map[string]string{"LISA_MATRIX_ACCESS_TOKEN": "token", "LISA_LLM_API_KEY": "key", "LISA_WEB__CONVERTER": need.Converter(t)}
	r := runLisa(t, env, "check-config", "--config", filepath.Join("..", "..", "config.example.toml"))
	if r.code != exitOK || r.stderr != "" || !strings.Contains(r.stdout, "config OK") {
		t.Fatalf("example config: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
}

func TestCheckConfigFileErrors(t *testing.T) {
	dir := t.TempDir()
	broken := filepath.Join(dir, "broken.toml")
	if err := os.WriteFile(broken, []byte("[matrix]\nuser_id = \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runLisa(t, nil, "check-config", "--config", broken)
	if r.code != exitUsage || !strings.HasPrefix(r.stderr, broken+":2:") {
		t.Errorf("malformed TOML: exit %d, stderr %q", r.code, r.stderr)
	}
	missing := filepath.Join(dir, "missing.toml")
	r = runLisa(t, nil, "check-config", "--config", missing)
	if r.code != exitUsage || !strings.Contains(r.stderr, missing) {
		t.Errorf("missing file: exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestCheckConfigGolden compares the problem report for testdata/invalid.toml
// with testdata/invalid.golden. Regenerate with LISA_UPDATE_GOLDEN=1 and
// review the diff.
func TestCheckConfigGolden(t *testing.T) {
	dir, err := filepath.Abs("testdata")
	if err != nil {
		t.Fatal(err)
	}
	r := runLisa(t, nil, "check-config", "--config", filepath.Join(dir, "invalid.toml"))
	if r.code != exitUsage || r.stdout != "" {
		t.Fatalf("exit %d, stdout %q", r.code, r.stdout)
	}
	assertNoCanaries(t, "golden output", r.stderr)
	got := strings.ReplaceAll(r.stderr, dir, "$TESTDATA")
	golden.Check(t, filepath.Join("testdata", "invalid.golden"), got)
	for _, line := range strings.Split(strings.TrimSpace(got), "\n") {
		if key, _, ok := strings.Cut(line, ": "); !ok || strings.Contains(key, " ") {
			t.Errorf("line does not start with a key: %q", line)
		}
	}
}

// TestCheckConfigNeedsPandoc: with web.converter = "pandoc" (the
// default) and a pandoc new enough for --sandbox, check-config names it.
func TestCheckConfigNeedsPandoc(t *testing.T) {
	need.Pandoc(t)
	env := map[string]string{"LISA_MATRIX_ACCESS_TOKEN": "token", "LISA_LLM_API_KEY": "key"}
	example := filepath.Join("..", "..", "config.example.toml")
	r := runLisa(t, env, "check-config", "--config", example)
	if r.code != exitOK || !strings.Contains(r.stdout, "converter:  pandoc ") {
		t.Fatalf("with pandoc: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestCheckConfigWithoutPandoc: without pandoc the default configuration
// is not usable, and the one line that says so names both fixes; with
// web.converter = "builtin" it is.
func TestCheckConfigWithoutPandoc(t *testing.T) {
	env := map[string]string{"LISA_MATRIX_ACCESS_TOKEN": "token", "LISA_LLM_API_KEY": "key"}
	example := filepath.Join("..", "..", "config.example.toml")
	t.Setenv("PATH", t.TempDir()) // no pandoc anywhere
	r := runLisa(t, env, "check-config", "--config", example)
	if r.code != exitUsage || strings.Count(r.stderr, "\n") != 1 || r.stdout != "" {
		t.Fatalf("without pandoc: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"web.converter: ", "not found", "install pandoc 2.15 or newer (Debian package pandoc)", `set web.converter = "builtin"`} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q: %s", want, r.stderr)
		}
	}
	env["LISA_WEB__CONVERTER"] = config.ConverterBuiltin
	r = runLisa(t, env, "check-config", "--config", example)
	if r.code != exitOK || !strings.Contains(r.stdout, "converter:  built-in (html-to-markdown") {
		t.Fatalf("built-in converter: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
}

// TestCheckConfigRefusesPublicMetrics: metrics are served on loopback only.
func TestCheckConfigRefusesPublicMetrics(t *testing.T) {
	env := map[string]string{"LISA_MATRIX_ACCESS_TOKEN": "token", "LISA_LLM_API_KEY": "key", "LISA_RUNTIME__METRICS_LISTEN": "0.0.0.0:9464"}
	r := runLisa(t, env, "check-config", "--config", filepath.Join("..", "..", "config.example.toml"))
	if r.code != exitUsage || !strings.Contains(r.stderr, "runtime.metrics_listen") {
		t.Fatalf("exit %d\nstderr: %s", r.code, r.stderr)
	}
	env["LISA_RUNTIME__METRICS_LISTEN"] = "127.0.0.1:9464"
	env["LISA_WEB__CONVERTER"] = need.Converter(t)
	if r := runLisa(t, env, "check-config", "--config", filepath.Join("..", "..", "config.example.toml")); r.code != exitOK {
		t.Fatalf("loopback refused: %d %s", r.code, r.stderr)
	}
}
