package archtest

import (
	"bytes"
	"encoding/json"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const module = "github.com/lisabot/lisa"

type pkg struct {
	ImportPath string
	Dir        string
	Imports    []string
}

func goList(t *testing.T, patterns ...string) []pkg {
	t.Helper()
	args := append([]string{"list", "-deps=false", "-json"}, patterns...)
	cmd := exec.Command("go", args...)
	cmd.Dir = ".."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) == 0 {
		t.Fatalf("go list %v found no packages", patterns)
	}
	return pkgs
}

// forbidden reports why dep may not be imported by the actors or messages
// packages, or "" when it may.
func forbidden(dep string) string {
	switch {
	case strings.HasPrefix(dep, module+"/adapters"):
		return "adapters are wired in package daemon, never imported by actors"
	case strings.HasPrefix(dep, module+"/daemon"), strings.HasPrefix(dep, module+"/cmd"):
		return "the composition root imports actors, not the other way round"
	case strings.HasPrefix(dep, module+"/persistence"), strings.HasPrefix(dep, "github.com/dgraph-io/badger"):
		return "storage is reached through protoactor's persistence interfaces and small ports"
	case strings.HasPrefix(dep, "maunium.net/go/mautrix"):
		return "Matrix is an adapter"
	case strings.HasPrefix(dep, "github.com/sashabaranov/go-openai"):
		return "the LLM is an adapter"
	}
	return ""
}

// forbiddenDirect reports why a direct import is not allowed. net/http is
// checked on direct imports only: protoactor itself links it (for its
// Prometheus exporter), but actor code must not make requests.
func forbiddenDirect(imp string) string {
	if why := forbidden(imp); why != "" {
		return why
	}
	if imp == "net/http" || strings.HasPrefix(imp, "net/http/") {
		return "network IO belongs to adapters"
	}
	return ""
}

// TestActorsAndMessagesImportNoAdapters checks the transitive imports of
// every non-test package under actors/ and messages/.
func TestActorsAndMessagesImportNoAdapters(t *testing.T) {
	for _, p := range goList(t, "./actors/...", "./messages/...") {
		for _, d := range goListDeps(t, p.ImportPath) {
			if why := forbidden(d); why != "" {
				t.Errorf("%s imports %s (transitively): %s", p.ImportPath, d, why)
			}
		}
		for _, d := range p.Imports {
			if why := forbiddenDirect(d); why != "" {
				t.Errorf("%s imports %s: %s", p.ImportPath, d, why)
			}
		}
	}
}

func goListDeps(t *testing.T, importPath string) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", importPath)
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", importPath, err)
	}
	return strings.Fields(string(out))
}

// TestForbiddenRuleCatchesViolations keeps the rule itself honest.
func TestForbiddenRuleCatchesViolations(t *testing.T) {
	for _, dep := range []string{
		module + "/adapters/logging", module + "/persistence", "github.com/dgraph-io/badger/v4",
		"maunium.net/go/mautrix/event", "github.com/sashabaranov/go-openai", "net/http", "net/http/httptest",
	} {
		if forbiddenDirect(dep) == "" {
			t.Errorf("rule allows %s", dep)
		}
	}
	for _, dep := range []string{module + "/messages", "github.com/asynkron/protoactor-go/actor", "net/url", "log/slog"} {
		if forbiddenDirect(dep) != "" {
			t.Errorf("rule forbids %s", dep)
		}
	}
}

// TestEveryPackageHasDocGo checks that each package directory has a doc.go
// whose package clause carries a comment.
func TestEveryPackageHasDocGo(t *testing.T) {
	for _, p := range goList(t, "./...") {
		path := filepath.Join(p.Dir, "doc.go")
		src, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("%s has no doc.go", p.ImportPath)
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, src, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		if f.Doc == nil || len(strings.TrimSpace(f.Doc.Text())) < 20 {
			t.Errorf("%s: doc.go has no package comment worth the name", p.ImportPath)
		}
	}
}
