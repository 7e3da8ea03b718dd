package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// minimalTOML sets exactly the fields only an operator can know.
const minimalTOML = `
[matrix]
homeserver_url = "https://matrix.example.org"
user_id = "@lisa:example.org"
device_id = "LISABOT"
access_token = "env:LISA_MATRIX_ACCESS_TOKEN"
allowed_room_ids = ["!room:example.org"]
mention_aliases = ["Lisa"]

[llm]
base_url = "http://127.0.0.1:8000/v1"
model = "test-model"

[persona]
path = "persona.md"

[runtime]
data_dir = "data"
`

// writeFile writes content to name inside dir and returns its path.
func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadOverlaysFileOnDefaults(t *testing.T) {
	p := writeFile(t, t.TempDir(), "lisa.toml", minimalTOML+`
[web]
max_redirects = 3
`)
	got, err := Load(p, nil)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	want := validConfig()
	want.Web.MaxRedirects = 3
	want = want.WithDefaults()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Load =\n%+v\nwant\n%+v", got, want)
	}
	if err := got.Validate(); err != nil {
		t.Errorf("loaded config invalid: %v", err)
	}
	if got.Runtime.AdminSocket != filepath.Join("data", AdminSocketName) {
		t.Errorf("admin socket default not applied: %q", got.Runtime.AdminSocket)
	}
}

func TestLoadFileListReplacesDefaultList(t *testing.T) {
	// Lists are replaced, never merged element by element.
	p := writeFile(t, t.TempDir(), "lisa.toml", minimalTOML)
	env := mapEnv(map[string]string{"LISA_MATRIX__MENTION_ALIASES": "Lisa"})
	got, err := Load(p, env)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Matrix.MentionAliases, []string{"Lisa"}) {
		t.Errorf("aliases = %q", got.Matrix.MentionAliases)
	}
}

func TestLoadEnvironmentOverrides(t *testing.T) {
	p := writeFile(t, t.TempDir(), "lisa.toml", minimalTOML)
	env := mapEnv(map[string]string{
		"LISA_LLM__MODEL":                   "other-model",
		"LISA_MATRIX__SYNC_TIMEOUT_MS":      " 5000 ",
		"LISA_LLM__TEMPERATURE":             "0.2",
		"LISA_WEB__ALLOW_PRIVATE_ADDRESSES": "true",
		"LISA_MATRIX__ALLOWED_ROOM_IDS":     `["!a:example.org", "!b,c:example.org"]`,
		"LISA_MATRIX__MENTION_ALIASES":      "Lisa, Liz",
		"LISA_SEARCH__ENDPOINT":             "https://s.example.org/search",
		"LISA_LLM__API_KEY":                 "env:OTHER_KEY",
		"LISA_MATRIX_ACCESS_TOKEN":          "a secret, not an override",
		"LISA_LLM__MODLE":                   "typo is not a known override",
	})
	got, err := Load(p, env)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	switch {
	case got.LLM.Model != "other-model":
		t.Errorf("model = %q", got.LLM.Model)
	case got.Matrix.SyncTimeoutMS != 5000:
		t.Errorf("sync timeout = %d", got.Matrix.SyncTimeoutMS)
	case got.LLM.Temperature == nil || *got.LLM.Temperature != 0.2:
		t.Errorf("temperature = %v", got.LLM.Temperature)
	case !got.Web.AllowPrivateAddresses:
		t.Error("allow_private_addresses not overridden")
	case !slices.Equal(got.Matrix.AllowedRoomIDs, []string{"!a:example.org", "!b,c:example.org"}):
		t.Errorf("rooms = %q", got.Matrix.AllowedRoomIDs)
	case !slices.Equal(got.Matrix.MentionAliases, []string{"Lisa", "Liz"}):
		t.Errorf("aliases = %q", got.Matrix.MentionAliases)
	case got.Search.Endpoint != "https://s.example.org/search":
		t.Errorf("endpoint = %q", got.Search.Endpoint)
	case got.LLM.APIKey.String() != "env:OTHER_KEY":
		t.Errorf("api key ref = %v", got.LLM.APIKey)
	case got.Matrix.AccessToken.String() != "env:LISA_MATRIX_ACCESS_TOKEN":
		t.Errorf("access token ref = %v", got.Matrix.AccessToken)
	}
}

