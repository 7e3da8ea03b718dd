//go:build unix

package admin

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var discard = slog.New(slog.DiscardHandler)

var echo = HandlerFunc(func(_ context.Context, cmd string, args []string) (any, error) {
	return map[string]any{"cmd": cmd, "args": args}, nil
})

// await polls cond until it holds or the deadline passes.
func await(t *testing.T, within time.Duration, cond func() bool, what func() string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", within, what())
		}
		time.Sleep(2 * time.Millisecond) // polling interval, not synchronization
	}
}

// TestConnectionsDoNotLeakGoroutines opens 1,000 connections (silent,
// one request, a partial line) and closes them: the server's goroutines
// must return to the baseline (issue #15 item 4).
func TestConnectionsDoNotLeakGoroutines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "admin.sock")
	s, err := Listen(path, echo, discard)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	base := runtime.NumGoroutine()
	for i := range 1000 {
		c, err := net.Dial("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		switch i % 3 {
		case 1:
			_ = c.SetDeadline(time.Now().Add(5 * time.Second))
			fmt.Fprintln(c, `{"cmd":"ping"}`)
			// The answer, or a refusal when the server is at its limit.
			if _, err := bufio.NewReader(c).ReadString('\n'); err != nil {
				t.Fatalf("connection %d: %v", i, err)
			}
		case 2:
			fmt.Fprint(c, `{"cmd":"pi`)
		}
		c.Close()
	}
	peak := runtime.NumGoroutine()
	await(t, 10*time.Second, func() bool { return runtime.NumGoroutine() <= base+5 }, func() string {
		return fmt.Sprintf("goroutines: baseline %d, after 1,000 connections %d, now %d", base, peak, runtime.NumGoroutine())
	})
	t.Logf("goroutines: baseline %d, right after 1,000 closed connections %d, settled %d", base, peak, runtime.NumGoroutine())
}

