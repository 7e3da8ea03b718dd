//go:build unix

package persistence

import (
	"os"
	"testing"
)

// TestProbeLock: an open store is reported held, with this process's ID
// from its LOCK file; once closed it is free, and probing it leaves it
// free to open.
func TestProbeLock(t *testing.T) {
	dir := t.TempDir()
	st, err := ProbeLock(dir)
	if err != nil || st.Held {
		t.Fatalf("empty directory: %+v, %v", st, err)
	}
	db, err := OpenBadger(dir, BadgerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st, err = ProbeLock(dir)
	if err != nil || !st.Held || st.PID != os.Getpid() {
		t.Fatalf("open store: %+v, %v (pid %d)", st, err, os.Getpid())
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	st, err = ProbeLock(dir)
	if err != nil || st.Held {
		t.Fatalf("closed store: %+v, %v", st, err)
	}
	db, err = OpenBadger(dir, BadgerOptions{})
	if err != nil {
		t.Fatalf("open after probing: %v", err)
	}
	_ = db.Close()
	if _, err := ProbeLock(dir + "/missing"); err == nil {
		t.Fatal("a missing directory was probed without error")
	}
}
