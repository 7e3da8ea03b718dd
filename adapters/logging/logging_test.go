package logging

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

func TestSecretsNeverReachOutput(t *testing.T) {
	const token = "syt_CANARY_abc123\"quoted\\slash"
	const key = "sk-CANARY-0987654321"
	var buf bytes.Buffer
	log := New(&buf, slog.LevelDebug, []string{token, key, "abc"})
	log.Info("direct "+key, "token", token)
	log.Error("wrapped", "err", fmt.Errorf("request failed: %w", errors.New("bearer "+key)))
	log.With("nested", map[string]string{"k": token}).Warn("group")
	log.Debug("short secret inside a word stays", "v", "abcdef")
	out := buf.String()
	for _, s := range []string{"CANARY"} {
		if strings.Contains(out, s) {
			t.Fatalf("secret leaked into log output:\n%s", out)
		}
	}
	if n := strings.Count(out, Redacted); n < 4 {
		t.Fatalf("expected at least 4 redactions, got %d:\n%s", n, out)
	}
	if !strings.Contains(out, `"v":"abcdef"`) {
		t.Fatalf("a secret shorter than %d bytes inside a longer word must stay:\n%s", minSecretLen, out)
	}
	if lines := strings.Count(out, "\n"); lines != 4 {
		t.Fatalf("want 4 JSON lines, got %d", lines)
	}
}

func TestParseLevel(t *testing.T) {
	cases := []struct {
		in      string
		want    slog.Level
		wantErr bool
	}{
		{"debug", slog.LevelDebug, false},
		{"INFO", slog.LevelInfo, false},
		{" warn ", slog.LevelWarn, false},
		{"error", slog.LevelError, false},
		{"", slog.LevelInfo, false},
		{"verbose", 0, true},
	}
	for _, c := range cases {
		got, err := ParseLevel(c.in)
		if (err != nil) != c.wantErr || (!c.wantErr && got != c.want) {
			t.Errorf("ParseLevel(%q) = %v, %v", c.in, got, err)
		}
	}
}

func TestLevelFilters(t *testing.T) {
	var buf bytes.Buffer
	log := New(&buf, slog.LevelWarn, nil)
	log.Info("hidden")
	log.Warn("shown")
	if strings.Contains(buf.String(), "hidden") || !strings.Contains(buf.String(), "shown") {
		t.Fatalf("level filter wrong: %s", buf.String())
	}
}

// TestRedactText: the redactor replaces every secret in a text, in the
// forms it matches in output, and leaves short values alone.
func TestRedactText(t *testing.T) {
	r := NewRedactor(nil, []string{"sk-CANARY-0987654321", `tok"en-CANARY`, "abc"})
	cases := []struct{ in, want string }{
		{"Incorrect API key provided: sk-CANARY-0987654321.", "Incorrect API key provided: " + Redacted + "."},
		{`both sk-CANARY-0987654321 and tok"en-CANARY, escaped tok\"en-CANARY`, "both " + Redacted + " and " + Redacted + ", escaped " + Redacted},
		{"abc is redacted, abcd stays", Redacted + " is redacted, abcd stays"},
		{"", ""},
	}
	for _, c := range cases {
		if got := r.Redact(c.in); got != c.want {
			t.Errorf("Redact(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestShortSecretsAreRedacted (#39 item 7): a secret of any length is
// redacted where it stands alone (a key "x", a token "1234"), as written
// and JSON-escaped, but not inside a longer word or number.
func TestShortSecretsAreRedacted(t *testing.T) {
	var buf bytes.Buffer
	log := New(&buf, slog.LevelDebug, []string{"x", "1234", `a"b`})
	log.Info("llm refused", "server_message", "Incorrect API key provided: x.", "key", "x", "pin", "1234", "q", `a"b`)
	log.Info("unrelated", "words", "index x-ray", "n", 123456, "level_text", "expected")
	out := buf.String()
	first, second, _ := strings.Cut(out, "\n")
	if strings.Contains(first, `"x"`) || strings.Contains(first, "1234") || strings.Contains(first, `provided: x.`) || strings.Contains(first, `a\"b`) {
		t.Errorf("a short secret reached the log:\n%s", first)
	}
	if n := strings.Count(first, Redacted); n != 4 {
		t.Errorf("%d redactions in %s, want 4", n, first)
	}
	for _, s := range []string{`"index [REDACTED]-ray"`, `"n":123456`, `"level_text":"expected"`} {
		if !strings.Contains(second, s) {
			t.Errorf("want %s in %s", s, second)
		}
	}
	r := NewRedactor(nil, []string{"ab"})
	if got := r.Redact("ab, cab, abc, (ab)"); got != Redacted+", cab, abc, ("+Redacted+")" {
		t.Errorf("Redact = %q", got)
	}
}
