package need

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/lisabot/lisa/config"
)

// recorder is a testing.TB that records Skip and Fatal instead of ending
// the test.
type recorder struct {
	testing.TB
	skipped, failed string
}

func (r *recorder) Helper()             {}
func (r *recorder) Skip(args ...any)    { r.skipped = toString(args) }
func (r *recorder) Fatal(args ...any)   { r.failed = toString(args) }
func (r *recorder) Logf(string, ...any) {}

func toString(args []any) string {
	var b strings.Builder
	for _, a := range args {
		b.WriteString(a.(string))
	}
	return b.String()
}

func TestNeedSkipsOrFailsWithOneLine(t *testing.T) {
	tool := Tool{Name: "frobnicate", Package: "frob-tools", RequireEnv: "LISA_REQUIRE_FROB", Check: func() string { return "not found on PATH" }}
	for _, tc := range []struct {
		require    string
		skip, fail bool
	}{{"", true, false}, {"0", true, false}, {"1", false, true}} {
		t.Setenv("LISA_REQUIRE_FROB", tc.require)
		r := &recorder{TB: t}
		tool.Need(r)
		line := r.skipped + r.failed
		if (r.skipped != "") != tc.skip || (r.failed != "") != tc.fail {
			t.Fatalf("LISA_REQUIRE_FROB=%q: skipped %q, failed %q", tc.require, r.skipped, r.failed)
		}
		if strings.Contains(line, "\n") || !strings.Contains(line, "Debian package frob-tools") || !strings.Contains(line, "not found on PATH") || !strings.Contains(line, "LISA_REQUIRE_FROB") {
			t.Fatalf("message %q", line)
		}
	}
	ok := Tool{Name: "ok", Package: "ok", RequireEnv: "LISA_REQUIRE_OK", Check: func() string { return "" }}
	t.Setenv("LISA_REQUIRE_OK", "1")
	r := &recorder{TB: t}
	ok.Need(r)
	if r.skipped != "" || r.failed != "" {
		t.Fatalf("usable tool: %+v", r)
	}
}

// TestPandocMatchesPath: the helper sees pandoc exactly when it is on
// PATH (a pandoc too old for --sandbox aside), and a PATH without it
// makes the check fail with a reason.
func TestPandocMatchesPath(t *testing.T) {
	_, err := exec.LookPath("pandoc")
	if (err == nil) != HavePandoc() {
		t.Fatalf("pandoc on PATH: %v, HavePandoc: %v (%s)", err == nil, HavePandoc(), pandocTool.problem())
	}
	t.Setenv("PATH", t.TempDir())
	if why := checkPandoc(); !strings.Contains(why, "not found") {
		t.Fatalf("check without pandoc on PATH: %q", why)
	}
}

func TestConverterFallsBackToBuiltin(t *testing.T) {
	want := config.ConverterBuiltin
	if HavePandoc() || pandocTool.Required() {
		want = config.ConverterPandoc
	}
	if got := Converter(t); got != want {
		t.Fatalf("Converter = %q, want %q", got, want)
	}
	if got := ConverterEnv(t); got != "LISA_WEB__CONVERTER="+want {
		t.Fatalf("ConverterEnv = %q", got)
	}
	SetConverterEnv(t)
	if got := os.Getenv("LISA_WEB__CONVERTER"); got != want {
		t.Fatalf("SetConverterEnv set %q", got)
	}
}

// pathWithout returns a PATH of one new directory holding links to every
// executable on the current PATH except those named hide.
func pathWithout(t *testing.T, hide ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range filepath.SplitList(os.Getenv("PATH")) {
		entries, err := os.ReadDir(d)
		if err != nil {
			continue
		}
		for _, e := range entries {
			if slices.Contains(hide, e.Name()) {
				continue
			}
			link := filepath.Join(dir, e.Name())
			if _, err := os.Lstat(link); err == nil {
				continue // an earlier PATH entry wins
			}
			if err := os.Symlink(filepath.Join(d, e.Name()), link); err != nil {
				t.Fatal(err)
			}
		}
	}
	return dir
}

// TestPandocTestsWithoutPandocOnPath runs the pandoc adapter's tests that
// need pandoc as `go test` would on a machine without it (a PATH that
// hides it): they skip, each with one line naming the Debian package, and
// pass; with LISA_REQUIRE_PANDOC=1 they fail with that line.
func TestPandocTestsWithoutPandocOnPath(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	path := pathWithout(t, "pandoc")
	run := func(require string) (string, error) {
		cmd := exec.Command(goBin, "test", "-count=1", "-v",
			"-run", "^(TestConvertRealPandoc|TestConvertDefaultPathFindsPandoc|TestCheckRealPandoc)$", "./adapters/pandoc")
		cmd.Dir = filepath.Join("..", "..")
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "PATH=") && !strings.HasPrefix(kv, RequirePandocEnv+"=") {
				cmd.Env = append(cmd.Env, kv)
			}
		}
		cmd.Env = append(cmd.Env, "PATH="+path, RequirePandocEnv+"="+require)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	out, err := run("")
	if err != nil {
		t.Fatalf("without pandoc, the tests did not pass: %v\n%s", err, out)
	}
	skip := "pandoc: not found on PATH; skipped (install the Debian package pandoc to run it, or set LISA_REQUIRE_PANDOC=1 to fail instead)"
	for _, name := range []string{"TestConvertRealPandoc", "TestConvertDefaultPathFindsPandoc", "TestCheckRealPandoc"} {
		if !strings.Contains(out, "--- SKIP: "+name) {
			t.Errorf("%s did not skip:\n%s", name, out)
		}
	}
	if strings.Count(out, skip) != 3 {
		t.Errorf("want the one skip line three times:\n%s", out)
	}

	out, err = run("1")
	if err == nil {
		t.Fatalf("with LISA_REQUIRE_PANDOC=1 and no pandoc, the tests passed:\n%s", out)
	}
	fail := "pandoc: not found on PATH, and LISA_REQUIRE_PANDOC=1 requires it: install the Debian package pandoc (apt-get install pandoc)"
	if !strings.Contains(out, "--- FAIL: TestConvertRealPandoc") || strings.Count(out, fail) != 3 {
		t.Errorf("want three failures with the line %q:\n%s", fail, out)
	}
}

// TestSynapseLineNamesWhatIsMissing: without the tarball, the Synapse
// check names it, and the message is one line naming the variables.
func TestSynapseLineNamesWhatIsMissing(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "none.tar.gz")
	t.Setenv("LISA_SYNAPSE_TARBALL", missing)
	why := checkSynapse()
	if !strings.Contains(why, missing) {
		t.Fatalf("check without the tarball: %q", why)
	}
	for _, require := range []string{"", "1"} {
		t.Setenv(RequireSynapseEnv, require)
		line := synapseTool.Message(why)
		if strings.Contains(line, "\n") || !strings.Contains(line, "LISA_SYNAPSE_TARBALL") || !strings.Contains(line, RequireSynapseEnv) {
			t.Fatalf("%s=%q: message %q", RequireSynapseEnv, require, line)
		}
	}
}
