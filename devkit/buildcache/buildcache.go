package buildcache

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Lock takes an exclusive flock on path, creating the file, and returns
// the function that releases it. what names the server in errors and log
// lines. While another process holds the lock it logs once and waits; if
// ctx ends meanwhile, Lock returns ctx's error and a goroutine releases
// the lock as soon as it is granted.
func Lock(ctx context.Context, log *slog.Logger, path, what string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%s: open build lock: %w", what, err)
	}
	fd := int(f.Fd())
	unlock := func() {
		_ = syscall.Flock(fd, syscall.LOCK_UN)
		_ = f.Close()
	}
	err = flock(fd, syscall.LOCK_EX|syscall.LOCK_NB)
	if err == nil {
		return unlock, nil
	}
	if !errors.Is(err, syscall.EWOULDBLOCK) {
		_ = f.Close()
		return nil, fmt.Errorf("%s: lock %s: %w", what, path, err)
	}
	log.Info("waiting for a concurrent "+what+" build to finish", "lock", path)
	began := time.Now()
	granted := make(chan error, 1)
	go func() { granted <- flock(fd, syscall.LOCK_EX) }()
	select {
	case err := <-granted:
		if err != nil {
			_ = f.Close()
			return nil, fmt.Errorf("%s: lock %s: %w", what, path, err)
		}
		log.Info("build lock acquired", "waited_ms", time.Since(began).Milliseconds())
		return unlock, nil
	case <-ctx.Done():
		go func() {
			if <-granted == nil {
				_ = syscall.Flock(fd, syscall.LOCK_UN)
			}
			_ = f.Close()
		}()
		return nil, fmt.Errorf("%s: waiting for the build lock: %w", what, ctx.Err())
	}
}

// flock calls syscall.Flock, retrying when interrupted by a signal.
func flock(fd, how int) error {
	for {
		err := syscall.Flock(fd, how)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

// WriteModule writes the embedded build module into dir: files maps a
// name in fsys to the name it gets in dir (for example "x.gomod" to
// "go.mod": a file named go.mod cannot be embedded from a subdirectory
// of Lisa's module). what names the server in errors.
func WriteModule(fsys fs.FS, files map[string]string, dir, what string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("%s: create build module directory: %w", what, err)
	}
	for src, dst := range files {
		data, err := fs.ReadFile(fsys, src)
		if err != nil {
			return fmt.Errorf("%s: embedded build module: %w", what, err)
		}
		if err := os.WriteFile(filepath.Join(dir, dst), data, 0o644); err != nil {
			return fmt.Errorf("%s: write build module: %w", what, err)
		}
	}
	return nil
}

// Resolve turns a user-supplied binary path into the absolute path of an
// executable regular file; a name without a slash is looked up in PATH.
func Resolve(p string) (string, error) {
	if !strings.ContainsRune(p, filepath.Separator) {
		found, err := exec.LookPath(p)
		if err != nil {
			return "", err
		}
		p = found
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	if err := Executable(abs); err != nil {
		return "", fmt.Errorf("%s: %w", abs, err)
	}
	return abs, nil
}

// Executable reports, as an error, why path is not an executable regular
// file; nil means it is one.
func Executable(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("not a regular file (%s)", fi.Mode().Type())
	}
	if fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("not executable (mode %s)", fi.Mode().Perm())
	}
	return nil
}
