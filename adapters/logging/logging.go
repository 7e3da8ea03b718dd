package logging

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
)

// Redacted replaces a secret in log output.
const Redacted = "[REDACTED]"

// minSecretLen keeps very short values (which would shred ordinary text)
// out of the redactor; no real token is this short.
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
}

// NewRedactor wraps w. Each secret is matched as written and in its
// JSON-escaped form.
func NewRedactor(w io.Writer, secrets []string) *Redactor {
	r := &Redactor{w: w}
	seen := map[string]bool{}
	for _, s := range secrets {
		if len(s) < minSecretLen {
			continue
		}
		forms := []string{s}
		if b, err := json.Marshal(s); err == nil {
			forms = append(forms, string(b[1:len(b)-1]))
		}
		for _, f := range forms {
			if !seen[f] {
				seen[f] = true
				r.patterns = append(r.patterns, []byte(f))
			}
		}
	}
	return r
}

// Redact returns s with every secret replaced by [Redacted], for text
// that is kept or shown before it reaches a log (a server's error
// message).
func (r *Redactor) Redact(s string) string {
	for _, pat := range r.patterns {
		s = strings.ReplaceAll(s, string(pat), Redacted)
	}
	return s
}

// Write implements io.Writer. It reports len(p) on success so callers do
// not see a short write when redaction changed the length.
func (r *Redactor) Write(p []byte) (int, error) {
	out := p
	for _, pat := range r.patterns {
		if bytes.Contains(out, pat) {
			out = bytes.ReplaceAll(out, pat, []byte(Redacted))
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, err := r.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}
