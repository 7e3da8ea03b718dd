package buildcache

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"
	"time"
)

// TestLockWaitsForTheHolder: a second Lock on the same file waits until
// the first is released, and gives up with ctx's error when ctx ends.
func TestLockWaitsForTheHolder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "build.lock")
	log := slog.New(slog.DiscardHandler)
	unlock, err := Lock(context.Background(), log, path, "test")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := Lock(ctx, log, path, "test"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second lock while held: %v, want the context's deadline", err)
	}
	got := make(chan error, 1)
	go func() {
		u, err := Lock(context.Background(), log, path, "test")
		if err == nil {
			u()
		}
		got <- err
	}()
	unlock()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting lock was never granted after the release")
	}
}

func TestWriteModuleAndExecutable(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "mod")
	fsys := fstest.MapFS{"x.gomod": {Data: []byte("module x\n")}, "x.gosum": {Data: []byte("")}}
	if err := WriteModule(fsys, map[string]string{"x.gomod": "go.mod", "x.gosum": "go.sum"}, dir, "test"); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err != nil || string(b) != "module x\n" {
		t.Fatalf("go.mod = %q, %v", b, err)
	}
	if err := WriteModule(fsys, map[string]string{"missing": "go.mod"}, dir, "test"); err == nil {
		t.Error("a missing embedded file gave no error")
	}
	if err := Executable(filepath.Join(dir, "go.mod")); err == nil {
		t.Error("a file without x bits was taken as executable")
	}
	if err := Executable(dir); err == nil {
		t.Error("a directory was taken as executable")
	}
	bin := filepath.Join(dir, "tool")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := Resolve(bin); err != nil || got != bin {
		t.Errorf("Resolve(%s) = %q, %v", bin, got, err)
	}
	if _, err := Resolve("no-such-binary-for-lisa"); err == nil {
		t.Error("a name not on PATH resolved")
	}
}
