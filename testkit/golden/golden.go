package golden

import (
	"os"
	"path/filepath"
	"testing"
)

// UpdateEnv names the environment variable that rewrites golden files.
const UpdateEnv = "LISA_UPDATE_GOLDEN"

// Check fails t unless got equals the content of path. With
// LISA_UPDATE_GOLDEN=1 it writes got to path first.
func Check(t testing.TB, path, got string) {
	t.Helper()
	if os.Getenv(UpdateEnv) == "1" {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (set %s=1 to create it)", err, UpdateEnv)
	}
	if got != string(want) {
		t.Fatalf("output differs from %s (set %s=1 to rewrite, then review):\n--- got\n%s\n--- want\n%s", path, UpdateEnv, got, want)
	}
}
