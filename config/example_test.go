package config

import (
	"testing"

	"github.com/knadh/koanf/parsers/toml/v2"
	"github.com/knadh/koanf/providers/file"
	"github.com/knadh/koanf/v2"
)

// examplePath is the example configuration shipped at the repository root.
const examplePath = "../config.example.toml"

func TestExampleListsEveryKey(t *testing.T) {
	k := koanf.New(".")
	if err := k.Load(file.Provider(examplePath), toml.Parser()); err != nil {
		t.Fatal(err)
	}
	for _, key := range Keys() {
		if !k.Exists(key) {
			t.Errorf("%s does not set %s", examplePath, key)
		}
	}
}

func TestExampleIsValid(t *testing.T) {
	cfg, err := Load(examplePath, nil)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("Validate:\n%v", err)
	}
	env := mapEnv(map[string]string{"LISA_MATRIX_ACCESS_TOKEN": "t", "LISA_LLM_API_KEY": "k"})
	r, err := LoadAndResolve(examplePath, env)
	if err != nil {
		t.Fatalf("LoadAndResolve:\n%v", err)
	}
	if r.Persona == "" {
		t.Error("example persona is empty")
	}
}
