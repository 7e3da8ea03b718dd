package pandoc

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/lisabot/lisa/messages"
	"github.com/lisabot/lisa/testkit/need"
)

// realPandoc returns the pandoc on PATH. Without one the test skips with
// one line naming the Debian package, or fails where LISA_REQUIRE_PANDOC=1
// (CI installs pandoc and sets it).
func realPandoc(t *testing.T) string {
	t.Helper()
	need.Pandoc(t)
	p, err := exec.LookPath("pandoc")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// fake writes an executable shell script into a fresh temporary directory
// and returns its path.
func fake(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "pandoc")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func wantToolErr(t *testing.T, err error, code messages.ToolCode) *messages.ToolError {
	t.Helper()
	var te *messages.ToolError
	if !errors.As(err, &te) {
		t.Fatalf("error %v (%T) is not a *messages.ToolError", err, err)
	}
	if te.Code != code {
		t.Fatalf("got code %s (%q), want %s", te.Code, te.Message, code)
	}
	return te
}

// processGone reports whether pid no longer runs (absent or a zombie
// awaiting a reaper).
func processGone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	// Field 3, after "pid (comm)", is the state.
	i := bytes.LastIndexByte(stat, ')')
	return i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z'
}

func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for !processGone(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d still running", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func readPID(t *testing.T, path string) int {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		b, err := os.ReadFile(path)
		if err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
				return pid
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no pid in %s", path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

const sampleHTML = `<!doctype html><html><head><title>T</title><script>alert(1)</script></head><body>
<h1>Main Title</h1>
<h2>Section</h2>
<ul><li>first item</li><li>second item</li></ul>
<ol><li>step one</li></ol>
<p>See <a href="https://example.test/page">the page</a> and <code>x := 1</code>.</p>
<pre><code>func main() {
	println("hi")
}
</code></pre>
</body></html>`

func TestConvertRealPandoc(t *testing.T) {
	c := New(Config{Path: realPandoc(t), Timeout: 30 * time.Second})
	md, err := c.Convert(context.Background(), []byte(sampleHTML))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"# Main Title",
		"## Section",
		"first item",
		"second item",
		"1.  step one",
		"[the page](https://example.test/page)",
		"`x := 1`",
		`println("hi")`,
	} {
		if !strings.Contains(md, want) {
			t.Errorf("output lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "alert(1)") {
		t.Errorf("script content leaked:\n%s", md)
	}
	if !regexp.MustCompile(`(?m)^-\s+first item$`).MatchString(md) {
		t.Errorf("no bullet list:\n%s", md)
	}
	if !regexp.MustCompile("(?m)^(    |```)").MatchString(md) {
		t.Errorf("no code block:\n%s", md)
	}
}

func TestConvertDefaultPathFindsPandoc(t *testing.T) {
	realPandoc(t)
	md, err := New(Config{}).Convert(context.Background(), []byte("<p>hello <em>there</em></p>"))
	if err != nil {
		t.Fatal(err)
	}
	if md != "hello *there*" {
		t.Fatalf("got %q", md)
	}
}

func TestCheckRealPandoc(t *testing.T) {
	v, err := New(Config{Path: realPandoc(t)}).Check(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	_, major, minor, ok := parseVersion([]byte("pandoc " + v))
	if !ok || major < 2 || (major == 2 && minor < 15) {
		t.Fatalf("version %q", v)
	}
}

func TestCheckFakeVersions(t *testing.T) {
	cases := []struct {
		out  string
		ok   bool
		want string
	}{
		{"pandoc 2.9", false, "too old"},
		{"pandoc 2.14.2", false, "too old"},
		{"pandoc 1.19.2.4", false, "too old"},
		{"pandoc 2.15", true, ""},
		{"pandoc 3.1.11.1\nFeatures: +server +lua", true, ""},
		{"pandoc.exe 3.0", true, ""},
		{"hello world", false, "did not report"},
		{"", false, "did not report"},
	}
	for _, tc := range cases {
		p := fake(t, "printf '%s\\n' '"+tc.out+"'")
		v, err := New(Config{Path: p}).Check(context.Background())
		if tc.ok {
			if err != nil {
				t.Errorf("%q: %v", tc.out, err)
			}
			continue
		}
		te := wantToolErr(t, err, messages.ToolConversionFailed)
		if !strings.Contains(te.Message, tc.want) {
			t.Errorf("%q: message %q (version %q)", tc.out, te.Message, v)
		}
	}
}

func TestCheckMissing(t *testing.T) {
	p := filepath.Join(t.TempDir(), "no-such-pandoc")
	_, err := New(Config{Path: p}).Check(context.Background())
	te := wantToolErr(t, err, messages.ToolConversionFailed)
	if !strings.Contains(te.Message, "not found") {
		t.Fatalf("message %q", te.Message)
	}
}

func TestConvertMissingExecutable(t *testing.T) {
	for _, p := range []string{
		filepath.Join(t.TempDir(), "no-such-pandoc"),
		"lisa-no-such-pandoc-binary",
	} {
		_, err := New(Config{Path: p}).Convert(context.Background(), []byte("<p>x</p>"))
		te := wantToolErr(t, err, messages.ToolConversionFailed)
		if !strings.Contains(te.Message, "not available") || strings.Contains(te.Message, p) {
			t.Fatalf("message %q", te.Message)
		}
	}
	// Present but not executable.
	p := filepath.Join(t.TempDir(), "pandoc")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := New(Config{Path: p}).Convert(context.Background(), []byte("<p>x</p>"))
	wantToolErr(t, err, messages.ToolConversionFailed)
}

func TestConvertNonZeroExit(t *testing.T) {
	p := fake(t, "cat >/dev/null; echo 'partial output'; echo 'secret diagnostic' >&2; exit 3")
	_, err := New(Config{Path: p}).Convert(context.Background(), []byte("<p>x</p>"))
	te := wantToolErr(t, err, messages.ToolConversionFailed)
	if strings.Contains(te.Error(), "secret") || strings.Contains(te.Error(), "partial") {
		t.Fatalf("error leaks process output: %q", te.Error())
	}
}

func TestConvertFixedArgsStdinAndMinimalEnv(t *testing.T) {
	t.Setenv("LISA_SECRET_TOKEN", "hunter2")
	t.Setenv("HTTP_PROXY", "http://proxy.test")
	p := fake(t, `printf 'arg=%s\n' "$@"; echo "pwd=$(pwd)"; ls -A; env; echo "stdin=$(cat)"`)
	out, err := New(Config{Path: p}).Convert(context.Background(), []byte("<p>from stdin</p>"))
	if err != nil {
		t.Fatal(err)
	}
	wantArgs := "arg=+RTS\narg=-M512M\narg=-RTS\narg=--from=html\narg=--to=gfm\narg=--wrap=none\narg=--sandbox\n"
	if !strings.HasPrefix(out, wantArgs) {
		t.Fatalf("args:\n%s", out)
	}
	if !strings.Contains(out, "stdin=<p>from stdin</p>") {
		t.Fatalf("stdin not passed:\n%s", out)
	}
	for _, bad := range []string{"hunter2", "LISA_SECRET", "HTTP_PROXY", "proxy.test"} {
		if strings.Contains(out, bad) {
			t.Fatalf("environment leaked %q:\n%s", bad, out)
		}
	}
	for _, want := range []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8"} {
		if !strings.Contains(out, want) {
			t.Fatalf("environment lacks %q:\n%s", want, out)
		}
	}
	var pwd, home string
	for _, l := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(l, "pwd="); ok {
			pwd = v
		}
		if v, ok := strings.CutPrefix(l, "HOME="); ok {
			home = v
		}
	}
	if pwd == "" || pwd != home {
		t.Fatalf("pwd %q home %q", pwd, home)
	}
	// The working directory is removed after the run.
	if _, err := os.Stat(pwd); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("working directory %s not removed: %v", pwd, err)
	}
}

