package ollama

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/lisabot/lisa/devkit/buildcache"
)

const (
	// Version is the Ollama release this package builds and launches.
	Version = "v0.17.4"

	// BinaryEnv names the environment variable holding the path of a
	// prebuilt ollama binary; when set, it is used and nothing is built.
	BinaryEnv = "LISA_OLLAMA_BIN"

	// CacheDirEnv names the environment variable overriding Lisa's cache
	// directory (default: [os.UserCacheDir]/lisa), shared with the
	// Dendrite build. The binary is kept in its subdirectory "ollama-" +
	// [Version].
	CacheDirEnv = "LISA_CACHE_DIR"

	// ollamaPkg is the main package built from the embedded module.
	ollamaPkg = "github.com/ollama/ollama"
	// malgoModule ships miniaudio.h, which the Ollama module lacks (see
	// [EnsureBinary]); its version is pinned by the build module.
	malgoModule = "github.com/gen2brain/malgo"
)

// DebianPackages are the Debian packages whose headers the build needs:
// nlohmann/json.hpp and stb/stb_image.h.
var DebianPackages = []string{"nlohmann-json3-dev", "libstb-dev"}

// debianHeaders are the headers of DebianPackages, in the same order.
var debianHeaders = []string{"/usr/include/nlohmann/json.hpp", "/usr/include/stb/stb_image.h"}

// buildModule holds the go.mod and go.sum of the separate module that
// builds Ollama, under other names because go:embed cannot reach into a
// directory with a go.mod of its own.
//
//go:embed ollama.gomod ollama.gosum
var buildModule embed.FS

// EnsureBinary returns the path of an ollama executable, building it on
// first use.
//
// If [BinaryEnv] is set, its value is checked and returned. Otherwise the
// binary cached under [CacheDirEnv] is returned, after building it if it
// is missing: `go build github.com/ollama/ollama` with cgo (the CPU
// backend) in a separate module written from the embedded ollama.gomod
// and ollama.gosum, so Ollama's dependencies never enter Lisa's module.
// Go module zips leave out every directory named vendor, and Ollama keeps
// llama.cpp's third-party headers in one: the build takes nlohmann/json
// and stb_image from [DebianPackages] (in /usr/include) and miniaudio.h
// from the Go module github.com/gen2brain/malgo, copied into the cache
// and put on CGO_CPPFLAGS. A cold build takes 8 to 19 minutes on two
// cores, depending on other load. Concurrent callers, in this and other
// processes, are serialized by a file lock and the build runs at most
// once. log may be nil.
func EnsureBinary(ctx context.Context, log *slog.Logger) (string, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if p := os.Getenv(BinaryEnv); p != "" {
		return resolveBinary(p)
	}
	root, err := cacheRoot()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, "ollama-"+Version)
	bin := filepath.Join(dir, "ollama")
	if buildcache.Executable(bin) == nil {
		return bin, nil
	}
	if missing := MissingPackages(); len(missing) > 0 {
		return "", fmt.Errorf("ollama: building Ollama %s needs the Debian packages %s (apt-get install %s)",
			Version, strings.Join(missing, " and "), strings.Join(missing, " "))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("ollama: create cache directory: %w", err)
	}
	unlock, err := buildcache.Lock(ctx, log, filepath.Join(dir, "build.lock"), "ollama")
	if err != nil {
		return "", err
	}
	defer unlock()
	if buildcache.Executable(bin) == nil { // built by another process meanwhile
		return bin, nil
	}
	if err := build(ctx, log, dir, bin); err != nil {
		return "", err
	}
	return bin, nil
}

// Built returns the path of an ollama executable that needs no build:
// the one [BinaryEnv] names or the one cached by an earlier build. It
// returns "" and no error when [EnsureBinary] would have to build one.
func Built() (string, error) {
	if p := os.Getenv(BinaryEnv); p != "" {
		return resolveBinary(p)
	}
	root, err := cacheRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(root, "ollama-"+Version, "ollama")
	if buildcache.Executable(bin) != nil {
		return "", nil
	}
	return bin, nil
}

// MissingPackages returns the [DebianPackages] whose headers are not
// installed.
func MissingPackages() []string {
	var out []string
	for i, h := range debianHeaders {
		if _, err := os.Stat(h); err != nil {
			out = append(out, DebianPackages[i])
		}
	}
	return out
}

