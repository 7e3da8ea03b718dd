package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"unicode"
	"unicode/utf8"
)

// Resolved is a validated configuration together with everything it
// refers to outside itself: the secret values and the persona text. Its
// paths are absolute. Build it with [Resolve] or [LoadAndResolve].
type Resolved struct {
	// Config is the validated configuration with persona.path,
	// runtime.data_dir and runtime.admin_socket made absolute.
	Config Config
	// Persona is the persona prompt, with surrounding whitespace trimmed.
	// It is operator prose, not a secret, but it must not be logged.
	Persona string
	// MatrixAccessToken is the value behind matrix.access_token.
	MatrixAccessToken Secret
	// LLMAPIKey is the value behind llm.api_key; zero when not configured.
	LLMAPIKey Secret
	// SearchAPIKey is the value behind search.api_key; zero when not
	// configured.
	SearchAPIKey Secret
	// StatusToken is the value behind runtime.status_token; zero when not
	// configured.
	StatusToken Secret
}

// Secrets returns every non-empty secret value, for the log redaction
// filter. Handle the result with the same care as the secrets themselves.
func (r Resolved) Secrets() []string {
	var out []string
	for _, s := range []Secret{r.MatrixAccessToken, r.LLMAPIKey, r.SearchAPIKey, r.StatusToken} {
		if !s.IsZero() {
			out = append(out, s.Reveal())
		}
	}
	return out
}

// LogValue summarises the configuration for logs without secrets or
// persona text.
func (r Resolved) LogValue() slog.Value {
	c := r.Config
	return slog.GroupValue(
		slog.String("homeserver", c.Matrix.HomeserverURL),
		slog.String("user_id", c.Matrix.UserID),
		slog.Int("rooms", len(c.Matrix.AllowedRoomIDs)),
		slog.String("model", c.LLM.Model),
		slog.Bool("web_search", c.Search.Enabled()),
		slog.Int("persona_bytes", len(r.Persona)),
		slog.String("data_dir", c.Runtime.DataDir),
	)
}

// LoadAndResolve loads the file at path, validates it and resolves it
// against env and the filesystem, reporting every problem found by any of
// these steps together. The error is a [*SyntaxError] or a read error when
// the file itself cannot be used, and [Problems] otherwise. Relative paths
// in the file are resolved against the file's directory.
func LoadAndResolve(path string, env LookupEnv) (Resolved, error) {
	cfg, err := Load(path, env)
	var ps Problems
	if err != nil && !errors.As(err, &ps) {
		return Resolved{}, err
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return Resolved{}, fmt.Errorf("config: locating %s: %w", path, err)
	}
	r, err := Resolve(cfg, filepath.Dir(abs), env)
	var more Problems
	if err != nil && !errors.As(err, &more) {
		return Resolved{}, err
	}
	if ps = ps.Merge(more.without(ps)); len(ps) > 0 {
		return Resolved{}, ps.sorted()
	}
	return r, nil
}

// Resolve validates cfg and then checks it against the world: every env:
// reference must name a set, non-empty variable of env, the persona file
// must be a readable regular file of at most [MaxPersonaBytes] bytes of
// non-blank UTF-8 text, and runtime.data_dir must be a directory or be
// creatable in an existing one. Relative paths are resolved against
// baseDir, normally the configuration file's directory. A nil env has no
// variables. Nothing is created or written.
//
// The error is [Problems] listing every validation and resolution problem.
// Problems name keys and variable names, never secret values.
func Resolve(cfg Config, baseDir string, env LookupEnv) (Resolved, error) {
	cfg = cfg.WithDefaults()
	var ps Problems
	if err := cfg.Validate(); err != nil {
		if !errors.As(err, &ps) {
			return Resolved{}, err
		}
	}
	if !filepath.IsAbs(baseDir) {
		abs, err := filepath.Abs(baseDir)
		if err != nil {
			return Resolved{}, fmt.Errorf("config: locating %s: %w", baseDir, err)
		}
		baseDir = abs
	}
	r := Resolved{Config: cfg}
	var found Problems
	r.MatrixAccessToken = resolveSecret(&found, "matrix.access_token", cfg.Matrix.AccessToken, true, env)
	r.LLMAPIKey = resolveSecret(&found, "llm.api_key", cfg.LLM.APIKey, false, env)
	r.SearchAPIKey = resolveSecret(&found, "search.api_key", cfg.Search.APIKey, false, env)
	r.StatusToken = resolveSecret(&found, "runtime.status_token", cfg.Runtime.StatusToken, cfg.Runtime.StatusAllowRemote && cfg.Runtime.StatusListen != "", env)
	if !r.StatusToken.IsZero() {
		if bits := TokenStrengthBits(r.StatusToken.Reveal()); bits < MinStatusTokenBits {
			found.add("runtime.status_token", "the value behind %s has about %.0f bits of randomness by Lisa's estimate, under the %d required (the value is not shown); "+
				"make one with: openssl rand -base64 32 | tr -d '=' (see docs/configuration.md)", cfg.Runtime.StatusToken, bits, MinStatusTokenBits)
		}
	}

	if pathProblem(cfg.Persona.Path) == "" {
		p := absJoin(baseDir, cfg.Persona.Path)
		r.Config.Persona.Path = p
		text, msg := readPersona(p)
		if msg != "" {
			found.add("persona.path", "%s", msg)
		}
		r.Persona = text
	}
	if pathProblem(cfg.Runtime.DataDir) == "" {
		dir := absJoin(baseDir, cfg.Runtime.DataDir)
		r.Config.Runtime.DataDir = dir
		if msg := dataDirProblem(dir); msg != "" {
			found.add("runtime.data_dir", "%s", msg)
		}
		if socketPathProblem(cfg.Runtime.AdminSocket) == "" {
			sock := absJoin(baseDir, cfg.Runtime.AdminSocket)
			r.Config.Runtime.AdminSocket = sock
			if msg := adminSocketProblem(sock, dir); msg != "" {
				found.add("runtime.admin_socket", "%s", msg)
			}
		}
	}
	if ps = ps.Merge(found); len(ps) > 0 {
		return Resolved{}, ps.sorted()
	}
	return r, nil
}