func TestLoadBadEnvironmentOverrides(t *testing.T) {
	p := writeFile(t, t.TempDir(), "lisa.toml", minimalTOML)
	env := mapEnv(map[string]string{
		"LISA_MATRIX__SYNC_TIMEOUT_MS":      "soon",
		"LISA_LLM__TEMPERATURE":             "warm",
		"LISA_WEB__ALLOW_PRIVATE_ADDRESSES": "maybe",
		"LISA_MATRIX__ALLOWED_ROOM_IDS":     `["!a:example.org", 3]`,
	})
	cfg, err := Load(p, env)
	ps := problemsOf(t, err)
	wantProblem(t, ps, "matrix.sync_timeout_ms", "LISA_MATRIX__SYNC_TIMEOUT_MS", "integer")
	wantProblem(t, ps, "llm.temperature", "LISA_LLM__TEMPERATURE", "number")
	wantProblem(t, ps, "web.allow_private_addresses", "LISA_WEB__ALLOW_PRIVATE_ADDRESSES", "true or false")
	wantProblem(t, ps, "matrix.allowed_room_ids", "LISA_MATRIX__ALLOWED_ROOM_IDS", "JSON array")
	if len(ps) != 4 {
		t.Errorf("got %d problems:\n%v", len(ps), ps)
	}
	// Bad overrides are skipped: the file's and default values remain.
	if cfg.Matrix.SyncTimeoutMS != Default().Matrix.SyncTimeoutMS || cfg.Matrix.AllowedRoomIDs[0] != "!room:example.org" {
		t.Errorf("a bad override changed the config: %+v", cfg.Matrix)
	}
}

func TestEnvOverrideName(t *testing.T) {
	for key, want := range map[string]string{
		"llm.model":               "LISA_LLM__MODEL",
		"matrix.sync_timeout_ms":  "LISA_MATRIX__SYNC_TIMEOUT_MS",
		"runtime.admin_socket":    "LISA_RUNTIME__ADMIN_SOCKET",
		"matrix.allowed_room_ids": "LISA_MATRIX__ALLOWED_ROOM_IDS",
	} {
		if got := EnvOverrideName(key); got != want {
			t.Errorf("EnvOverrideName(%q) = %q, want %q", key, got, want)
		}
	}
}

func TestLoadRejectsUnknownKeys(t *testing.T) {
	p := writeFile(t, t.TempDir(), "lisa.toml", minimalTOML+`
[matrix.extra]
x = 1

[serach]
endpoint = "https://s.example.org"

[web]
max_redirect = 4
completely_unrelated_thing = true
"top.level" = 1
`)
	// The quoted key holds a dot but is one key of [web].
	cfg, err := Load(p, nil)
	ps := problemsOf(t, err)
	wantProblem(t, ps, "serach", "not a known section")
	wantProblem(t, ps, "web.max_redirect", "did you mean web.max_redirects?")
	wantProblem(t, ps, "web.completely_unrelated_thing", "not a known key")
	wantProblem(t, ps, "web.top.level", "not a known key")
	wantProblem(t, ps, "matrix.extra", "not a known key")
	for _, p := range ps {
		if strings.Contains(p.Message, "did you mean") && p.Key == "web.completely_unrelated_thing" {
			t.Errorf("far-fetched suggestion: %v", p)
		}
	}
	if cfg.Web.MaxRedirects != Default().Web.MaxRedirects {
		t.Error("unknown key changed a value")
	}
}

func TestLoadTypoInHomeserverURL(t *testing.T) {
	toml := strings.Replace(minimalTOML, "homeserver_url", "homserver_url", 1)
	p := writeFile(t, t.TempDir(), "lisa.toml", toml)
	ps := problemsOf(t, func() error { _, err := Load(p, nil); return err }())
	wantProblem(t, ps, "matrix.homserver_url", "did you mean matrix.homeserver_url?")
}

func TestLoadRejectsWrongTypes(t *testing.T) {
	p := writeFile(t, t.TempDir(), "lisa.toml", `
llm = 5

[matrix]
homeserver_url = 8008
sync_timeout_ms = "30000"
gap_page_limit = 2.5
allowed_room_ids = "!room:example.org"
mention_aliases = ["Lisa", 7, true]
access_token = 12345

[context]
max_events = true

[web]
allow_private_addresses = "yes"

[runtime]
log_level = ["info"]
data_dir = { path = "x" }
shutdown_grace_seconds = 2026-01-01
`)
	cfg, err := Load(p, nil)
	ps := problemsOf(t, err)
	wantProblem(t, ps, "llm", "must be a table", "not an integer")
	wantProblem(t, ps, "matrix.homeserver_url", "must be a string, not an integer")
	wantProblem(t, ps, "matrix.sync_timeout_ms", "integer, not a string")
	wantProblem(t, ps, "matrix.gap_page_limit", "integer, not a floating-point number")
	wantProblem(t, ps, "matrix.allowed_room_ids", "list of strings, not a string")
	wantProblem(t, ps, "matrix.mention_aliases[1]", "string, not an integer")
	wantProblem(t, ps, "matrix.mention_aliases[2]", "string, not a boolean")
	wantProblem(t, ps, "matrix.access_token", "string, not an integer")
	wantProblem(t, ps, "context.max_events", "integer, not a boolean")
	wantProblem(t, ps, "web.allow_private_addresses", "boolean (true or false), not a string")
	wantProblem(t, ps, "runtime.log_level", "string, not a list")
	wantProblem(t, ps, "runtime.data_dir", "string, not a table")
	wantProblem(t, ps, "runtime.shutdown_grace_seconds", "not a date or time")
	if strings.Contains(ps.Error(), "12345") {
		t.Error("a wrongly typed secret value was echoed")
	}
	if cfg.Matrix.SyncTimeoutMS != Default().Matrix.SyncTimeoutMS {
		t.Error("a wrongly typed value was used")
	}
}

