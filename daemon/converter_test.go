package daemon

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/lisabot/lisa/adapters/htmlmd"
	"github.com/lisabot/lisa/adapters/pandoc"
	"github.com/lisabot/lisa/config"
	"github.com/lisabot/lisa/testkit/need"
)

func TestNewConverterFollowsWebConverter(t *testing.T) {
	cfg := config.Default()
	if _, ok := NewConverter(cfg, nil).(*pandoc.Converter); !ok {
		t.Fatalf("default: %T, want the pandoc converter", NewConverter(cfg, nil))
	}
	cfg.Web.Converter = config.ConverterBuiltin
	conv := NewConverter(cfg, nil)
	if _, ok := conv.(*htmlmd.Converter); !ok {
		t.Fatalf("builtin: %T, want the built-in converter", conv)
	}
	md, err := conv.Convert(context.Background(), []byte(`<p>See <a href="https://example.org/x">this</a>.</p>`))
	if err != nil || md != "See [this](https://example.org/x)." {
		t.Fatalf("built-in conversion: %q %v", md, err)
	}
}

// TestNewConverterHoldsTheConfiguredBounds: the built-in converter gets
// web.max_download_bytes of input and 4 bytes per output character, as
// pandoc gets the output bound.
func TestNewConverterHoldsTheConfiguredBounds(t *testing.T) {
	cfg := config.Default()
	cfg.Web.Converter = config.ConverterBuiltin
	cfg.Web.MaxDownloadBytes = 1000
	cfg.Web.MaxToolOutputCharacters = 100
	conv := NewConverter(cfg, nil)
	if _, err := conv.Convert(context.Background(), []byte("<p>"+strings.Repeat("a", 1000))); err == nil || !strings.Contains(err.Error(), "output_too_large") {
		t.Fatalf("1,003 bytes of input: %v", err)
	}
	if md, err := conv.Convert(context.Background(), []byte("<p>"+strings.Repeat("a", 400))); err != nil || len(md) != 400 {
		t.Fatalf("400 bytes out: %d %v", len(md), err)
	}
	if _, err := conv.Convert(context.Background(), []byte("<p>"+strings.Repeat("a", 401))); err == nil || !strings.Contains(err.Error(), "output_too_large") {
		t.Fatalf("401 bytes out: %v", err)
	}
}

func TestCheckConverterWithoutPandoc(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := CheckConverter(context.Background(), config.Default())
	if err == nil {
		t.Fatal("no pandoc on PATH, yet the check passed")
	}
	msg := err.Error()
	for _, want := range []string{"web.converter: ", "not found", "install pandoc 2.15 or newer (Debian package pandoc)", `set web.converter = "builtin"`} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q: %s", want, msg)
		}
	}
	if strings.Contains(msg, "\n") {
		t.Errorf("error is more than one line: %q", msg)
	}
	cfg := config.Default()
	cfg.Web.Converter = config.ConverterBuiltin
	if v, err := CheckConverter(context.Background(), cfg); err != nil || !strings.HasPrefix(v, "built-in (html-to-markdown") {
		t.Fatalf("built-in: %q %v", v, err)
	}
}

func TestCheckConverterWithPandoc(t *testing.T) {
	need.Pandoc(t)
	v, err := CheckConverter(context.Background(), config.Default())
	if err != nil || !strings.HasPrefix(v, "pandoc 2.") && !strings.HasPrefix(v, "pandoc 3.") {
		t.Fatalf("%q %v", v, err)
	}
}

// TestRunRefusesToStartWithoutPandoc: `lisa run` with web.converter =
// "pandoc" and no pandoc stops before anything else, with one log line
// that names both fixes.
func TestRunRefusesToStartWithoutPandoc(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	res := config.Resolved{Config: config.Default()}
	res.Config.Matrix.HomeserverURL = "http://127.0.0.1:1" // never reached
	err := Run(context.Background(), res, log, RunOptions{})
	if err == nil || !strings.Contains(err.Error(), `set web.converter = "builtin"`) {
		t.Fatalf("Run = %v", err)
	}
	// The start-up line naming the build comes first; then only the
	// refusal.
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		if !strings.Contains(l, `"msg":"lisa starting"`) {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 || !strings.Contains(lines[0], "cannot start") || !strings.Contains(lines[0], "install pandoc") {
		t.Fatalf("log:\n%s", logs.String())
	}
}
