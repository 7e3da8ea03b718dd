package synapse

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// writeTarball writes a gzip'd tar of files (name → content; a name ending
// in "/" is a directory) to a new file and returns its path.
func writeTarball(t *testing.T, files map[string]string) string {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		h := &tar.Header{Name: n, Mode: 0o644, Size: int64(len(files[n])), Typeflag: tar.TypeReg}
		if strings.HasSuffix(n, "/") {
			h.Typeflag, h.Mode, h.Size = tar.TypeDir, 0o755, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write([]byte(files[n])); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), tarballName)
	if err := os.WriteFile(p, buf.Bytes(), 0o444); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestEnsureSource: the tarball is unpacked once into the cache without its
// top-level directory, with the dist-info Synapse needs; a second call
// reuses it; a tarball that is not Synapse, or has a name that leaves the
// directory, is refused.
func TestEnsureSource(t *testing.T) {
	t.Setenv(CacheDirEnv, t.TempDir())
	good := writeTarball(t, map[string]string{
		"synapse-1.67.0/":                          "",
		"synapse-1.67.0/LICENSE":                   "Apache",
		"synapse-1.67.0/synapse/__init__.py":       "",
		"synapse-1.67.0/synapse/app/homeserver.py": "print('hs')",
	})
	src, err := EnsureSource(t.Context(), nil, good)
	if err != nil {
		t.Fatal(err)
	}
	meta, err := os.ReadFile(filepath.Join(src, "matrix_synapse-"+Version+".dist-info", "METADATA"))
	if err != nil || !strings.Contains(string(meta), "Version: "+Version+"\n") || !strings.Contains(string(meta), "Name: matrix-synapse\n") {
		t.Fatalf("METADATA %q, %v", meta, err)
	}
	if b, err := os.ReadFile(filepath.Join(src, "synapse", "app", "homeserver.py")); err != nil || string(b) != "print('hs')" {
		t.Fatalf("homeserver.py %q, %v", b, err)
	}
	marker := filepath.Join(src, "marker")
	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	again, err := EnsureSource(t.Context(), nil, good)
	if err != nil || again != src {
		t.Fatalf("second EnsureSource = %s, %v; want %s", again, err, src)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("the second call unpacked again: %v", err)
	}

	notSynapse := writeTarball(t, map[string]string{"x-1/README": "hello"})
	if _, err := EnsureSource(t.Context(), nil, notSynapse); err == nil || !strings.Contains(err.Error(), "homeserver.py") {
		t.Fatalf("a tarball without Synapse: %v", err)
	}
	evil := writeTarball(t, map[string]string{"top/../../evil": "x", "top/synapse/app/homeserver.py": ""})
	if _, err := EnsureSource(t.Context(), nil, evil); err == nil || !strings.Contains(err.Error(), "unsafe name") {
		t.Fatalf("a tarball with ..: %v", err)
	}
}

