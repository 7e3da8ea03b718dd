package need

import (
	"os"
	"os/exec"
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
