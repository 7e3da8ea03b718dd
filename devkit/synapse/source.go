package synapse

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/lisabot/lisa/devkit/buildcache"
)

const (
	// Version is the Synapse release this package launches: the last one
	// without a Rust extension, so it runs on Debian bookworm's Python
	// packages alone.
	Version = "1.67.0"

	// TarballEnv names the environment variable holding the path of the
	// Synapse source tarball (a `git archive` of the v1.67.0 tag with its
	// synapse/ package and LICENSE under one top-level directory).
	TarballEnv = "LISA_SYNAPSE_TARBALL"

	// CacheDirEnv names the environment variable overriding Lisa's cache
	// directory (default: [os.UserCacheDir]/lisa). The tarball is unpacked
	// into its subdirectory "synapse-" + [Version].
	CacheDirEnv = "LISA_CACHE_DIR"

	// DefaultPython is the interpreter Synapse runs on: Debian's, which
	// sees the python3-* packages (a python3 earlier on PATH may be
	// another build without them).
	DefaultPython = "/usr/bin/python3"

	// tarballName is the file name looked for beside the module root.
	tarballName = "synapse-" + Version + ".tar.gz"
	// lisaModule is the first line of Lisa's go.mod.
	lisaModule = "module github.com/lisabot/lisa"
)

// pythonModules maps each Python module Synapse imports at start-up to the
// Debian package that provides it (the recipe of
// ../shared/guides/synapse-and-containers.md).
var pythonModules = [][2]string{
	{"jsonschema", "python3-jsonschema"},
	{"frozendict", "python3-frozendict"},
	{"unpaddedbase64", "python3-unpaddedbase64"},
	{"canonicaljson", "python3-canonicaljson"},
	{"signedjson", "python3-signedjson"},
	{"service_identity", "python3-service-identity"},
	{"twisted", "python3-twisted"},
	{"treq", "python3-treq"},
	{"OpenSSL", "python3-openssl"},
	{"yaml", "python3-yaml"},
	{"pyasn1", "python3-pyasn1"},
	{"pyasn1_modules", "python3-pyasn1-modules"},
	{"bcrypt", "python3-bcrypt"},
	{"PIL", "python3-pil"},
	{"sortedcontainers", "python3-sortedcontainers"},
	{"pymacaroons", "python3-pymacaroons"},
	{"msgpack", "python3-msgpack"},
	{"phonenumbers", "python3-phonenumbers"},
	{"prometheus_client", "python3-prometheus-client"},
	{"attr", "python3-attr"},
	{"netaddr", "python3-netaddr"},
	{"jinja2", "python3-jinja2"},
	{"bleach", "python3-bleach"},
	{"typing_extensions", "python3-typing-extensions"},
	{"cryptography", "python3-cryptography"},
	{"ijson", "python3-ijson"},
	{"matrix_common", "python3-matrix-common"},
	{"packaging", "python3-packaging"},
	{"pydantic", "python3-pydantic"},
	{"idna", "python3-idna"},
}

// DebianPackages returns the Debian packages Synapse needs besides the
// tarball, in the order of the recipe.
func DebianPackages() []string {
	out := make([]string, len(pythonModules))
	for i, m := range pythonModules {
		out[i] = m[1]
	}
	return out
}

// MissingError says what Synapse needs that this machine lacks.
type MissingError struct {
	// Tarball is why no source tarball was found ("" when it was).
	Tarball string
	// Python is why the interpreter cannot run ("" when it can).
	Python string
	// Packages are the Debian packages whose Python modules do not import.
	Packages []string
}

// Error implements error, in one line.
func (e *MissingError) Error() string {
	var parts []string
	if e.Tarball != "" {
		parts = append(parts, e.Tarball)
	}
	if e.Python != "" {
		parts = append(parts, e.Python)
	}
	if len(e.Packages) > 0 {
		parts = append(parts, "missing Debian packages "+strings.Join(e.Packages, " "))
	}
	return "synapse " + Version + ": " + strings.Join(parts, "; ")
}

// Prerequisites returns nil when Synapse can run here (the tarball is found
// and python (empty: [DefaultPython]) imports every module Synapse needs),
// else a *[MissingError] naming everything that is missing. It installs
// nothing and unpacks nothing.
func Prerequisites(ctx context.Context, python string) error {
	_, err := checkPrerequisites(ctx, python, "")
	return err
}

