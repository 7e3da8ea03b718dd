// Package logging builds Lisa's log/slog logger: JSON lines on a writer, a
// level from configuration, and a last line of defence that replaces every
// configured secret value in the output with [REDACTED], whatever code path
// tried to log it.
package logging