func TestConvertEmptyWorkDir(t *testing.T) {
	p := fake(t, `n=$(ls -A | wc -l); echo "entries=$n"`)
	out, err := New(Config{Path: p}).Convert(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(out) != "entries=0" {
		t.Fatalf("got %q", out)
	}
}

func TestConvertTimeoutKillsProcessGroup(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	childFile := filepath.Join(dir, "child")
	// The script and a background child both hold stdout open; only a
	// process-group kill ends them promptly.
	p := fake(t, "sleep 30 &\necho $! > "+childFile+"\necho $$ > "+pidFile+"\nwait")
	const timeout = 300 * time.Millisecond
	start := time.Now()
	_, err := New(Config{Path: p, Timeout: timeout}).Convert(context.Background(), []byte("<p>x</p>"))
	elapsed := time.Since(start)
	wantToolErr(t, err, messages.ToolTimeout)
	if elapsed < timeout || elapsed > timeout+2*time.Second {
		t.Fatalf("elapsed %v with timeout %v", elapsed, timeout)
	}
	waitGone(t, readPID(t, pidFile))
	waitGone(t, readPID(t, childFile))
}

func TestConvertCallerCancel(t *testing.T) {
	p := fake(t, "exec sleep 30")
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	_, err := New(Config{Path: p, Timeout: time.Minute}).Convert(ctx, []byte("<p>x</p>"))
	wantToolErr(t, err, messages.ToolConversionFailed)
	if el := time.Since(start); el > 3*time.Second {
		t.Fatalf("elapsed %v", el)
	}
}

func TestConvertHugeStdout(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	// 10 MB, then hang: the adapter must stop reading and kill, not wait.
	p := fake(t, "echo $$ > "+pidFile+"\nhead -c 10000000 /dev/zero | tr '\\0' 'a'\nexec sleep 30")
	start := time.Now()
	_, err := New(Config{Path: p, Timeout: 20 * time.Second, MaxOutputBytes: 64 << 10}).Convert(context.Background(), []byte("<p>x</p>"))
	elapsed := time.Since(start)
	wantToolErr(t, err, messages.ToolOutputTooLarge)
	if elapsed > 5*time.Second {
		t.Fatalf("elapsed %v", elapsed)
	}
	waitGone(t, readPID(t, pidFile))
}

func TestConvertOutputAtLimit(t *testing.T) {
	p := fake(t, "head -c 1000 /dev/zero | tr '\\0' 'b'")
	out, err := New(Config{Path: p, MaxOutputBytes: 1000}).Convert(context.Background(), nil)
	if err != nil || len(out) != 1000 {
		t.Fatalf("len %d err %v", len(out), err)
	}
	_, err = New(Config{Path: p, MaxOutputBytes: 999}).Convert(context.Background(), nil)
	wantToolErr(t, err, messages.ToolOutputTooLarge)
}

func TestConvertHugeStderr(t *testing.T) {
	failing := fake(t, "head -c 10000000 /dev/zero | tr '\\0' 'E' >&2\nexit 1")
	start := time.Now()
	_, err := New(Config{Path: failing, Timeout: 20 * time.Second}).Convert(context.Background(), []byte("<p>x</p>"))
	te := wantToolErr(t, err, messages.ToolConversionFailed)
	if strings.Contains(te.Error(), "EEE") || len(te.Error()) > 200 {
		t.Fatalf("error carries stderr: %q", te.Error())
	}
	if el := time.Since(start); el > 10*time.Second {
		t.Fatalf("elapsed %v", el)
	}
	// Stderr is drained, so a noisy but successful run still works.
	noisy := fake(t, "head -c 10000000 /dev/zero | tr '\\0' 'E' >&2\necho converted")
	out, err := New(Config{Path: noisy, Timeout: 20 * time.Second}).Convert(context.Background(), nil)
	if err != nil || out != "converted" {
		t.Fatalf("%q %v", out, err)
	}
}

func TestCapWriterStderrBound(t *testing.T) {
	w := &capWriter{limit: 10}
	for range 5 {
		if n, err := w.Write([]byte("abcdefgh")); n != 8 || err != nil {
			t.Fatalf("%d %v", n, err)
		}
	}
	if w.buf.String() != "abcdefghab" || w.total != 40 || !w.overflow {
		t.Fatalf("%q %d", w.buf.String(), w.total)
	}
}

func TestClean(t *testing.T) {
	in := "# T\r\n\r\nline\x00 one\x1b[31m\x7f\u0085\tend\rnext\n\n\n\n\n\npara\n   \n\t\n \n \nlast\xff\n\n"
	want := "# T\n\nline one[31m\tend\nnext\n\n\npara\n\n\nlast\uFFFD"
	got := Clean([]byte(in))
	if got != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
	if !utf8.ValidString(got) {
		t.Fatal("invalid UTF-8")
	}
	if Clean(nil) != "" || Clean([]byte("\n\n")) != "" {
		t.Fatal("empty input")
	}
}

func TestConvertCleansOutput(t *testing.T) {
	p := fake(t, `printf 'a\r\nb\001c\n\n\n\n\n\nd\n'`)
	out, err := New(Config{Path: p}).Convert(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if out != "a\nbc\n\n\nd" {
		t.Fatalf("got %q", out)
	}
}
