//go:build linux

package pandoc

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// deathHelperEnv switches TestConvertChildDiesWithDaemon into its helper
// role: the re-executed test binary plays the daemon and runs Convert with
// the script named by the variable.
const deathHelperEnv = "LISA_PANDOC_DEATH_HELPER"

// waitFor polls cond every few milliseconds until it holds or the deadline
// passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// pidIn reads a positive pid from path, or 0.
func pidIn(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}

// TestConvertChildDiesWithDaemon: when the daemon is SIGKILLed mid-run
// (no deferred cleanup, no context cancellation), the kernel still kills
// the converter it started. The daemon is this test binary re-executed;
// the converter is the real pandoc blocked on a stdin that never ends
// (started through a wrapper that execs it, so it is the very process
// Convert spawned), or `sleep` when pandoc is not installed.
func TestConvertChildDiesWithDaemon(t *testing.T) {
	if script := os.Getenv(deathHelperEnv); script != "" {
		_, err := New(Config{Path: script, Timeout: time.Minute}).Convert(context.Background(), []byte("<p>x</p>"))
		t.Fatalf("helper: Convert returned (%v); the test should have killed this process first", err)
	}

	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	var target, body string
	if p, err := exec.LookPath("pandoc"); err == nil {
		target = p
		fifo := filepath.Join(dir, "stdin")
		if err := syscall.Mkfifo(fifo, 0o600); err != nil {
			t.Fatal(err)
		}
		// Opened read-write, the FIFO always has a writer, so pandoc waits
		// for the rest of its input for ever.
		body = "echo $$ > '" + pidFile + "'\nexec '" + p + "' \"$@\" 0<>'" + fifo + "'"
	} else {
		p, err := exec.LookPath("sleep")
		if err != nil {
			t.Fatalf("neither pandoc nor sleep: %v", err)
		}
		t.Logf("pandoc not installed; using %s as the child", p)
		target = p
		body = "echo $$ > '" + pidFile + "'\nexec '" + p + "' 300"
	}
	wantExe, err := filepath.EvalSymlinks(target)
	if err != nil {
		t.Fatal(err)
	}
	script := fake(t, body)

	var out bytes.Buffer
	helper := exec.Command(os.Args[0], "-test.run=^TestConvertChildDiesWithDaemon$", "-test.count=1")
	helper.Env = append(os.Environ(), deathHelperEnv+"="+script)
	helper.Stdout, helper.Stderr = &out, &out
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	helperDone := false
	t.Cleanup(func() {
		if !helperDone {
			_ = helper.Process.Kill()
			_ = helper.Wait()
		}
	})

	var child int
	waitFor(t, 20*time.Second, "the converter to start", func() bool {
		child = pidIn(pidFile)
		return child > 0
	})
	t.Cleanup(func() {
		// A surviving converter leads its own process group.
		if !processGone(child) {
			_ = syscall.Kill(-child, syscall.SIGKILL)
		}
	})
	waitFor(t, 20*time.Second, "the wrapper to exec "+wantExe, func() bool {
		exe, err := os.Readlink("/proc/" + strconv.Itoa(child) + "/exe")
		return err == nil && exe == wantExe
	})
	if processGone(child) {
		t.Fatalf("converter %d is not running; helper output:\n%s", child, out.String())
	}

	if err := helper.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err = helper.Wait()
	helperDone = true
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("helper ended with %v, want SIGKILL; output:\n%s", err, out.String())
	}

	deadline := time.Now().Add(10 * time.Second)
	for !processGone(child) {
		if time.Now().After(deadline) {
			t.Fatalf("converter %d (%s) outlived the killed daemon", child, wantExe)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestConvertSurvivesThreadExits: the parent-death signal fires when the
// OS thread that started the child exits, and Go ends a thread whenever a
// goroutine returns while locked to it. Goroutines that lock threads and
// return, as some libraries do, must not kill a running conversion: the
// thread that started the child stays reserved until the child is reaped.
func TestConvertSurvivesThreadExits(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	fifo := filepath.Join(dir, "go")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	p := fake(t, "echo $$ > '"+pidFile+"'\nread line < '"+fifo+"'\necho \"$line\"")

	type result struct {
		out string
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := New(Config{Path: p, Timeout: time.Minute}).Convert(context.Background(), nil)
		done <- result{out, err}
	}()
	var child int
	waitFor(t, 10*time.Second, "the converter to start", func() bool {
		child = pidIn(pidFile)
		return child > 0
	})

	// Occupy many threads at once, so any idle thread (the starter among
	// them, were it idle) is taken, then let them all exit.
	const lockers = 64
	var (
		locked, exit sync.WaitGroup
		release      = make(chan struct{})
		mu           sync.Mutex
		hijacked     []int
	)
	me := strconv.Itoa(os.Getpid())
	locked.Add(lockers)
	exit.Add(lockers)
	for range lockers {
		go func() {
			defer exit.Done()
			runtime.LockOSThread() // never unlocked: the thread exits with us
			tid := syscall.Gettid()
			kids, _ := os.ReadFile("/proc/" + me + "/task/" + strconv.Itoa(tid) + "/children")
			for _, f := range strings.Fields(string(kids)) {
				if f == strconv.Itoa(child) {
					mu.Lock()
					hijacked = append(hijacked, tid)
					mu.Unlock()
				}
			}
			locked.Done()
			<-release
		}()
	}
	locked.Wait()
	close(release)
	exit.Wait()
	if len(hijacked) > 0 {
		t.Errorf("thread %v that started the converter ran another goroutine while the converter lived", hijacked)
	}

	w, err := os.OpenFile(fifo, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.WriteString("finished\n"); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if r.err != nil || r.out != "finished" {
			t.Fatalf("Convert = %q, %v; the converter was killed while its daemon lived", r.out, r.err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Convert did not finish")
	}
}
