package config

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// resolveFixture is a directory holding a persona file, with an
// environment that resolves every secret of validConfig.
type resolveFixture struct {
	dir string
	cfg Config
	env map[string]string
}

func newResolveFixture(t *testing.T) *resolveFixture {
	t.Helper()
	dir := t.TempDir()
	writeFile(t, dir, "persona.md", "\n  You are Lisa.  \n")
	cfg := validConfig()
	cfg.LLM.APIKey = EnvRef("LISA_LLM_API_KEY")
	cfg.Search.Endpoint = "https://s.example.org/search"
	cfg.Search.APIKey = EnvRef("LISA_SEARCH_API_KEY")
	return &resolveFixture{dir: dir, cfg: cfg, env: map[string]string{
		"LISA_MATRIX_ACCESS_TOKEN": "tok-" + canary,
		"LISA_LLM_API_KEY":         "llm-" + canary,
		"LISA_SEARCH_API_KEY":      "search-" + canary,
	}}
}

func (f *resolveFixture) resolve(t *testing.T) (Resolved, Problems) {
	t.Helper()
	r, err := Resolve(f.cfg, f.dir, mapEnv(f.env))
	ps := problemsOf(t, err)
	if strings.Contains(ps.Error(), canary) {
		t.Errorf("problems leak a secret value:\n%v", ps)
	}
	return r, ps
}

func TestResolveValid(t *testing.T) {
	f := newResolveFixture(t)
	r, ps := f.resolve(t)
	if len(ps) > 0 {
		t.Fatalf("problems:\n%v", ps)
	}
	if r.Persona != "You are Lisa." {
		t.Errorf("persona = %q", r.Persona)
	}
	if got := r.Config.Persona.Path; got != filepath.Join(f.dir, "persona.md") {
		t.Errorf("persona path = %q", got)
	}
	if got := r.Config.Runtime.DataDir; got != filepath.Join(f.dir, "data") {
		t.Errorf("data dir = %q", got)
	}
	if got := r.Config.Runtime.AdminSocket; got != filepath.Join(f.dir, "data", AdminSocketName) {
		t.Errorf("admin socket = %q", got)
	}
	if r.MatrixAccessToken.Reveal() != f.env["LISA_MATRIX_ACCESS_TOKEN"] ||
		r.LLMAPIKey.Reveal() != f.env["LISA_LLM_API_KEY"] ||
		r.SearchAPIKey.Reveal() != f.env["LISA_SEARCH_API_KEY"] {
		t.Error("secrets not resolved")
	}
	want := []string{f.env["LISA_MATRIX_ACCESS_TOKEN"], f.env["LISA_LLM_API_KEY"], f.env["LISA_SEARCH_API_KEY"]}
	if !slices.Equal(r.Secrets(), want) {
		t.Error("Secrets() does not list the three values")
	}
	assertNoCanary(t, "Resolved", r)
}

func TestResolveOptionalSecretsMayBeEmpty(t *testing.T) {
	f := newResolveFixture(t)
	f.cfg.LLM.APIKey, f.cfg.Search.APIKey = SecretRef{}, SecretRef{}
	f.env = map[string]string{"LISA_MATRIX_ACCESS_TOKEN": "tok"}
	r, ps := f.resolve(t)
	if len(ps) > 0 {
		t.Fatalf("problems:\n%v", ps)
	}
	if !r.LLMAPIKey.IsZero() || !r.SearchAPIKey.IsZero() || len(r.Secrets()) != 1 {
		t.Error("empty optional secrets resolved to something")
	}
}

func TestResolveSecretProblems(t *testing.T) {
	tests := []struct {
		name  string
		setup func(f *resolveFixture)
		key   string
		want  []string
	}{
		{"token unset", func(f *resolveFixture) { delete(f.env, "LISA_MATRIX_ACCESS_TOKEN") },
			"matrix.access_token", []string{"LISA_MATRIX_ACCESS_TOKEN", "not set"}},
		{"token empty", func(f *resolveFixture) { f.env["LISA_MATRIX_ACCESS_TOKEN"] = "" },
			"matrix.access_token", []string{"LISA_MATRIX_ACCESS_TOKEN", "empty"}},
		{"token trailing newline", func(f *resolveFixture) { f.env["LISA_MATRIX_ACCESS_TOKEN"] = canary + "\n" },
			"matrix.access_token", []string{"LISA_MATRIX_ACCESS_TOKEN", "whitespace"}},
		{"llm key unset", func(f *resolveFixture) { delete(f.env, "LISA_LLM_API_KEY") },
			"llm.api_key", []string{"LISA_LLM_API_KEY", "not set"}},
		{"search key unset", func(f *resolveFixture) { delete(f.env, "LISA_SEARCH_API_KEY") },
			"search.api_key", []string{"LISA_SEARCH_API_KEY", "not set"}},
		{"token literal", func(f *resolveFixture) { f.cfg.Matrix.AccessToken = NewSecretRef(canary) },
			"matrix.access_token", []string{"env:NAME", "not shown"}},
		{"token missing", func(f *resolveFixture) { f.cfg.Matrix.AccessToken = SecretRef{} },
			"matrix.access_token", []string{"required"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newResolveFixture(t)
			tt.setup(f)
			_, ps := f.resolve(t)
			wantProblem(t, ps, tt.key, tt.want...)
			if len(ps) != 1 {
				t.Errorf("want exactly one problem (Validate and Resolve share rules), got:\n%v", ps)
			}
		})
	}
	t.Run("nil env", func(t *testing.T) {
		f := newResolveFixture(t)
		_, err := Resolve(f.cfg, f.dir, nil)
		wantProblem(t, problemsOf(t, err), "matrix.access_token", "not set")
	})
}