// checkPrerequisites is [Prerequisites] for a given tarball (empty:
// [FindTarball]); it returns the tarball's absolute path.
func checkPrerequisites(ctx context.Context, python, tarball string) (string, error) {
	var m MissingError
	if tarball == "" {
		found, err := FindTarball()
		if err != nil {
			m.Tarball = err.Error()
		}
		tarball = found
	} else if abs, err := filepath.Abs(tarball); err != nil {
		m.Tarball = fmt.Sprintf("tarball %s: %v", tarball, err)
	} else if err := regularFile(abs); err != nil {
		m.Tarball = fmt.Sprintf("no source tarball %s: %v", abs, err)
	} else {
		tarball = abs
	}
	if python == "" {
		python = DefaultPython
	}
	if err := buildcache.Executable(python); err != nil {
		m.Python = fmt.Sprintf("no Python interpreter %s (Debian python3): %v", python, err)
	} else {
		pkgs, err := missingPackages(ctx, python)
		if err != nil {
			m.Python = err.Error()
		}
		m.Packages = pkgs
	}
	if m.Tarball == "" && m.Python == "" && len(m.Packages) == 0 {
		return tarball, nil
	}
	return "", &m
}

// missingPackages asks python which of Synapse's modules fail to import.
func missingPackages(ctx context.Context, python string) ([]string, error) {
	var script strings.Builder
	script.WriteString("import importlib\n")
	for _, m := range pythonModules {
		fmt.Fprintf(&script, "try:\n    importlib.import_module(%q)\nexcept Exception:\n    print(%q)\n", m[0], m[1])
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, "-I", "-c", script.String())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s cannot check Synapse's modules: %v: %s", python, err, strings.TrimSpace(stderr.String()))
	}
	return strings.Fields(string(out)), nil
}

// FindTarball returns the absolute path of the Synapse source tarball: the
// file [TarballEnv] names, else ../shared/tools/synapse/synapse-1.67.0.tar.gz
// beside the root of Lisa's module (found by walking up from the working
// directory to the go.mod of github.com/lisabot/lisa), else the copy in the
// module's third_party/synapse/, else the shared/ path
// beside any directory above the working directory that has
// shared/tools/synapse (a worktree next to the main checkout). The error
// names where it looked.
func FindTarball() (string, error) {
	if p := os.Getenv(TarballEnv); p != "" {
		abs, err := filepath.Abs(p)
		if err == nil {
			err = regularFile(abs)
		}
		if err != nil {
			return "", fmt.Errorf("no source tarball at %s=%s (%v)", TarballEnv, p, unwrapPath(err))
		}
		return abs, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("no %s and no working directory: %w", TarballEnv, err)
	}
	var tried []string
	if root := moduleRoot(wd); root != "" {
		for _, p := range []string{
			filepath.Join(filepath.Dir(root), "shared", "tools", "synapse", tarballName),
			filepath.Join(root, "third_party", "synapse", tarballName),
		} {
			if regularFile(p) == nil {
				return p, nil
			}
			tried = append(tried, p)
		}
	}
	for d := wd; ; d = filepath.Dir(d) {
		p := filepath.Join(d, "shared", "tools", "synapse", tarballName)
		if regularFile(p) == nil {
			return p, nil
		}
		if filepath.Dir(d) == d {
			break
		}
	}
	tried = append(tried, "shared/tools/synapse/ above "+wd)
	return "", fmt.Errorf("no source tarball %s (set %s; looked at %s)", tarballName, TarballEnv, strings.Join(tried, ", "))
}

// unwrapPath drops the path from an *fs.PathError, which the message names
// already.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// moduleRoot returns the directory at or above dir whose go.mod declares
// Lisa's module, or "".
func moduleRoot(dir string) string {
	for d := dir; ; d = filepath.Dir(d) {
		if f, err := os.Open(filepath.Join(d, "go.mod")); err == nil {
			line, _ := bufio.NewReader(f).ReadString('\n')
			_ = f.Close()
			if strings.TrimSpace(line) == lisaModule {
				return d
			}
		}
		if filepath.Dir(d) == d {
			return ""
		}
	}
}

// regularFile reports, as an error, why path is not a regular file.
func regularFile(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("not a regular file (%s)", fi.Mode().Type())
	}
	return nil
}

// CacheDir returns Lisa's cache directory ([CacheDirEnv], else
// [os.UserCacheDir]/lisa).
func CacheDir() (string, error) {
	if d := os.Getenv(CacheDirEnv); d != "" {
		return filepath.Abs(d)
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("synapse: no cache directory (set %s): %w", CacheDirEnv, err)
	}
	return filepath.Join(d, "lisa"), nil
}

