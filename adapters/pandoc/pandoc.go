package pandoc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/lisabot/lisa/messages"
)

// Defaults and fixed values.
const (
	// DefaultPath is the executable looked up on PATH when Config.Path is
	// empty.
	DefaultPath = "pandoc"
	// DefaultTimeout is used when Config.Timeout is not positive.
	DefaultTimeout = 20 * time.Second
	// DefaultMaxOutputBytes is used when Config.MaxOutputBytes is not
	// positive.
	DefaultMaxOutputBytes = 2 << 20
	// DefaultMaxStderrBytes is used when Config.MaxStderrBytes is not
	// positive.
	DefaultMaxStderrBytes = 4096

	// MinMajor and MinMinor give the oldest accepted pandoc, 2.15, the first
	// release with --sandbox.
	MinMajor = 2
	MinMinor = 15

	// waitDelay bounds how long Wait keeps waiting for the output pipes
	// after the process was killed or exited.
	waitDelay = time.Second
	// maxVersionOutput bounds what Check reads from pandoc --version.
	maxVersionOutput = 64 << 10
	// maxBlankLines is the longest run of blank lines kept in the output.
	maxBlankLines = 2
)

// childPath is the PATH entry of the child's minimal environment.
const childPath = "PATH=/usr/bin:/bin"

// Config configures a [Converter]. Zero values select the defaults.
type Config struct {
	// Path is the pandoc executable. A name without a slash is looked up on
	// PATH; the default is "pandoc".
	Path string
	// Timeout bounds one run, including reading all output.
	Timeout time.Duration
	// MaxOutputBytes caps stdout; a larger output fails with
	// output_too_large and the process is killed.
	MaxOutputBytes int
	// MaxStderrBytes caps the stderr retained for diagnostics; the rest is
	// read and discarded so the child never blocks on it.
	MaxStderrBytes int
	// Logger, when set, receives one debug record per failed run with the
	// stderr length (never its content). Optional.
	Logger *slog.Logger
}

// Converter runs pandoc. It holds no per-run state and is safe for
// concurrent use.
type Converter struct {
	cfg Config
}

