package archtest

import (
	"os/exec"
	"strings"
	"testing"
)

// devkitForbidden reports why a (transitive, non-test) dependency of a
// devkit package is not allowed, or "" when it is. devkit is linked into the
// production binary by `lisa demo`, so it must not pull in test code.
func devkitForbidden(dep string) string {
	switch {
	case dep == "testing" || strings.HasPrefix(dep, "testing/"):
		return "devkit is product code (lisa demo links it); testing helpers belong in testkit"
	case dep == module+"/testkit" || strings.HasPrefix(dep, module+"/testkit/"):
		return "testkit wraps devkit, never the other way round; the binary must not link testkit"
	case strings.HasPrefix(dep, "go.uber.org/goleak"):
		return "goleak is test code"
	}
	return ""
}

// TestDevkitLinksNoTestCode checks every package under devkit/: its
// non-test build must not depend, even transitively, on "testing" or on
// anything under testkit/, and its tests must not import testkit either
// (the dependency runs one way, testkit → devkit).
func TestDevkitLinksNoTestCode(t *testing.T) {
	for _, p := range goList(t, "./devkit/...") {
		for _, d := range goListDeps(t, p.ImportPath) {
			if why := devkitForbidden(d); why != "" {
				t.Errorf("%s imports %s (transitively): %s", p.ImportPath, d, why)
			}
		}
		for _, d := range devkitTestImports(t, p.ImportPath) {
			if strings.HasPrefix(d, module+"/testkit") {
				t.Errorf("a test of %s imports %s: devkit's tests use devkit only", p.ImportPath, d)
			}
		}
	}
}

// devkitTestImports returns the imports of importPath's _test.go files.
func devkitTestImports(t *testing.T, importPath string) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", "{{range .TestImports}}{{.}} {{end}}{{range .XTestImports}}{{.}} {{end}}", importPath)
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s: %v", importPath, err)
	}
	return strings.Fields(string(out))
}

// TestDevkitRuleCatchesViolations keeps the devkit rule itself honest.
func TestDevkitRuleCatchesViolations(t *testing.T) {
	for _, dep := range []string{"testing", "testing/iotest", module + "/testkit/llmfake",
		module + "/testkit/dendrite", "go.uber.org/goleak"} {
		if devkitForbidden(dep) == "" {
			t.Errorf("rule allows %s", dep)
		}
	}
	for _, dep := range []string{module + "/devkit/dendrite", module + "/testkitchen", "net/http", "text/template"} {
		if devkitForbidden(dep) != "" {
			t.Errorf("rule forbids %s", dep)
		}
	}
}
