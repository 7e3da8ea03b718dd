package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

const canary = "syt_CANARY_c4n4ry_V4LU3"

// assertNoCanary formats v every way fmt, JSON and slog can and fails if
// the canary shows up.
func assertNoCanary(t *testing.T, what string, v any) {
	t.Helper()
	// Include mismatched verbs and ones that bypass String.
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%10.3s", "%p", "%T", "%t"} {
		if s := fmt.Sprintf(verb, v); strings.Contains(s, canary) {
			t.Errorf("%s: fmt %s leaks the secret: %s", what, verb, s)
		}
	}
	if b, err := json.Marshal(v); err == nil && bytes.Contains(b, []byte(canary)) {
		t.Errorf("%s: JSON leaks the secret: %s", what, b)
	}
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("x", "v", v)
	slog.New(slog.NewTextHandler(&buf, nil)).Info("x", "v", v)
	if strings.Contains(buf.String(), canary) {
		t.Errorf("%s: slog leaks the secret: %s", what, buf.String())
	}
}

func TestSecretNeverPrints(t *testing.T) {
	s := NewSecret(canary)
	if s.Reveal() != canary {
		t.Fatal("Reveal lost the value")
	}
	assertNoCanary(t, "Secret", s)
	assertNoCanary(t, "*Secret", &s)
	if got := fmt.Sprint(s); got != "[REDACTED]" {
		t.Errorf("Sprint(Secret) = %q", got)
	}
	if got := fmt.Sprint(Secret{}); got != "" || !(Secret{}).IsZero() || NewSecret("") != (Secret{}) {
		t.Errorf("empty Secret prints %q", got)
	}
}

func TestSecretRefNeverPrintsLiterals(t *testing.T) {
	lit := NewSecretRef(canary)
	assertNoCanary(t, "literal SecretRef", lit)
	if _, ok := lit.EnvName(); ok {
		t.Error("a literal has an env name")
	}
	// A well-formed reference is not secret and prints as itself.
	ref := EnvRef("LISA_X")
	if got := fmt.Sprintf("%v %s %+v", ref, ref, ref); got != "env:LISA_X env:LISA_X env:LISA_X" {
		t.Errorf("reference prints as %q", got)
	}
	if got := fmt.Sprintf("%#v", ref); got != `config.SecretRef("env:LISA_X")` {
		t.Errorf("%%#v = %s", got)
	}
	if name, ok := ref.EnvName(); !ok || name != "LISA_X" {
		t.Errorf("EnvName = %q, %v", name, ok)
	}
	// A malformed name might be a pasted secret behind "env:".
	bad := NewSecretRef("env:" + canary + "-x")
	assertNoCanary(t, "malformed reference", bad)
}

// wrapper holds a Config in an unexported field, where fmt cannot call
// methods and prints raw fields.
type wrapper struct {
	cfg Config
	res Resolved
}

func TestConfigAndResolvedNeverPrintSecrets(t *testing.T) {
	c := validConfig()
	c.Matrix.AccessToken = NewSecretRef(canary)
	c.LLM.APIKey = NewSecretRef("env:" + canary + "!")
	r := Resolved{
		Config:            validConfig(),
		Persona:           "persona",
		MatrixAccessToken: NewSecret(canary),
		LLMAPIKey:         NewSecret(canary),
		SearchAPIKey:      NewSecret(canary),
	}
	assertNoCanary(t, "Config", c)
	assertNoCanary(t, "*Config", &c)
	assertNoCanary(t, "Resolved", r)
	assertNoCanary(t, "*Resolved", &r)
	assertNoCanary(t, "unexported fields", wrapper{cfg: c, res: r})
	if err := c.Validate(); err == nil || strings.Contains(err.Error(), canary) {
		t.Errorf("Validate error leaks or is missing: %v", err)
	}
	if got := r.Secrets(); len(got) != 3 || got[0] != canary {
		t.Errorf("Secrets() = %d values", len(got))
	}
}

func TestSecretRefTextRoundTrip(t *testing.T) {
	var r SecretRef
	if err := r.UnmarshalText([]byte("env:A")); err != nil || r.String() != "env:A" {
		t.Fatalf("UnmarshalText: %v %v", r, err)
	}
	if err := r.UnmarshalText(nil); err != nil || !r.IsZero() {
		t.Fatalf("empty UnmarshalText: %v %v", r, err)
	}
}

func TestValidEnvName(t *testing.T) {
	for name, want := range map[string]bool{
		"A": true, "_": true, "LISA_MATRIX_ACCESS_TOKEN": true, "a1_B2": true,
		"": false, "1A": false, "A-B": false, "A B": false, "Ä": false, "A=B": false,
	} {
		if got := validEnvName(name); got != want {
			t.Errorf("validEnvName(%q) = %v", name, got)
		}
	}
}