// TestSilentClientIsCutOff: a client that connects and never sends, or
// sends a line slower than the read timeout allows, is disconnected once
// the read deadline passes.
func TestSilentClientIsCutOff(t *testing.T) {
	path := filepath.Join(t.TempDir(), "admin.sock")
	const timeout = 100 * time.Millisecond
	s, err := ListenLimits(path, echo, discard, Limits{ReadTimeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, trickle := range []bool{false, true} {
		start := time.Now() // before the server can set its deadline
		c, err := net.Dial("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		if trickle {
			// One byte at a time, never a newline: the deadline is for
			// the whole line, not for each byte.
			go func() {
				for range 100 {
					if _, err := c.Write([]byte("x")); err != nil {
						return
					}
					time.Sleep(timeout / 4) // pacing the client, not synchronization
				}
			}()
		}
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		// The server hangs up: end of stream, or a reset when it leaves
		// trickled bytes unread; never an answer to a partial line.
		if b, err := io.ReadAll(c); len(b) != 0 || err != nil && !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("silent client (trickle %v): read %q, %v; want the server to hang up", trickle, b, err)
		}
		if took := time.Since(start); took < timeout || took > 3*time.Second {
			t.Fatalf("silent client (trickle %v) cut off after %s, read timeout %s", trickle, took, timeout)
		}
		c.Close()
	}
	// A served connection gets a fresh deadline after each answer.
	c, err := Dial(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for range 3 {
		if _, err := c.Call("ping"); err != nil {
			t.Fatal(err)
		}
	}
}

// TestClientReconnectsAfterIdleCutOff: a long-lived Client (an idle
// interactive lisa shell) whose connection the server closed connects
// again on the next call.
func TestClientReconnectsAfterIdleCutOff(t *testing.T) {
	path := filepath.Join(t.TempDir(), "admin.sock")
	var calls sync.Map
	h := HandlerFunc(func(_ context.Context, cmd string, _ []string) (any, error) {
		n, _ := calls.LoadOrStore(cmd, new(int))
		*n.(*int)++
		return "ok", nil
	})
	s, err := ListenLimits(path, h, discard, Limits{ReadTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, err := Dial(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Call("first"); err != nil {
		t.Fatal(err)
	}
	await(t, 5*time.Second, func() bool { return len(s.slots) == 0 }, func() string { return "the server kept the idle connection" })
	if _, err := c.Call("second"); err != nil {
		t.Fatalf("call after the idle cut-off: %v", err)
	}
	for _, cmd := range []string{"first", "second"} {
		if n, _ := calls.Load(cmd); n == nil || *n.(*int) != 1 {
			t.Fatalf("%s handled %v times, want once", cmd, n)
		}
	}
}

// TestOversizedRequestIsCutOff: 10 MB without a newline is refused with
// an error line and the connection closed, long before 10 MB are read.
func TestOversizedRequestIsCutOff(t *testing.T) {
	path := filepath.Join(t.TempDir(), "admin.sock")
	s, err := Listen(path, echo, discard)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	wrote := make(chan error, 1)
	go func() {
		_, err := c.Write([]byte(strings.Repeat("x", 10<<20)))
		wrote <- err
	}()
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || !strings.Contains(line, "too long") {
		t.Fatalf("oversized request: answer %q %v", line, err)
	}
	if err := <-wrote; err == nil {
		t.Fatal("the server read all 10 MB of a single request")
	}
}

// TestConnectionLimit: connections beyond the limit get an error line
// and are closed; the ones within it are served, and a slot freed by a
// closed connection is served again.
func TestConnectionLimit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "admin.sock")
	s, err := Listen(path, echo, discard)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var held []*Client
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for range DefaultMaxConns {
		c, err := Dial(path, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
		if _, err := c.Call("ping"); err != nil {
			t.Fatal(err)
		}
	}
	c, err := Dial(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Call("ping"); err == nil || !strings.Contains(err.Error(), "too many connections") {
		t.Fatalf("connection %d: %v, want a refusal", DefaultMaxConns+1, err)
	}
	held[0].Close()
	await(t, 5*time.Second, func() bool { return len(s.slots) < DefaultMaxConns }, func() string { return "the closed connection's slot was not freed" })
	// The refused client connects again and is served.
	if _, err := c.Call("ping"); err != nil {
		t.Fatalf("after a slot was freed: %v", err)
	}
}

// TestSocketDirectoryWritableByOthersRefused: a directory others can
// write to (sticky or not), or owned by someone else, is refused with an
// error naming it and the configuration key.
func TestSocketDirectoryWritableByOthersRefused(t *testing.T) {
	for _, mode := range []os.FileMode{0o777, 0o777 | os.ModeSticky, 0o770, 0o730 | os.ModeSticky, 0o702} {
		t.Run(mode.String(), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "sock")
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(dir, mode); err != nil {
				t.Fatal(err)
			}
			_, err := Listen(filepath.Join(dir, "admin.sock"), echo, discard)
			if err == nil || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "runtime.admin_socket") {
				t.Fatalf("directory %v: %v", mode, err)
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 0 {
				t.Fatalf("left %v in a refused directory", ents)
			}
		})
	}
	t.Run("not-owned", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "sock")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if os.Geteuid() == 0 {
			if err := os.Chown(dir, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		} else {
			dir = "/" // owned by root, which we are not
		}
		_, err := Listen(filepath.Join(dir, "admin.sock"), echo, discard)
		if err == nil || !strings.Contains(err.Error(), "owned") || !strings.Contains(err.Error(), "runtime.admin_socket") {
			t.Fatalf("directory owned by another user: %v", err)
		}
	})
}

// TestSymlinksNeverFollowed: a symbolic link at the socket path (to a
// stale socket or to nothing) is refused and its target left alone; so is
// a socket directory that is a symbolic link.
func TestSymlinksNeverFollowed(t *testing.T) {
	dir := t.TempDir()
	elsewhere := filepath.Join(dir, "elsewhere")
	if err := os.Mkdir(elsewhere, 0o700); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(elsewhere, "stale.sock")
	ln, err := net.Listen("unix", target)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	link := filepath.Join(dir, "admin.sock")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(link, echo, discard); err == nil {
		t.Fatal("replaced a symbolic link to a stale socket")
	}
	if fi, err := os.Lstat(target); err != nil || fi.Mode()&os.ModeSocket == 0 {
		t.Fatalf("the link's target was touched: %v %v", fi, err)
	}
	dangling := filepath.Join(dir, "dangling.sock")
	if err := os.Symlink(filepath.Join(elsewhere, "nothing"), dangling); err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(dangling, echo, discard); err == nil {
		t.Fatal("replaced a dangling symbolic link")
	}
	if _, err := os.Lstat(filepath.Join(elsewhere, "nothing")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("created a socket through a symbolic link: %v", err)
	}
	linkedDir := filepath.Join(dir, "linked")
	if err := os.Symlink(elsewhere, linkedDir); err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(filepath.Join(linkedDir, "admin.sock"), echo, discard); err == nil || !strings.Contains(err.Error(), "runtime.admin_socket") {
		t.Fatalf("socket directory behind a symbolic link: %v", err)
	}
}

// TestSocketModeIsNeverWider: with a permissive umask, a watcher polling
// the socket path while the server starts again and again never sees it
// with a mode other than 0600, and it is 0600 right after Listen.
func TestSocketModeIsNeverWider(t *testing.T) {
	dir := t.TempDir()
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	path := filepath.Join(dir, "admin.sock")
	var (
		mu   sync.Mutex
		seen = map[os.FileMode]int{}
		done = make(chan struct{})
		wg   sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			if fi, err := os.Lstat(path); err == nil {
				mu.Lock()
				seen[fi.Mode()]++
				mu.Unlock()
			}
		}
	}()
	// While the socket is bound and not yet in place, it lives in a
	// directory of mode 0700 and the target path is untouched.
	hooked := 0
	testHookBound = func(private string) {
		hooked++
		if fi, err := os.Lstat(filepath.Dir(private)); err != nil || fi.Mode().Perm() != 0o700 || filepath.Dir(filepath.Dir(private)) != dir {
			t.Errorf("private directory %s: %v %v", filepath.Dir(private), fi, err)
		}
		if fi, err := os.Lstat(private); err != nil || fi.Mode() != os.ModeSocket|0o600 {
			t.Errorf("private socket: %v %v", fi, err)
		}
		if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the socket path exists before the rename: %v", err)
		}
	}
	defer func() { testHookBound = nil }()
	for range 300 {
		s, err := Listen(path, echo, discard)
		if err != nil {
			close(done)
			t.Fatal(err)
		}
		fi, err := os.Lstat(path)
		if err != nil || fi.Mode() != os.ModeSocket|0o600 {
			close(done)
			t.Fatalf("socket mode right after Listen: %v %v", fi, err)
		}
		s.Close()
	}
	close(done)
	wg.Wait()
	if hooked != 300 {
		t.Fatalf("the socket was bound privately %d times of 300", hooked)
	}
	if ents, err := os.ReadDir(dir); err != nil || len(ents) != 0 {
		t.Fatalf("left behind in the socket directory: %v %v", ents, err)
	}
	for m, n := range seen {
		if m != os.ModeSocket|0o600 {
			t.Errorf("the socket path was seen %d times with mode %v", n, m)
		}
	}
}

// TestCloseKeepsAnotherServersSocket: Close removes the socket only while
// it is still this server's.
func TestCloseKeepsAnotherServersSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "admin.sock")
	a, err := Listen(path, echo, discard)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	b, err := Listen(path, echo, discard)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	a.Close()
	if fi, err := os.Lstat(path); err != nil || fi.Mode()&os.ModeSocket == 0 {
		t.Fatalf("closing the old server removed the new one's socket: %v", err)
	}
}