// EnsureSource unpacks tarball into the cache (once per tarball content,
// under a cross-process lock) and returns the directory to put on
// PYTHONPATH: it holds synapse/ and a minimal
// matrix_synapse-<Version>.dist-info/METADATA, without which Synapse does
// not import. log may be nil.
func EnsureSource(ctx context.Context, log *slog.Logger, tarball string) (string, error) {
	log = orDiscard(log)
	root, err := CacheDir()
	if err != nil {
		return "", err
	}
	sum, err := fileSHA256(tarball)
	if err != nil {
		return "", fmt.Errorf("synapse: tarball: %w", err)
	}
	base := filepath.Join(root, "synapse-"+Version)
	src := filepath.Join(base, sum[:16])
	if complete(src) {
		return src, nil
	}
	if err := os.MkdirAll(base, 0o755); err != nil {
		return "", fmt.Errorf("synapse: create cache directory: %w", err)
	}
	unlock, err := buildcache.Lock(ctx, log, filepath.Join(base, "unpack.lock"), "synapse")
	if err != nil {
		return "", err
	}
	defer unlock()
	if complete(src) {
		return src, nil
	}
	began := time.Now()
	tmp, err := os.MkdirTemp(base, ".unpack-")
	if err != nil {
		return "", fmt.Errorf("synapse: unpack: %w", err)
	}
	defer os.RemoveAll(tmp)
	if err := unpack(tarball, tmp); err != nil {
		return "", err
	}
	// The source cannot tell its version (Synapse reads it from the
	// package metadata written below); it must at least be Synapse.
	if err := regularFile(filepath.Join(tmp, "synapse", "app", "homeserver.py")); err != nil {
		return "", fmt.Errorf("synapse: %s holds no synapse/app/homeserver.py: %w", tarball, err)
	}
	if err := writeMetadata(tmp); err != nil {
		return "", err
	}
	_ = os.RemoveAll(src) // an incomplete earlier attempt
	if err := os.Rename(tmp, src); err != nil {
		return "", fmt.Errorf("synapse: unpack: %w", err)
	}
	log.Info("synapse source unpacked", "tarball", tarball, "dir", src,
		"duration_ms", time.Since(began).Milliseconds())
	return src, nil
}

// metadataDir is the dist-info directory Synapse's importlib.metadata
// lookups find.
const metadataDir = "matrix_synapse-" + Version + ".dist-info"

// writeMetadata writes the minimal package metadata into dir.
func writeMetadata(dir string) error {
	d := filepath.Join(dir, metadataDir)
	if err := os.MkdirAll(d, 0o755); err != nil {
		return fmt.Errorf("synapse: metadata: %w", err)
	}
	text := "Metadata-Version: 2.1\nName: matrix-synapse\nVersion: " + Version +
		"\nProvides-Extra: all\nRequires-Dist: attrs (>=19.2.0)\n"
	if err := os.WriteFile(filepath.Join(d, "METADATA"), []byte(text), 0o644); err != nil {
		return fmt.Errorf("synapse: metadata: %w", err)
	}
	return nil
}

// complete reports whether src is a finished unpack.
func complete(src string) bool {
	return regularFile(filepath.Join(src, "synapse", "__init__.py")) == nil &&
		regularFile(filepath.Join(src, metadataDir, "METADATA")) == nil
}

// fileSHA256 returns the hex SHA-256 of a file.
func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// maxUnpacked bounds the total size unpacked from the tarball.
const maxUnpacked = 256 << 20

// unpack extracts the gzip'd tar at path into dir, dropping the first path
// component (the archive's top-level directory). Only directories and
// regular files are written; a name that would leave dir is an error.
func unpack(path, dir string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("synapse: tarball: %w", err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return fmt.Errorf("synapse: tarball %s: %w", path, err)
	}
	tr := tar.NewReader(gz)
	var total int64
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("synapse: tarball %s: %w", path, err)
		}
		name := strings.TrimSuffix(strings.TrimPrefix(h.Name, "./"), "/")
		top, rest, ok := strings.Cut(name, "/")
		if !ok || rest == "" {
			continue // the top-level directory itself
		}
		if !fs.ValidPath(top) || !fs.ValidPath(rest) {
			return fmt.Errorf("synapse: tarball %s: unsafe name %q", path, h.Name)
		}
		target := filepath.Join(dir, filepath.FromSlash(rest))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return fmt.Errorf("synapse: unpack: %w", err)
			}
		case tar.TypeReg:
			total += h.Size
			if total > maxUnpacked {
				return fmt.Errorf("synapse: tarball %s unpacks to more than %d bytes", path, maxUnpacked)
			}
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return fmt.Errorf("synapse: unpack: %w", err)
			}
			if err := writeFile(target, tr, h.Size); err != nil {
				return fmt.Errorf("synapse: unpack %s: %w", rest, err)
			}
		}
	}
}

// writeFile writes exactly size bytes from r to a new file.
func writeFile(path string, r io.Reader, size int64) error {
	out, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.CopyN(out, r, size); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}

// orDiscard returns log, or a logger that drops everything if log is nil.
func orDiscard(log *slog.Logger) *slog.Logger {
	if log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return log
}