// TestFindTarball: the environment variable wins; without it the tarball
// is found in ../shared/tools/synapse beside the module root, else in the
// module's third_party/synapse; the error names what was tried.
func TestFindTarball(t *testing.T) {
	base := t.TempDir()
	repo := filepath.Join(base, "clone")
	pkg := filepath.Join(repo, "testkit", "synapse")
	if err := os.MkdirAll(pkg, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, "go.mod"), []byte(lisaModule+"\n\ngo 1.26\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(pkg)
	t.Setenv(TarballEnv, "")
	if _, err := FindTarball(); err == nil || !strings.Contains(err.Error(), TarballEnv) ||
		!strings.Contains(err.Error(), filepath.Join(base, "shared", "tools", "synapse", tarballName)) {
		t.Fatalf("no tarball anywhere: %v", err)
	}
	vendored := filepath.Join(repo, "third_party", "synapse", tarballName)
	if err := os.MkdirAll(filepath.Dir(vendored), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(vendored, []byte("x"), 0o444); err != nil {
		t.Fatal(err)
	}
	if got, err := FindTarball(); err != nil || got != vendored {
		t.Fatalf("only the repository's copy: %s, %v; want %s", got, err, vendored)
	}
	shared := filepath.Join(base, "shared", "tools", "synapse", tarballName)
	if err := os.MkdirAll(filepath.Dir(shared), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(shared, []byte("x"), 0o444); err != nil {
		t.Fatal(err)
	}
	if got, err := FindTarball(); err != nil || got != shared {
		t.Fatalf("beside the module root: %s, %v; want %s", got, err, shared)
	}
	other := filepath.Join(t.TempDir(), "s.tgz")
	if err := os.WriteFile(other, []byte("x"), 0o444); err != nil {
		t.Fatal(err)
	}
	t.Setenv(TarballEnv, other)
	if got, err := FindTarball(); err != nil || got != other {
		t.Fatalf("%s set: %s, %v", TarballEnv, got, err)
	}
	t.Setenv(TarballEnv, filepath.Join(base, "missing.tgz"))
	if _, err := FindTarball(); err == nil || !strings.Contains(err.Error(), "missing.tgz") {
		t.Fatalf("%s names no file: %v", TarballEnv, err)
	}
}

// TestPrerequisitesNamesWhatIsMissing: one error names the missing
// tarball and the Debian packages whose modules do not import (here from
// a stand-in interpreter), or the missing interpreter.
func TestPrerequisitesNamesWhatIsMissing(t *testing.T) {
	fake := filepath.Join(t.TempDir(), "python3")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho python3-twisted\necho python3-treq\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(TarballEnv, filepath.Join(t.TempDir(), "none.tar.gz"))
	err := Prerequisites(context.Background(), fake)
	var m *MissingError
	if !errors.As(err, &m) {
		t.Fatalf("Prerequisites = %v, want a *MissingError", err)
	}
	if m.Tarball == "" || !slices.Equal(m.Packages, []string{"python3-twisted", "python3-treq"}) || m.Python != "" {
		t.Fatalf("MissingError %+v", m)
	}
	line := err.Error()
	if strings.Contains(line, "\n") || !strings.Contains(line, "none.tar.gz") || !strings.Contains(line, "python3-twisted python3-treq") {
		t.Fatalf("message %q", line)
	}
	err = Prerequisites(context.Background(), filepath.Join(t.TempDir(), "no-python"))
	if !errors.As(err, &m) || !strings.Contains(m.Python, "no-python") {
		t.Fatalf("no interpreter: %v", err)
	}
	if !slices.Contains(DebianPackages(), "python3-twisted") || len(DebianPackages()) != len(pythonModules) {
		t.Fatalf("DebianPackages %v", DebianPackages())
	}
}

// TestConfig: the configuration is valid YAML, listens on loopback only,
// is readable by its owner only, and raises the rate limits unless asked
// to keep Synapse's.
func TestConfig(t *testing.T) {
	t.Parallel()
	for _, raise := range []bool{true, false} {
		path := filepath.Join(t.TempDir(), configFile)
		if err := writeConfig(path, configParams{Dir: "/data dir", ServerName: "localhost", Port: 12345,
			Secret: "s3cret", Macaroon: "m4c", RaiseRateLimits: raise}); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(path)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("config mode %v, %v", fi.Mode(), err)
		}
		data, _ := os.ReadFile(path)
		var cfg struct {
			Listeners []struct {
				Port          int      `yaml:"port"`
				BindAddresses []string `yaml:"bind_addresses"`
			} `yaml:"listeners"`
			Database struct {
				Name string `yaml:"name"`
				Args struct {
					Database string `yaml:"database"`
				} `yaml:"args"`
			} `yaml:"database"`
			Secret    string         `yaml:"registration_shared_secret"`
			RCMessage map[string]any `yaml:"rc_message"`
		}
		if err := yaml.Unmarshal(data, &cfg); err != nil {
			t.Fatalf("config is not YAML: %v\n%s", err, data)
		}
		if len(cfg.Listeners) != 1 || cfg.Listeners[0].Port != 12345 || !slices.Equal(cfg.Listeners[0].BindAddresses, []string{"127.0.0.1"}) {
			t.Fatalf("listeners %+v", cfg.Listeners)
		}
		if cfg.Database.Name != "sqlite3" || cfg.Database.Args.Database != "/data dir/"+dbFile || cfg.Secret != "s3cret" {
			t.Fatalf("config %+v", cfg)
		}
		if (cfg.RCMessage != nil) != raise {
			t.Fatalf("raise=%v: rc_message %v", raise, cfg.RCMessage)
		}
	}
}

// TestRedaction: accounts never show their token, and the output tail
// masks the secrets and the tokens handed out.
func TestRedaction(t *testing.T) {
	t.Parallel()
	const token = "syt_very_secret_token"
	a := Account{UserID: "@lisa:localhost", DeviceID: "LISADEV", AccessToken: token}
	var logged strings.Builder
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("x", "account", a)
	for _, s := range []string{fmt.Sprintf("%v %+v %#v %s %q", a, a, a, a, a), logged.String()} {
		if strings.Contains(s, token) || !strings.Contains(s, "LISADEV") {
			t.Errorf("formatted account: %s", s)
		}
	}
	s := &Server{secret: "the-shared-secret", macaroon: "the-macaroon", output: &outputWriter{}}
	s.rememberToken(token)
	fmt.Fprintf(s.output, "secret the-shared-secret macaroon the-macaroon token %s end", token)
	tail := s.OutputTail()
	if strings.Contains(tail, "the-shared-secret") || strings.Contains(tail, "the-macaroon") || strings.Contains(tail, token) ||
		strings.Count(tail, redacted) != 3 {
		t.Fatalf("tail %q", tail)
	}
}

// TestSigningKey: the key is one line in signedjson's format, and an
// existing key is kept.
func TestSigningKey(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), keyFile)
	if err := writeSigningKey(path); err != nil {
		t.Fatal(err)
	}
	first, _ := os.ReadFile(path)
	if !regexp.MustCompile(`^ed25519 a_[0-9a-f]{4} [A-Za-z0-9+/]{43}\n$`).Match(first) {
		t.Fatalf("key %q", first)
	}
	if err := writeSigningKey(path); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(path); !bytes.Equal(again, first) {
		t.Fatal("an existing key was replaced")
	}
}