func TestLoadAcceptsIntegerTemperature(t *testing.T) {
	// TOML writes 1 as an integer; a float key takes it.
	p := writeFile(t, t.TempDir(), "lisa.toml", strings.Replace(minimalTOML, `model = "test-model"`, "model = \"m\"\ntemperature = 1", 1))
	cfg, err := Load(p, nil)
	if err != nil || cfg.LLM.Temperature == nil || *cfg.LLM.Temperature != 1 {
		t.Fatalf("temperature = %v, err %v", cfg.LLM.Temperature, err)
	}
}

func TestLoadMalformedTOML(t *testing.T) {
	for _, tt := range []struct {
		name, body string
		line       int // 0: the parser does not say
	}{
		{"unclosed table", "[matrix\nuser_id = \"@a:b\"\n", 1},
		{"unclosed string", "[matrix]\naccess_token = \"" + canary + "\n", 2},
		{"missing value", "[matrix]\nuser_id =\n", 2},
		{"duplicate key", "[matrix]\nuser_id = \"@a:b\"\nuser_id = \"@c:d\"\n", 0},
		{"duplicate section", "[llm]\nmodel = \"a\"\n[llm]\nmodel = \"b\"\n", 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			body := tt.body
			p := writeFile(t, t.TempDir(), "broken.toml", body)
			_, err := Load(p, nil)
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("error %T %v, want *SyntaxError", err, err)
			}
			if se.Line != tt.line || !strings.HasPrefix(err.Error(), p+":") || !strings.Contains(err.Error(), "invalid TOML") {
				t.Errorf("error lacks file or line %d: %v", tt.line, err)
			}
			if strings.Contains(err.Error(), canary) {
				t.Errorf("syntax error echoes a value: %v", err)
			}
		})
	}
}

func TestLoadMissingFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "missing.toml")
	_, err := Load(p, nil)
	if err == nil || !strings.Contains(err.Error(), p) || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file error = %v", err)
	}
}

func TestSyntaxErrorWithoutPosition(t *testing.T) {
	e := &SyntaxError{Path: "a.toml", Message: "bad"}
	if e.Error() != "a.toml: invalid TOML: bad" {
		t.Errorf("Error() = %q", e.Error())
	}
}

func TestSchemaCoversConfig(t *testing.T) {
	keys := Keys()
	if len(keys) != 70 { // #27 adds llm.max_parallel_tool_calls; #29 adds llm.daily_token_budget, llm.room_daily_token_budget, persona.budget_error; #37 matrix.txn_ids_survive_restart; #39 runtime.retention_days
		t.Errorf("Config has %d keys; update the example file and this test when adding keys", len(keys))
	}
	seen := map[string]bool{}
	for _, k := range keys {
		if seen[k] || strings.Count(k, ".") != 1 || strings.ToLower(k) != k {
			t.Errorf("bad or duplicate key %q", k)
		}
		seen[k] = true
	}
	// Round trip: the defaults survive toMap and Load unchanged.
	p := writeFile(t, t.TempDir(), "empty.toml", "")
	got, err := Load(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := Default().WithDefaults(); !reflect.DeepEqual(got, want) {
		t.Errorf("empty file:\n%+v\nwant defaults\n%+v", got, want)
	}
}

func TestProblemsHelpers(t *testing.T) {
	var none Problems
	if none.Err() != nil {
		t.Error("empty Problems is a non-nil error")
	}
	a := Problems{{Key: "b.x", Message: "1"}}
	merged := a.Merge(Problems{{Key: "b.x", Message: "1"}, {Key: "a.y", Message: "2"}})
	if len(merged) != 2 || len(a) != 1 {
		t.Errorf("Merge = %v", merged)
	}
	if got := (Problem{Key: "k", Message: "m"}).String(); got != "k: m" {
		t.Errorf("String = %q", got)
	}
	if d := editDistance("homserver_url", "homeserver_url"); d != 1 {
		t.Errorf("editDistance = %d", d)
	}
}