func TestResolvePersonaProblems(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, f *resolveFixture)
		want  string
	}{
		{"missing", func(t *testing.T, f *resolveFixture) { f.cfg.Persona.Path = "nope.md" }, "does not exist"},
		{"directory", func(t *testing.T, f *resolveFixture) {
			mkdir(t, filepath.Join(f.dir, "dir.md"))
			f.cfg.Persona.Path = "dir.md"
		}, "is a directory"},
		{"symlink to directory", func(t *testing.T, f *resolveFixture) {
			mkdir(t, filepath.Join(f.dir, "real"))
			symlink(t, filepath.Join(f.dir, "real"), filepath.Join(f.dir, "link.md"))
			f.cfg.Persona.Path = "link.md"
		}, "is a directory"},
		{"dangling symlink", func(t *testing.T, f *resolveFixture) {
			symlink(t, filepath.Join(f.dir, "gone"), filepath.Join(f.dir, "link.md"))
			f.cfg.Persona.Path = "link.md"
		}, "does not exist"},
		{"character device", func(t *testing.T, f *resolveFixture) { f.cfg.Persona.Path = os.DevNull }, "not a regular file"},
		{"fifo", func(t *testing.T, f *resolveFixture) {
			p := filepath.Join(f.dir, "fifo.md")
			if err := syscall.Mkfifo(p, 0o600); err != nil {
				t.Fatal(err)
			}
			f.cfg.Persona.Path = p
		}, "not a regular file"},
		{"too big", func(t *testing.T, f *resolveFixture) {
			writeFile(t, f.dir, "big.md", strings.Repeat("a", MaxPersonaBytes+1))
			f.cfg.Persona.Path = "big.md"
		}, "more than the limit"},
		{"blank", func(t *testing.T, f *resolveFixture) {
			writeFile(t, f.dir, "blank.md", " \n\t\n")
			f.cfg.Persona.Path = "blank.md"
		}, "is empty"},
		{"zero bytes", func(t *testing.T, f *resolveFixture) {
			writeFile(t, f.dir, "zero.md", "")
			f.cfg.Persona.Path = "zero.md"
		}, "is empty"},
		{"not utf-8", func(t *testing.T, f *resolveFixture) {
			writeFile(t, f.dir, "latin1.md", "caf\xe9")
			f.cfg.Persona.Path = "latin1.md"
		}, "UTF-8"},
		{"nul byte", func(t *testing.T, f *resolveFixture) {
			writeFile(t, f.dir, "nul.md", "a\x00b")
			f.cfg.Persona.Path = "nul.md"
		}, "NUL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newResolveFixture(t)
			tt.setup(t, f)
			_, ps := f.resolve(t)
			wantProblem(t, ps, "persona.path", tt.want)
		})
	}
}

func TestResolvePersonaAccepted(t *testing.T) {
	f := newResolveFixture(t)
	writeFile(t, f.dir, "max.md", strings.Repeat("ä", MaxPersonaBytes/2))
	symlink(t, filepath.Join(f.dir, "max.md"), filepath.Join(f.dir, "link.md"))
	f.cfg.Persona.Path = "link.md"
	r, ps := f.resolve(t)
	if len(ps) > 0 || len(r.Persona) != MaxPersonaBytes {
		t.Fatalf("persona of exactly the limit via a symlink: %d bytes, problems:\n%v", len(r.Persona), ps)
	}
	// An absolute path is used as is.
	other := t.TempDir()
	writeFile(t, other, "p.md", "hello")
	f.cfg.Persona.Path = filepath.Join(other, "p.md")
	if r, ps := f.resolve(t); len(ps) > 0 || r.Persona != "hello" {
		t.Fatalf("absolute persona path: %q %v", r.Persona, ps)
	}
}

