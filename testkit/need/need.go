package need

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lisabot/lisa/config"
)

// RequirePandocEnv, set to 1, turns a missing pandoc into a test failure.
const RequirePandocEnv = "LISA_REQUIRE_PANDOC"

// Tool describes an outside executable tests may need.
type Tool struct {
	// Name is the executable, e.g. "pandoc".
	Name string
	// Package is the Debian package that installs it.
	Package string
	// Fix, if set, says how to make the tool usable where no package
	// does (root, a device); it replaces the package in the message.
	Fix string
	// RequireEnv is the variable that, set to 1, makes its absence a
	// failure.
	RequireEnv string
	// Check returns "" when the tool is usable, else why not (missing,
	// too old). It runs once per test binary.
	Check func() string
}

// pandocTool is pandoc 2.15 or newer (for --sandbox), on PATH.
var pandocTool = Tool{Name: "pandoc", Package: "pandoc", RequireEnv: RequirePandocEnv, Check: checkPandoc}

var (
	checkOnce sync.Map // tool name → *onceResult
)

type onceResult struct {
	once sync.Once
	why  string
}

// problem returns "" when tool is usable, else why not, checking once.
func (tool Tool) problem() string {
	v, _ := checkOnce.LoadOrStore(tool.Name, &onceResult{})
	r := v.(*onceResult)
	r.once.Do(func() { r.why = tool.Check() })
	return r.why
}

// Required reports whether the environment makes tool's absence a
// failure.
func (tool Tool) Required() bool { return os.Getenv(tool.RequireEnv) == "1" }

// Message is the one line a test prints when tool is not usable.
func (tool Tool) Message(why string) string {
	if tool.Fix != "" {
		if tool.Required() {
			return fmt.Sprintf("%s: %s, and %s=1 requires it: %s", tool.Name, why, tool.RequireEnv, tool.Fix)
		}
		return fmt.Sprintf("%s: %s; skipped (%s to run it, or set %s=1 to fail instead)", tool.Name, why, tool.Fix, tool.RequireEnv)
	}
	if tool.Required() {
		return fmt.Sprintf("%s: %s, and %s=1 requires it: install the Debian package %s (apt-get install %s)",
			tool.Name, why, tool.RequireEnv, tool.Package, tool.Package)
	}
	return fmt.Sprintf("%s: %s; skipped (install the Debian package %s to run it, or set %s=1 to fail instead)",
		tool.Name, why, tool.Package, tool.RequireEnv)
}

// Need skips t, or fails it where tool is required, unless tool is
// usable.
func (tool Tool) Need(t testing.TB) {
	t.Helper()
	if why := tool.problem(); why != "" {
		tool.Missing(t, why)
	}
}

// Missing skips t, or fails it where tool is required, because of why:
// for a test that finds out late (a mount that fails) that the tool
// cannot work here.
func (tool Tool) Missing(t testing.TB, why string) {
	t.Helper()
	if tool.Required() {
		t.Fatal(tool.Message(why))
		return
	}
	t.Skip(tool.Message(why))
}

// Systemd skips t with one line naming the Debian package unless
// systemd-analyze is on PATH; with LISA_REQUIRE_SYSTEMD=1 it fails t
// instead.
func Systemd(t testing.TB) {
	t.Helper()
	systemdTool.Need(t)
}

// systemdTool is systemd-analyze, on PATH.
var systemdTool = Tool{Name: "systemd-analyze", Package: "systemd", RequireEnv: "LISA_REQUIRE_SYSTEMD", Check: func() string {
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		return "not found on PATH"
	}
	return ""
}}

// Pandoc skips t with one line naming the Debian package unless a pandoc
// new enough for --sandbox is on PATH; with LISA_REQUIRE_PANDOC=1 it
// fails t instead.
func Pandoc(t testing.TB) {
	t.Helper()
	pandocTool.Need(t)
}

// HavePandoc reports whether a pandoc new enough for --sandbox is on
// PATH.
func HavePandoc() bool { return pandocTool.problem() == "" }

// Converter returns the web.converter a test should run Lisa with when
// any converter will do: config.ConverterPandoc where pandoc is usable or
// LISA_REQUIRE_PANDOC=1 (so CI runs the default), else
// config.ConverterBuiltin, with one line in the test's log saying so.
func Converter(t testing.TB) string {
	t.Helper()
	if HavePandoc() || pandocTool.Required() {
		return config.ConverterPandoc
	}
	t.Logf("pandoc: %s; Lisa runs with web.converter = %q", pandocTool.problem(), config.ConverterBuiltin)
	return config.ConverterBuiltin
}

// ConverterEnv is the environment override that makes Lisa use the
// converter [Converter] chose, as "NAME=value".
func ConverterEnv(t testing.TB) string {
	t.Helper()
	return config.EnvOverrideName("web.converter") + "=" + Converter(t)
}

// SetConverterEnv sets the environment override of web.converter for the
// rest of t to the converter [Converter] chose, so Lisa processes started
// with the test's environment use it.
func SetConverterEnv(t testing.TB) {
	t.Helper()
	t.Setenv(config.EnvOverrideName("web.converter"), Converter(t))
}

// checkPandoc looks for pandoc on PATH and reads its version: 2.15, the
// first with --sandbox, or newer. (It cannot use the pandoc adapter's own
// check: that package's tests use this one.)
func checkPandoc() string {
	path, err := exec.LookPath("pandoc")
	if err != nil {
		return "not found on PATH"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "--version").Output()
	if err != nil {
		return fmt.Sprintf("%s --version failed: %v", path, err)
	}
	line, _, _ := strings.Cut(string(out), "\n")
	var major, minor int
	fields := strings.Fields(line)
	if len(fields) < 2 {
		return fmt.Sprintf("%s --version did not report a version", path)
	}
	if _, err := fmt.Sscanf(fields[1], "%d.%d", &major, &minor); err != nil {
		return fmt.Sprintf("%s --version did not report a version", path)
	}
	if major < 2 || (major == 2 && minor < 15) {
		return fmt.Sprintf("%s is pandoc %s, older than 2.15 (needed for --sandbox)", path, fields[1])
	}
	return ""
}

// RequireChromiumEnv, set to 1, turns a missing Chromium into a test
// failure.
const RequireChromiumEnv = "LISA_REQUIRE_CHROMIUM"

// chromiumTool is Debian's Chromium, on PATH as chromium.
var chromiumTool = Tool{Name: "chromium", Package: "chromium", RequireEnv: RequireChromiumEnv, Check: func() string {
	if _, err := exec.LookPath("chromium"); err != nil {
		return "not found on PATH"
	}
	return ""
}}

// Chromium skips t with one line naming the Debian package unless
// chromium is on PATH, and returns its path; with LISA_REQUIRE_CHROMIUM=1
// it fails t instead.
func Chromium(t testing.TB) string {
	t.Helper()
	chromiumTool.Need(t)
	p, _ := exec.LookPath("chromium")
	return p
}
