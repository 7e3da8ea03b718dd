package dendrite

import (
	"context"
	"embed"
	"fmt"
	"github.com/lisabot/lisa/devkit/hsproc"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/lisabot/lisa/devkit/buildcache"
)

const (
	// Version is the Dendrite release this package builds and launches.
	Version = "v0.13.8"

	// BinaryEnv names the environment variable holding the path of a
	// prebuilt dendrite binary. When set, [EnsureBinary] uses it and never
	// builds.
	BinaryEnv = "LISA_DENDRITE_BIN"

	// CacheDirEnv names the environment variable overriding Lisa's cache
	// directory (default: [os.UserCacheDir]/lisa). The built binary is kept
	// in its subdirectory "dendrite-" + [Version].
	CacheDirEnv = "LISA_CACHE_DIR"

	// dendritePkg is the main package built from the embedded module.
	dendritePkg = "github.com/matrix-org/dendrite/cmd/dendrite"
)

// buildModule holds the go.mod and go.sum of the separate module that builds
// Dendrite. They are stored under other names because go:embed cannot reach
// into a directory that contains a go.mod of its own. Read-only.
//
//go:embed dendrite.gomod dendrite.gosum
var buildModule embed.FS

// EnsureBinary returns the path of a dendrite executable, building it on
// first use.
//
// If [BinaryEnv] is set, its value is checked and returned. Otherwise the
// binary cached under [CacheDirEnv] is returned, after building it with the
// go command if it is missing. Concurrent callers, in this and other
// processes, are serialized by a file lock in the cache directory and the
// build runs at most once. Building takes a few minutes with a cold Go build
// cache and needs the go command in PATH and access to the Go module proxy
// (or a warm module cache). log may be nil.
func EnsureBinary(ctx context.Context, log *slog.Logger) (string, error) {
	return ensureBinaryFor(ctx, log, nil)
}

// ensureBinaryFor is [EnsureBinary] reporting a build to progress (if not
// nil).
func ensureBinaryFor(ctx context.Context, log *slog.Logger, progress func(string)) (string, error) {
	log = orDiscard(log)
	if p := os.Getenv(BinaryEnv); p != "" {
		bin, err := resolveBinary(p)
		if err != nil {
			return "", fmt.Errorf("dendrite: %s: %w", BinaryEnv, err)
		}
		return bin, nil
	}
	root, err := cacheRoot()
	if err != nil {
		return "", err
	}
	return ensureBinaryReporting(ctx, log, root, progress)
}

// Built returns the path of a dendrite executable that needs no build: the
// one [BinaryEnv] names, or the one cached by an earlier build. It returns
// "" and no error when [EnsureBinary] would have to build one, and an
// error when [BinaryEnv] names no executable.
func Built() (string, error) {
	if p := os.Getenv(BinaryEnv); p != "" {
		bin, err := resolveBinary(p)
		if err != nil {
			return "", fmt.Errorf("dendrite: %s: %w", BinaryEnv, err)
		}
		return bin, nil
	}
	root, err := cacheRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(root, "dendrite-"+Version, "dendrite")
	if buildcache.Executable(bin) != nil {
		return "", nil
	}
	return bin, nil
}

// CacheDir returns the directory a build of Dendrite writes to: Lisa's
// cache directory ([CacheDirEnv], else [os.UserCacheDir]/lisa).
func CacheDir() (string, error) { return cacheRoot() }

// GoDirective returns the Go version the build needs: the go directive of
// the embedded build module, such as "1.26".
func GoDirective() (string, error) {
	data, err := buildModule.ReadFile("dendrite.gomod")
	if err != nil {
		return "", fmt.Errorf("dendrite: embedded build module: %w", err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "go "); ok {
			return strings.TrimSpace(v), nil
		}
	}
	return "", fmt.Errorf("dendrite: the embedded build module has no go directive")
}

// cacheRoot returns Lisa's cache directory.
func cacheRoot() (string, error) {
	if d := os.Getenv(CacheDirEnv); d != "" {
		return filepath.Abs(d)
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("dendrite: no cache directory (set %s or %s): %w", CacheDirEnv, BinaryEnv, err)
	}
	return filepath.Join(d, "lisa"), nil
}