func TestResolveDataDirAndSocket(t *testing.T) {
	t.Run("data dir is a file", func(t *testing.T) {
		f := newResolveFixture(t)
		writeFile(t, f.dir, "data", "x")
		_, ps := f.resolve(t)
		wantProblem(t, ps, "runtime.data_dir", "not a directory")
	})
	t.Run("data dir parent missing", func(t *testing.T) {
		f := newResolveFixture(t)
		f.cfg.Runtime.DataDir = "no/such/dir"
		_, ps := f.resolve(t)
		wantProblem(t, ps, "runtime.data_dir", "parent directory")
	})
	t.Run("data dir exists", func(t *testing.T) {
		f := newResolveFixture(t)
		mkdir(t, filepath.Join(f.dir, "data"))
		if _, ps := f.resolve(t); len(ps) > 0 {
			t.Fatal(ps)
		}
	})
	t.Run("socket too long once absolute", func(t *testing.T) {
		f := newResolveFixture(t)
		deep := filepath.Join(f.dir, strings.Repeat("d", 60), strings.Repeat("e", 60))
		if err := os.MkdirAll(deep, 0o700); err != nil {
			t.Fatal(err)
		}
		f.cfg.Runtime.DataDir = deep
		_, ps := f.resolve(t)
		wantProblem(t, ps, "runtime.admin_socket", "at most 107 bytes")
	})
	t.Run("socket path occupied", func(t *testing.T) {
		f := newResolveFixture(t)
		writeFile(t, f.dir, "admin.sock", "")
		f.cfg.Runtime.AdminSocket = "admin.sock"
		_, ps := f.resolve(t)
		wantProblem(t, ps, "runtime.admin_socket", "not a socket")
	})
	t.Run("socket directory missing", func(t *testing.T) {
		f := newResolveFixture(t)
		f.cfg.Runtime.AdminSocket = "run/lisa.sock"
		_, ps := f.resolve(t)
		wantProblem(t, ps, "runtime.admin_socket", "does not exist")
	})
}

func TestResolveAlsoValidates(t *testing.T) {
	f := newResolveFixture(t)
	f.cfg.Runtime.LogLevel = "chatty"
	delete(f.env, "LISA_LLM_API_KEY")
	_, ps := f.resolve(t)
	wantProblem(t, ps, "runtime.log_level", "one of")
	wantProblem(t, ps, "llm.api_key", "not set")
	if ps[0].Key != "llm.api_key" {
		t.Errorf("problems not in file order:\n%v", ps)
	}
}

func TestResolveRelativeBaseDir(t *testing.T) {
	f := newResolveFixture(t)
	t.Chdir(f.dir)
	r, err := Resolve(f.cfg, ".", mapEnv(f.env))
	if err != nil {
		t.Fatal(err)
	}
	if !filepath.IsAbs(r.Config.Persona.Path) || !filepath.IsAbs(r.Config.Runtime.DataDir) {
		t.Errorf("paths not absolute: %q %q", r.Config.Persona.Path, r.Config.Runtime.DataDir)
	}
}

func TestLoadAndResolve(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "persona.md", "You are Lisa.")
	p := writeFile(t, dir, "lisa.toml", minimalTOML)
	env := mapEnv(map[string]string{"LISA_MATRIX_ACCESS_TOKEN": "tok"})
	r, err := LoadAndResolve(p, env)
	if err != nil {
		t.Fatal(err)
	}
	if r.Config.Persona.Path != filepath.Join(dir, "persona.md") || r.MatrixAccessToken.Reveal() != "tok" {
		t.Errorf("unexpected result: %+v", r)
	}

	// A list with a wrongly typed element is reported once, not also as
	// an empty list.
	bad := strings.Replace(minimalTOML, `["!room:example.org"]`, `["!room:example.org", 5]`, 1)
	p = writeFile(t, dir, "bad.toml", bad)
	_, err = LoadAndResolve(p, env)
	ps := problemsOf(t, err)
	if len(ps) != 1 || ps[0].Key != "matrix.allowed_room_ids[1]" {
		t.Errorf("problems:\n%v", ps)
	}

	_, err = LoadAndResolve(filepath.Join(dir, "none.toml"), env)
	if err == nil || errors.As(err, new(Problems)) {
		t.Errorf("missing file: %T %v", err, err)
	}
}

func mkdir(t *testing.T, p string) {
	t.Helper()
	if err := os.Mkdir(p, 0o700); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}
