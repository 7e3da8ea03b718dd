package logging

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// Redacted replaces a secret in log output.
const Redacted = "[REDACTED]"

// minSecretLen: a secret at least this long is redacted wherever it
// appears; a shorter one (an LLM key "x" for a server that ignores keys)
// only where it stands alone, not inside a longer word or number, so
// that it neither shreds ordinary text nor shows itself by the gaps it
// would leave there ("lev[REDACTED]l" gives "e" away).
const minSecretLen = 6

// ParseLevel maps a configured level name to a slog level.
func ParseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "debug":
		return slog.LevelDebug, nil
	case "info", "":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("logging: unknown level %q (want debug, info, warn or error)", s)
}

// New returns a JSON logger writing to w at level, with every value in
// secrets redacted from the output.
func New(w io.Writer, level slog.Level, secrets []string) *slog.Logger {
	return slog.New(slog.NewJSONHandler(NewRedactor(w, secrets), &slog.HandlerOptions{Level: level}))
}

// Redactor is an io.Writer that replaces secret values before writing. The
// JSON handler writes one whole record per Write, so a secret is never
// split across calls.
type Redactor struct {
	mu       sync.Mutex
	w        io.Writer
	patterns [][]byte
	// short are the patterns under minSecretLen, replaced only where no
	// letter or digit touches them.
	short [][]byte
}

// NewRedactor wraps w. Each secret is matched as written and in its
// JSON-escaped form.
func NewRedactor(w io.Writer, secrets []string) *Redactor {
	r := &Redactor{w: w}
	seen := map[string]bool{}
	for _, s := range secrets {
		if s == "" {
			continue
		}
		forms := []string{s}
		if b, err := json.Marshal(s); err == nil {
			forms = append(forms, string(b[1:len(b)-1]))
		}
		for _, f := range forms {
			switch {
			case seen[f]:
			case len(f) < minSecretLen:
				r.short = append(r.short, []byte(f))
			default:
				r.patterns = append(r.patterns, []byte(f))
			}
			seen[f] = true
		}
	}
	return r
}

// Redact returns s with every secret replaced by [Redacted], for text
// that is kept or shown before it reaches a log (a server's error
// message).
func (r *Redactor) Redact(s string) string {
	return string(r.redact([]byte(s)))
}

// redact replaces every secret in p, which it may return unchanged.
func (r *Redactor) redact(p []byte) []byte {
	out := p
	for _, pat := range r.patterns {
		if bytes.Contains(out, pat) {
			out = bytes.ReplaceAll(out, pat, []byte(Redacted))
		}
	}
	for _, pat := range r.short {
		out = replaceAlone(out, pat)
	}
	return out
}

// replaceAlone replaces pat in p where neither neighbour is a letter or
// digit.
func replaceAlone(p, pat []byte) []byte {
	if !bytes.Contains(p, pat) {
		return p
	}
	var out []byte
	last := 0
	for i := 0; i+len(pat) <= len(p); {
		j := bytes.Index(p[i:], pat)
		if j < 0 {
			break
		}
		at := i + j
		end := at + len(pat)
		before, _ := utf8.DecodeLastRune(p[:at])
		after, _ := utf8.DecodeRune(p[end:])
		if !wordRune(before) && !wordRune(after) {
			out = append(append(out, p[last:at]...), Redacted...)
			last = end
			i = end
			continue
		}
		i = at + 1
	}
	if out == nil {
		return p
	}
	return append(out, p[last:]...)
}

// wordRune reports whether c is part of a word (a letter or digit).
func wordRune(c rune) bool {
	return c != utf8.RuneError && (unicode.IsLetter(c) || unicode.IsDigit(c))
}

// Write implements io.Writer. It reports len(p) on success so callers do
// not see a short write when redaction changed the length.
func (r *Redactor) Write(p []byte) (int, error) {
	out := r.redact(p)
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, err := r.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}
