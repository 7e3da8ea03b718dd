package admin

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestServeAndCall(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "admin.sock")
	h := HandlerFunc(func(_ context.Context, cmd string, args []string) (any, error) {
		if cmd == "echo" {
			return map[string]any{"args": args}, nil
		}
		return nil, errors.New("unknown command " + cmd)
	})
	s, err := Listen(path, h, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode %v %v", fi.Mode(), err)
	}
	c, err := Dial(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	data, err := c.Call("echo", "a", "b")
	if err != nil || !strings.Contains(string(data), `"a","b"`) {
		t.Fatalf("echo = %s %v", data, err)
	}
	if _, err := c.Call("nope"); err == nil || !strings.Contains(err.Error(), "unknown command") {
		t.Fatalf("unknown = %v", err)
	}
	// A malformed line gets an error line, and the connection stays usable.
	raw, _ := net.Dial("unix", path)
	raw.Write([]byte("not json\n"))
	var resp Response
	if err := json.NewDecoder(raw).Decode(&resp); err != nil || resp.OK || resp.Error == "" {
		t.Fatalf("malformed = %+v %v", resp, err)
	}
	raw.Close()
	// A second daemon on the same socket is refused while the first runs.
	if _, err := Listen(path, h, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second listener: %v", err)
	}
	c.Close()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("socket left behind")
	}
}

func TestUnsafePathsRefused(t *testing.T) {
	h := HandlerFunc(func(context.Context, string, []string) (any, error) { return nil, nil })
	dir := t.TempDir()
	file := filepath.Join(dir, "not-a-socket")
	os.WriteFile(file, []byte("x"), 0o600)
	if _, err := Listen(file, h, slog.New(slog.DiscardHandler)); err == nil {
		t.Fatal("replaced a regular file")
	}
	open := filepath.Join(dir, "open")
	os.Mkdir(open, 0o777)
	os.Chmod(open, 0o777)
	if _, err := Listen(filepath.Join(open, "a.sock"), h, slog.New(slog.DiscardHandler)); err == nil {
		t.Fatal("accepted a world-writable directory")
	}
	// A stale socket (its server gone) is replaced.
	stale := filepath.Join(dir, "stale.sock")
	ln, _ := net.Listen("unix", stale)
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	s, err := Listen(stale, h, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("stale socket: %v", err)
	}
	s.Close()
}