// TestCIInstallsTheDebianPackages: .ci/run installs exactly the packages
// DebianPackages lists, and requires Synapse with the shared tarball.
func TestCIInstallsTheDebianPackages(t *testing.T) {
	t.Parallel()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root := moduleRoot(wd)
	if root == "" {
		t.Fatal("no module root above", wd)
	}
	data, err := os.ReadFile(filepath.Join(root, ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?s)\nsynapse_packages=\(([^)]*)\)`).FindSubmatch(data)
	if m == nil {
		t.Fatal(".ci/run has no synapse_packages=(...) list")
	}
	if got := strings.Fields(string(m[1])); !slices.Equal(got, DebianPackages()) {
		t.Errorf(".ci/run installs %v, want DebianPackages() %v", got, DebianPackages())
	}
	for _, want := range []string{"LISA_REQUIRE_SYNAPSE=1", "shared/tools/synapse/" + tarballName, "export " + TarballEnv} {
		if !bytes.Contains(data, []byte(want)) {
			t.Errorf(".ci/run lacks %q", want)
		}
	}
}

// TestListeningLine: the line saying Synapse bound its port is noticed
// even when split across writes, and only for the expected port.
func TestListeningLine(t *testing.T) {
	t.Parallel()
	w := &outputWriter{}
	w.expect("Synapse now listening on TCP port 4242\n")
	for _, chunk := range []string{"x - Synapse now listening on TCP port 42\n", "... Synapse now list", "ening on TCP po", "rt 4242\nmore\n"} {
		if w.bound() {
			t.Fatalf("bound before %q", chunk)
		}
		fmt.Fprint(w, chunk)
	}
	if !w.bound() {
		t.Fatal("the split listening line was missed")
	}
	w.expect("Synapse now listening on TCP port 4242\n")
	if w.bound() {
		t.Fatal("expect did not forget the earlier line")
	}
}

// TestVendoredTarballIsTheStatedOne: the copy in third_party/synapse is
// the file its README names by SHA-256.
func TestVendoredTarballIsTheStatedOne(t *testing.T) {
	dir := filepath.Join("..", "..", "third_party", "synapse")
	data, err := os.ReadFile(filepath.Join(dir, tarballName))
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(dir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	if want := hex.EncodeToString(sum[:]); !strings.Contains(string(readme), want) {
		t.Errorf("third_party/synapse/README.md does not state the tarball's sha256 %s", want)
	}
}
