package config

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzLoad: loading arbitrary TOML never panics; what loads also
// validates without panicking.
func FuzzLoad(f *testing.F) {
	if b, err := os.ReadFile(filepath.Join("..", "config.example.toml")); err == nil {
		f.Add(string(b))
	}
	for _, seed := range []string{"", "[matrix]\nuser_id = 5\n", "[llm]\ntemperature = \"hot\"\n", "[[matrix]]\n", "a = [1, {b = 2}]\n",
		"[runtime]\nmetrics_listen = \"[::1]:9\"\nmax_concurrent_rooms = -1\n", "[matrix\n", "\xff"} {
		f.Add(seed)
	}
	dir := f.TempDir()
	env := func(string) (string, bool) { return "", false }
	f.Fuzz(func(t *testing.T, src string) {
		p := filepath.Join(dir, "fuzz.toml")
		if err := os.WriteFile(p, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := Load(p, env)
		if err == nil {
			_ = cfg.Validate()
		}
	})
}