// ensureBinaryIn returns root/dendrite-<Version>/dendrite, building it under
// the cross-process build lock if it does not exist yet.
func ensureBinaryIn(ctx context.Context, log *slog.Logger, root string) (string, error) {
	return ensureBinaryReporting(ctx, log, root, nil)
}

// ensureBinaryReporting is [ensureBinaryIn], telling progress (if not nil)
// when it starts waiting for another build or building itself.
func ensureBinaryReporting(ctx context.Context, log *slog.Logger, root string, progress func(string)) (string, error) {
	report := func(step string) {
		if progress != nil {
			progress(step)
		}
	}
	dir := filepath.Join(root, "dendrite-"+Version)
	bin := filepath.Join(dir, "dendrite")
	if buildcache.Executable(bin) == nil {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("dendrite: create cache directory: %w", err)
	}
	// The step covers waiting for a concurrent build, which is the same
	// wait from the caller's point of view.
	report("building Dendrite " + Version + " (first run only)")
	unlock, err := buildcache.Lock(ctx, log, filepath.Join(dir, "build.lock"), "dendrite")
	if err != nil {
		return "", err
	}
	defer unlock()
	// Another process may have built it while we waited for the lock.
	if buildcache.Executable(bin) == nil {
		log.Info("dendrite binary built by a concurrent build", "path", bin)
		return bin, nil
	}
	if err := build(ctx, log, dir, bin); err != nil {
		return "", err
	}
	return bin, nil
}

// build compiles Dendrite into a temporary file in dir and renames it to bin.
// The caller holds the build lock.
func build(ctx context.Context, log *slog.Logger, dir, bin string) error {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("dendrite: the go command is needed to build dendrite %s (or set %s to a prebuilt binary): %w", Version, BinaryEnv, err)
	}
	modDir := filepath.Join(dir, "buildmod")
	if err := writeBuildModule(modDir); err != nil {
		return err
	}
	tmpDir, err := os.MkdirTemp(dir, ".build-")
	if err != nil {
		return fmt.Errorf("dendrite: create build directory: %w", err)
	}
	defer os.RemoveAll(tmpDir)
	out := filepath.Join(tmpDir, "dendrite")

	cmd := exec.CommandContext(ctx, goCmd, "build", "-o", out, dendritePkg)
	cmd.Dir = modDir
	// Keep the build hermetic: no workspace, no vendoring or other
	// surprises from the caller's GOFLAGS.
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly")
	var output hsproc.TailBuffer
	output.Max = 16 << 10
	cmd.Stdout = &output
	cmd.Stderr = &output
	cmd.WaitDelay = 10 * time.Second

	began := time.Now()
	log.Info("building dendrite", "version", Version, "path", bin)
	if err := cmd.Run(); err != nil {
		log.Error("dendrite build failed", "version", Version,
			"duration_ms", time.Since(began).Milliseconds(), "error", err)
		return fmt.Errorf("dendrite: go build %s@%s failed: %w\n%s", dendritePkg, Version, err, output.String())
	}
	if err := os.Chmod(out, 0o755); err != nil {
		return fmt.Errorf("dendrite: %w", err)
	}
	if err := os.Rename(out, bin); err != nil {
		return fmt.Errorf("dendrite: install built binary: %w", err)
	}
	log.Info("built dendrite", "version", Version, "path", bin,
		"duration_ms", time.Since(began).Milliseconds())
	return nil
}

// orDiscard returns log, or a logger that drops everything if log is nil.
func orDiscard(log *slog.Logger) *slog.Logger {
	if log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return log
}

// writeBuildModule writes the embedded build module into dir as go.mod
// and go.sum.
func writeBuildModule(dir string) error {
	return buildcache.WriteModule(buildModule, map[string]string{"dendrite.gomod": "go.mod", "dendrite.gosum": "go.sum"}, dir, "dendrite")
}

// resolveBinary resolves a user-supplied Dendrite binary path to an
// executable file (see buildcache.Resolve).
func resolveBinary(p string) (string, error) {
	bin, err := buildcache.Resolve(p)
	if err != nil {
		return "", fmt.Errorf("dendrite binary %q: %w", p, err)
	}
	return bin, nil
}
