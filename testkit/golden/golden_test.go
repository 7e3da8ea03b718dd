package golden

import (
	"os"
	"path/filepath"
	"testing"
)

type recorder struct {
	testing.TB
	failed bool
}

func (r *recorder) Fatalf(string, ...any) { r.failed = true; panic(r) }
func (r *recorder) Fatal(...any)          { r.failed = true; panic(r) }
func (r *recorder) Helper()               {}

func run(tb testing.TB, path, got string) (failed bool) {
	r := &recorder{TB: tb}
	defer func() {
		if p := recover(); p != nil && p != r {
			panic(p)
		}
		failed = r.failed
	}()
	Check(r, path, got)
	return false
}

func TestCheck(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.golden")
	if !run(t, path, "a") {
		t.Fatal("missing golden file passed")
	}
	if err := os.WriteFile(path, []byte("a"), 0o644); err != nil {
		t.Fatal(err)
	}
	if run(t, path, "a") {
		t.Fatal("equal output failed")
	}
	if !run(t, path, "b") {
		t.Fatal("different output passed")
	}
	t.Setenv(UpdateEnv, "1")
	if run(t, path, "b") {
		t.Fatal("update mode failed")
	}
	if b, _ := os.ReadFile(path); string(b) != "b" {
		t.Fatalf("update wrote %q", b)
	}
}