// cacheRoot returns Lisa's cache directory.
func cacheRoot() (string, error) {
	if d := os.Getenv(CacheDirEnv); d != "" {
		return filepath.Abs(d)
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("ollama: no cache directory (set %s or %s): %w", CacheDirEnv, BinaryEnv, err)
	}
	return filepath.Join(d, "lisa"), nil
}

// build compiles Ollama into a temporary file in dir and renames it to
// bin. The caller holds the build lock.
func build(ctx context.Context, log *slog.Logger, dir, bin string) error {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("ollama: the go command is needed to build Ollama %s (or set %s): %w", Version, BinaryEnv, err)
	}
	modDir := filepath.Join(dir, "buildmod")
	if err := writeBuildModule(modDir); err != nil {
		return err
	}
	// Keep the build hermetic: no workspace, no vendoring, the module's
	// own go.sum.
	env := append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly -buildvcs=false", "CGO_ENABLED=1")
	incDir := filepath.Join(dir, "include")
	if err := copyMiniaudio(ctx, goCmd, modDir, env, incDir); err != nil {
		return err
	}
	tmpDir, err := os.MkdirTemp(dir, ".build-")
	if err != nil {
		return fmt.Errorf("ollama: create build directory: %w", err)
	}
	defer os.RemoveAll(tmpDir)
	out := filepath.Join(tmpDir, "ollama")
	cmd := exec.CommandContext(ctx, goCmd, "build", "-o", out, ollamaPkg)
	cmd.Dir = modDir
	cmd.Env = append(env, "CGO_CPPFLAGS=-I"+incDir)
	var output bytes.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	cmd.WaitDelay = 10 * time.Second
	began := time.Now()
	log.Info("building ollama (cgo, CPU backend; minutes on a cold build cache)", "version", Version, "path", bin)
	if err := cmd.Run(); err != nil {
		tail := output.String()
		if len(tail) > 16<<10 {
			tail = "…" + tail[len(tail)-16<<10:]
		}
		return fmt.Errorf("ollama: go build %s@%s failed after %s: %w\n%s", ollamaPkg, Version, time.Since(began).Round(time.Second), err, tail)
	}
	if err := os.Chmod(out, 0o755); err != nil {
		return fmt.Errorf("ollama: %w", err)
	}
	if err := os.Rename(out, bin); err != nil {
		return fmt.Errorf("ollama: install built binary: %w", err)
	}
	log.Info("built ollama", "version", Version, "path", bin, "duration_ms", time.Since(began).Milliseconds())
	return nil
}

// copyMiniaudio copies miniaudio.h from the malgo module (downloaded and
// checked against the build module's go.sum) to incDir/miniaudio/.
func copyMiniaudio(ctx context.Context, goCmd, modDir string, env []string, incDir string) error {
	dst := filepath.Join(incDir, "miniaudio", "miniaudio.h")
	if fi, err := os.Stat(dst); err == nil && fi.Size() > 0 {
		return nil
	}
	cmd := exec.CommandContext(ctx, goCmd, "mod", "download", "-json", malgoModule)
	cmd.Dir, cmd.Env = modDir, env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("ollama: go mod download %s: %w\n%s", malgoModule, err, stderr.String())
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		return fmt.Errorf("ollama: go mod download %s gave no directory", malgoModule)
	}
	data, err := os.ReadFile(filepath.Join(mod.Dir, "miniaudio.h"))
	if err != nil {
		return fmt.Errorf("ollama: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("ollama: %w", err)
	}
	if err := os.WriteFile(dst, data, 0o644); err != nil {
		return fmt.Errorf("ollama: %w", err)
	}
	return nil
}

// writeBuildModule writes the embedded build module into dir as go.mod
// and go.sum.
func writeBuildModule(dir string) error {
	return buildcache.WriteModule(buildModule, map[string]string{"ollama.gomod": "go.mod", "ollama.gosum": "go.sum"}, dir, "ollama")
}

// resolveBinary resolves the binary BinaryEnv names to an executable file
// (see buildcache.Resolve).
func resolveBinary(p string) (string, error) {
	bin, err := buildcache.Resolve(p)
	if err != nil {
		return "", fmt.Errorf("ollama: %s=%s: %w", BinaryEnv, p, err)
	}
	return bin, nil
}