// resolveSecret looks up one secret reference. Problems name the key and
// the variable, never the value.
func resolveSecret(ps *Problems, key string, ref SecretRef, required bool, env LookupEnv) Secret {
	if msg := secretRefProblem(ref, required); msg != "" {
		ps.add(key, "%s", msg)
		return Secret{}
	}
	name, ok := ref.EnvName()
	if !ok {
		return Secret{} // empty and optional
	}
	var value string
	var set bool
	if env != nil {
		value, set = env(name)
	}
	switch {
	case !set:
		ps.add(key, "refers to the environment variable %s, which is not set", name)
	case value == "":
		ps.add(key, "refers to the environment variable %s, which is empty", name)
	case strings.ContainsFunc(value, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }):
		ps.add(key, "refers to the environment variable %s, whose value contains whitespace or control characters (a trailing newline?); the value is not shown", name)
	default:
		return NewSecret(value)
	}
	return Secret{}
}

// readPersona reads and checks the persona file at the absolute path p.
func readPersona(p string) (string, string) {
	info, err := os.Stat(p) // follows symlinks: a link to a regular file is fine
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", fmt.Sprintf("the persona file %s does not exist", p)
	case err != nil:
		return "", fmt.Sprintf("the persona file cannot be inspected: %v", err)
	case info.IsDir():
		return "", fmt.Sprintf("%s is a directory, not a persona file", p)
	case !info.Mode().IsRegular():
		return "", fmt.Sprintf("%s is not a regular file", p)
	case info.Size() > MaxPersonaBytes:
		return "", fmt.Sprintf("the persona file %s has %d bytes, more than the limit of %d", p, info.Size(), MaxPersonaBytes)
	}
	// O_NONBLOCK keeps a file swapped for a FIFO since the Stat from
	// blocking the open; the Stat of the open file settles what it is.
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return "", fmt.Sprintf("the persona file cannot be opened: %v", err)
	}
	defer f.Close()
	if info, err := f.Stat(); err != nil || !info.Mode().IsRegular() {
		return "", fmt.Sprintf("%s is not a regular file", p)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxPersonaBytes+1))
	switch {
	case err != nil:
		return "", fmt.Sprintf("the persona file cannot be read: %v", err)
	case len(data) > MaxPersonaBytes:
		return "", fmt.Sprintf("the persona file %s has more than the limit of %d bytes", p, MaxPersonaBytes)
	case !utf8.Valid(data):
		return "", fmt.Sprintf("the persona file %s is not valid UTF-8 text", p)
	case bytes.IndexByte(data, 0) >= 0:
		return "", fmt.Sprintf("the persona file %s contains NUL bytes", p)
	}
	text := strings.TrimSpace(string(data))
	if text == "" {
		return "", fmt.Sprintf("the persona file %s is empty", p)
	}
	return text, ""
}

// dataDirProblem checks that dir is a directory or can be created: it
// does not exist yet but its parent directory does. Nothing is created.
func dataDirProblem(dir string) string {
	info, err := os.Stat(dir)
	switch {
	case err == nil && info.IsDir():
		return ""
	case err == nil:
		return fmt.Sprintf("%s exists but is not a directory", dir)
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Sprintf("cannot be inspected: %v", err)
	}
	parent := filepath.Dir(dir)
	if info, err := os.Stat(parent); err != nil || !info.IsDir() {
		return fmt.Sprintf("%s does not exist and neither does its parent directory %s, so it cannot be created", dir, parent)
	}
	return ""
}

// adminSocketProblem checks the absolute admin socket path: short enough
// to bind, not occupied by something other than a (stale) socket, and in a
// directory that exists or is dataDir (created at start-up).
func adminSocketProblem(sock, dataDir string) string {
	if len(sock) > MaxUnixSocketPathBytes {
		return fmt.Sprintf("resolves to %s, which is %d bytes long, but a Unix socket path can have at most %d bytes; choose a shorter path", sock, len(sock), MaxUnixSocketPathBytes)
	}
	if info, err := os.Lstat(sock); err == nil && info.Mode().Type() != fs.ModeSocket {
		return fmt.Sprintf("%s exists and is not a socket", sock)
	}
	parent := filepath.Dir(sock)
	if parent == dataDir {
		return ""
	}
	if info, err := os.Stat(parent); err != nil || !info.IsDir() {
		return fmt.Sprintf("the directory %s for the socket does not exist", parent)
	}
	return ""
}

// absJoin resolves p against the absolute directory base.
func absJoin(base, p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(base, p)
}
