package archtest

import (
	"strings"
	"testing"
)

// adapterOf returns the adapter an import path belongs to
// ("adapters/matrix" for ".../adapters/matrix/sub"), or "".
func adapterOf(path string) string {
	rest, ok := strings.CutPrefix(path, module+"/adapters/")
	if !ok {
		return ""
	}
	name, _, _ := strings.Cut(rest, "/")
	return "adapters/" + name
}

// adapterImportProblem reports why package from (an adapter) may not
// import imp, or "". Adapters wrap one outside library each: they never
// import actors, and never another adapter; data crossing a port lives in
// messages, and wiring adapters together is the composition root's job
// (package daemon).
func adapterImportProblem(from, imp string) string {
	switch {
	case strings.HasPrefix(imp, module+"/actors"):
		return "adapters never import actors: the actors declare ports, the daemon wires adapters to them"
	case strings.HasPrefix(imp, module+"/daemon"):
		return "adapters never import the composition root"
	case adapterOf(imp) != "" && adapterOf(imp) != adapterOf(from):
		return "adapters never import other adapters: put shared data in messages and wire them in package daemon"
	}
	return ""
}

// testkitImportProblem reports why the non-test package from may not import
// imp, or "". Only commands, the chaos harness and the test kit itself use
// the test kit; the development stack of `lisa demo` (devkit) does not.
func testkitImportProblem(from, imp string) string {
	if !strings.HasPrefix(imp, module+"/testkit") {
		return ""
	}
	for _, ok := range []string{module + "/cmd/", module + "/chaos", module + "/testkit"} {
		if strings.HasPrefix(from, ok) {
			return ""
		}
	}
	return "only cmd/*, chaos and tests import the test kit"
}

// binaryDepProblem reports why the daemon binary may not link dep, or "".
func binaryDepProblem(dep string) string {
	switch {
	case dep == "testing" || strings.HasPrefix(dep, "testing/"):
		return "test code"
	case strings.HasPrefix(dep, "go.uber.org/goleak"):
		return "a test-only leak checker"
	case dep == module+"/chaos" || strings.HasPrefix(dep, module+"/chaos/"):
		return "fault injection and failpoints that SIGKILL the process"
	case strings.HasPrefix(dep, module+"/testkit"):
		return "test fakes"
	}
	return ""
}

// TestAdaptersImportNoActorsOrOtherAdapters checks every non-test package
// under adapters/.
func TestAdaptersImportNoActorsOrOtherAdapters(t *testing.T) {
	for _, p := range goList(t, "./adapters/...") {
		for _, imp := range p.Imports {
			if why := adapterImportProblem(p.ImportPath, imp); why != "" {
				t.Errorf("%s imports %s: %s", p.ImportPath, imp, why)
			}
		}
	}
}

// TestOnlyCommandsAndChaosImportTestkit checks every non-test package.
func TestOnlyCommandsAndChaosImportTestkit(t *testing.T) {
	for _, p := range goList(t, "./...") {
		for _, imp := range p.Imports {
			if why := testkitImportProblem(p.ImportPath, imp); why != "" {
				t.Errorf("%s imports %s: %s", p.ImportPath, imp, why)
			}
		}
	}
}

// TestDaemonBinaryLinksNoTestCode checks everything the lisa binary links.
func TestDaemonBinaryLinksNoTestCode(t *testing.T) {
	for _, dep := range goListDeps(t, module+"/cmd/lisa") {
		if why := binaryDepProblem(dep); why != "" {
			t.Errorf("cmd/lisa links %s: %s", dep, why)
		}
	}
}

// TestGraphRulesCatchViolations keeps the rules themselves honest: each
// forbids the imports of today's violations and allows the legitimate
// ones.
func TestGraphRulesCatchViolations(t *testing.T) {
	forbidden := []struct{ from, imp string }{
		{module + "/adapters/llm", module + "/actors/orchestrate"},
		{module + "/adapters/research", module + "/adapters/web"},
		{module + "/adapters/research", module + "/daemon"},
	}
	for _, c := range forbidden {
		if adapterImportProblem(c.from, c.imp) == "" {
			t.Errorf("rule allows %s -> %s", c.from, c.imp)
		}
	}
	allowed := []struct{ from, imp string }{
		{module + "/adapters/llm", module + "/messages"},
		{module + "/adapters/matrix", "maunium.net/go/mautrix"},
		{module + "/adapters/web", module + "/adapters/web/internal"},
	}
	for _, c := range allowed {
		if why := adapterImportProblem(c.from, c.imp); why != "" {
			t.Errorf("rule forbids %s -> %s: %s", c.from, c.imp, why)
		}
	}
	if testkitImportProblem(module+"/devkit/dendrite", module+"/testkit/dendrite") == "" ||
		testkitImportProblem(module+"/daemon", module+"/testkit/llmfake") == "" {
		t.Error("testkit rule allows a library package to import the test kit")
	}
	for _, from := range []string{module + "/cmd/lisa-bench", module + "/chaos", module + "/testkit/fakehs"} {
		if why := testkitImportProblem(from, module+"/testkit/dendrite"); why != "" {
			t.Errorf("testkit rule forbids %s: %s", from, why)
		}
	}
	for _, dep := range []string{"testing", "go.uber.org/goleak", module + "/chaos", module + "/testkit/llmfake"} {
		if binaryDepProblem(dep) == "" {
			t.Errorf("binary rule allows %s", dep)
		}
	}
	for _, dep := range []string{"net/http", module + "/devkit/dendrite", module + "/daemon", module + "/chaosmonkey"} {
		if why := binaryDepProblem(dep); why != "" {
			t.Errorf("binary rule forbids %s: %s", dep, why)
		}
	}
}