// New returns a converter for cfg. The executable is resolved on each run,
// so a missing pandoc shows up as a conversion_failed error (and in
// [Converter.Check]).
func New(cfg Config) *Converter {
	if cfg.Path == "" {
		cfg.Path = DefaultPath
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MaxOutputBytes <= 0 {
		cfg.MaxOutputBytes = DefaultMaxOutputBytes
	}
	if cfg.MaxStderrBytes <= 0 {
		cfg.MaxStderrBytes = DefaultMaxStderrBytes
	}
	return &Converter{cfg: cfg}
}

// convertArgs is the fixed argument list for conversions.
func convertArgs() []string {
	// +RTS -M512M -RTS caps pandoc's heap: untrusted HTML must not exhaust
	// the host's memory (pandoc's own advice for untrusted input).
	return []string{"+RTS", "-M512M", "-RTS", "--from=html", "--to=gfm", "--wrap=none", "--sandbox"}
}

func toolErr(code messages.ToolCode, retryable bool, msg string) *messages.ToolError {
	return &messages.ToolError{Code: code, Message: msg, Retryable: retryable}
}

// Check runs pandoc --version and returns the version it reports, such as
// "2.17.1.1". It fails with a conversion_failed error that says what is
// wrong when pandoc is missing, does not run, or is older than 2.15.
func (c *Converter) Check(ctx context.Context) (string, error) {
	path, err := c.resolve()
	if err != nil {
		return "", toolErr(messages.ToolConversionFailed, false,
			fmt.Sprintf("pandoc executable %q was not found or is not executable", c.cfg.Path))
	}
	out, err := c.run(ctx, path, []string{"--version"}, nil, maxVersionOutput)
	if err != nil {
		var te *messages.ToolError
		if errors.As(err, &te) {
			return "", toolErr(te.Code, te.Retryable, fmt.Sprintf("running %q --version failed: %s", path, te.Message))
		}
		return "", err
	}
	version, major, minor, ok := parseVersion(out)
	if !ok {
		return "", toolErr(messages.ToolConversionFailed, false,
			fmt.Sprintf("%q --version did not report a pandoc version", path))
	}
	if major < MinMajor || (major == MinMajor && minor < MinMinor) {
		return version, toolErr(messages.ToolConversionFailed, false,
			fmt.Sprintf("pandoc %s is too old: version %d.%d or newer is required for --sandbox", version, MinMajor, MinMinor))
	}
	return version, nil
}

// parseVersion reads "pandoc 2.17.1.1" (or "pandoc.exe 3.1") from the
// first line of pandoc --version output.
func parseVersion(out []byte) (version string, major, minor int, ok bool) {
	line, _, _ := bytes.Cut(out, []byte("\n"))
	fields := strings.Fields(string(line))
	if len(fields) < 2 || !strings.HasPrefix(strings.ToLower(fields[0]), "pandoc") {
		return "", 0, 0, false
	}
	version = fields[1]
	parts := strings.Split(version, ".")
	if len(parts) < 2 {
		return "", 0, 0, false
	}
	var err error
	if major, err = strconv.Atoi(parts[0]); err != nil {
		return "", 0, 0, false
	}
	if minor, err = strconv.Atoi(parts[1]); err != nil {
		return "", 0, 0, false
	}
	return version, major, minor, true
}

// Convert turns html into cleaned GitHub-flavoured Markdown.
func (c *Converter) Convert(ctx context.Context, html []byte) (string, error) {
	path, err := c.resolve()
	if err != nil {
		return "", toolErr(messages.ToolConversionFailed, false, "The HTML-to-Markdown converter is not available.")
	}
	out, err := c.run(ctx, path, convertArgs(), html, c.cfg.MaxOutputBytes)
	if err != nil {
		return "", err
	}
	return Clean(out), nil
}

// resolve finds the executable named by Config.Path.
func (c *Converter) resolve() (string, error) {
	path, err := exec.LookPath(c.cfg.Path)
	if err != nil {
		return "", err
	}
	return path, nil
}

// run executes path with args in a sandboxed child and returns its stdout.
func (c *Converter) run(ctx context.Context, path string, args []string, stdin []byte, maxOut int) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, toolErr(messages.ToolConversionFailed, false, "The conversion was cancelled.")
	}
	dir, err := os.MkdirTemp("", "lisa-pandoc-")
	if err != nil {
		return nil, toolErr(messages.ToolConversionFailed, true, "The converter could not prepare a working directory.")
	}
	defer os.RemoveAll(dir)

	runCtx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()

	stdout := &capWriter{limit: maxOut, onOverflow: cancel, fail: true}
	stderr := &capWriter{limit: c.cfg.MaxStderrBytes}

	cmd := exec.CommandContext(runCtx, path, args...)
	cmd.Dir = dir
	cmd.Env = []string{childPath, "HOME=" + dir, "LANG=C.UTF-8"}
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	cmd.Stdout = stdout
	cmd.Stderr = stderr
	cmd.WaitDelay = waitDelay
	isolate(cmd)

	start := time.Now()
	// With --sandbox pandoc starts no helpers; a timeout or overflow kills
	// the whole group through cmd.Cancel. The group is not killed again
	// after Wait: its number may already belong to someone else. On Linux
	// runChild also makes the kernel kill the child if the daemon dies.
	runErr := runChild(cmd)
	if runErr == nil && !stdout.overflow {
		return stdout.buf.Bytes(), nil
	}

	var te *messages.ToolError
	switch {
	case stdout.overflow:
		te = toolErr(messages.ToolOutputTooLarge, false, "The converted page exceeded the configured output-size limit.")
	case errors.Is(ctx.Err(), context.Canceled):
		te = toolErr(messages.ToolConversionFailed, false, "The conversion was cancelled.")
	case errors.Is(runCtx.Err(), context.DeadlineExceeded):
		te = toolErr(messages.ToolTimeout, false, "The conversion did not finish in time.")
	case cmd.Process == nil:
		te = toolErr(messages.ToolConversionFailed, false, "The HTML-to-Markdown converter could not be started.")
	default:
		te = toolErr(messages.ToolConversionFailed, false, "The converter could not convert this page.")
	}
	if c.cfg.Logger != nil {
		exit := -1
		if cmd.ProcessState != nil {
			exit = cmd.ProcessState.ExitCode()
		}
		c.cfg.Logger.LogAttrs(ctx, slog.LevelDebug, "pandoc run failed",
			slog.String("code", string(te.Code)),
			slog.Int("exit_code", exit),
			slog.Int64("stderr_bytes", stderr.total),
			slog.Duration("elapsed", time.Since(start)))
	}
	return nil, te
}

// capWriter keeps up to limit bytes. Past the limit it either fails (and
// calls onOverflow once) or silently discards, counting what it saw.
type capWriter struct {
	buf        bytes.Buffer
	limit      int
	fail       bool
	onOverflow func()
	overflow   bool
	total      int64
}

func (w *capWriter) Write(p []byte) (int, error) {
	w.total += int64(len(p))
	if w.overflow {
		if w.fail {
			return 0, overflowError{}
		}
		return len(p), nil
	}
	room := w.limit - w.buf.Len()
	if len(p) <= room {
		return w.buf.Write(p)
	}
	w.buf.Write(p[:room])
	w.overflow = true
	if w.fail {
		if w.onOverflow != nil {
			w.onOverflow()
		}
		return room, overflowError{}
	}
	return len(p), nil
}

// overflowError stops the stdout copy once the ceiling is crossed.
type overflowError struct{}

func (overflowError) Error() string { return "pandoc: output limit exceeded" }

// Clean post-processes converter output: invalid UTF-8 becomes U+FFFD,
// CRLF and lone CR become LF, control characters other than "\n" and "\t"
// are removed, whitespace-only lines become empty, runs of more than two
// blank lines are shortened to two, and leading and trailing blank lines
// are dropped.
func Clean(out []byte) string {
	s := strings.ToValidUTF8(string(out), "\uFFFD")
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	s = strings.Map(func(r rune) rune {
		if r == '\n' || r == '\t' {
			return r
		}
		if unicode.IsControl(r) {
			return -1
		}
		return r
	}, s)

	lines := strings.Split(s, "\n")
	kept := lines[:0]
	blank := 0
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			blank++
			if blank > maxBlankLines {
				continue
			}
			l = ""
		} else {
			blank = 0
		}
		kept = append(kept, l)
	}
	return strings.Trim(strings.Join(kept, "\n"), "\n")
}
