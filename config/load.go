package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/knadh/koanf/parsers/toml/v2"
	envprovider "github.com/knadh/koanf/providers/env/v2"
	"github.com/knadh/koanf/providers/file"
	"github.com/knadh/koanf/v2"
)

// LookupEnv looks up an environment variable, like os.LookupEnv. It is
// injected so tests and tools never depend on the process environment.
type LookupEnv func(name string) (value string, ok bool)

// SyntaxError reports a configuration file that is not valid TOML.
type SyntaxError struct {
	// Path is the configuration file.
	Path string
	// Line and Column locate the error, 1-based; zero when unknown.
	Line, Column int
	// Message is the parser's description. It may quote a single
	// character of the file but never a whole value.
	Message string
}

// Error returns "path:line:column: invalid TOML: message".
func (e *SyntaxError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d:%d: invalid TOML: %s", e.Path, e.Line, e.Column, e.Message)
	}
	return fmt.Sprintf("%s: invalid TOML: %s", e.Path, e.Message)
}

// Load reads the configuration at path. It starts from [Default], overlays
// the TOML file, then overlays environment overrides, and applies
// [Config.WithDefaults]. It does not call Validate.
//
// An environment override is the variable [EnvOverrideName](key) for a
// known key, for example LISA_LLM__MODEL for llm.model or
// LISA_MATRIX__SYNC_TIMEOUT_MS for matrix.sync_timeout_ms ("__" separates
// the section from the key; single underscores belong to the key). Only
// the names of known keys are looked up, so a misspelt override has no
// effect. Numbers and booleans are parsed from their usual text; a list is
// either a JSON array of strings or a comma-separated string. A nil env
// means no overrides.
//
// The error is a [*SyntaxError] for a file that is not TOML, a plain error
// for a file that cannot be read, and [Problems] for unknown keys, values
// of the wrong type and overrides that do not parse. With Problems the
// returned Config is still usable for further checks: every offending
// value has been left at its default.
func Load(path string, env LookupEnv) (Config, error) {
	fileK := koanf.New(".")
	if err := fileK.Load(file.Provider(path), toml.Parser()); err != nil {
		return Config{}, loadError(path, err)
	}
	fields := schema()
	var ps Problems
	fromFile := checkFileValues(fields, fileK.Raw(), &ps)

	k := koanf.New(".")
	if err := k.Load(mapProvider(toMap(Default())), nil); err != nil {
		return Config{}, fmt.Errorf("config: loading defaults: %w", err)
	}
	if err := k.Load(mapProvider(fromFile), nil); err != nil {
		return Config{}, fmt.Errorf("config: merging %s: %w", path, err)
	}
	if err := k.Load(envOverrides(fields, env, &ps), nil); err != nil {
		return Config{}, fmt.Errorf("config: reading environment overrides: %w", err)
	}
	var cfg Config
	if err := k.UnmarshalWithConf("", &cfg, koanf.UnmarshalConf{Tag: "koanf"}); err != nil {
		// Every value was type-checked above, so this is a bug.
		return Config{}, fmt.Errorf("config: decoding checked values: %w", err)
	}
	return cfg.WithDefaults(), ps.Err()
}

// loadError turns a read or parse failure into an error naming the file and,
// for TOML syntax errors, the line and column.
func loadError(path string, err error) error {
	var positioned interface {
		error
		Position() (row, column int)
	}
	if errors.As(err, &positioned) {
		line, col := positioned.Position()
		msg := strings.TrimPrefix(positioned.Error(), "toml: ")
		return &SyntaxError{Path: path, Line: line, Column: col, Message: msg}
	}
	var pathErr *fs.PathError
	if errors.As(err, &pathErr) {
		return fmt.Errorf("reading configuration: %w", err)
	}
	return &SyntaxError{Path: path, Message: strings.TrimPrefix(err.Error(), "toml: ")}
}

// checkFileValues walks the parsed file, reports unknown keys and values
// of the wrong type, and returns a map holding only the acceptable values,
// converted to the types Config uses.
func checkFileValues(fields []field, raw map[string]any, ps *Problems) map[string]any {
	bySection := map[string]map[string]field{}
	for _, f := range fields {
		if bySection[f.section] == nil {
			bySection[f.section] = map[string]field{}
		}
		bySection[f.section][f.name] = f
	}
	out := map[string]any{}
	for _, section := range slices.Sorted(maps.Keys(raw)) {
		known, ok := bySection[section]
		if !ok {
			ps.add(section, "is not a known section; the sections are [matrix], [llm], [persona], [context], [search], [web] and [runtime]")
			continue
		}
		table, ok := raw[section].(map[string]any)
		if !ok {
			ps.add(section, "must be a table, written as [%s], not %s", section, describeValue(raw[section]))
			continue
		}
		clean := map[string]any{}
		out[section] = clean
		for _, name := range slices.Sorted(maps.Keys(table)) {
			f, ok := known[name]
			if !ok {
				key := section + "." + name
				if s := suggest(fields, section, name); s != "" {
					ps.add(key, "is not a known key (did you mean %s?)", s)
				} else {
					ps.add(key, "is not a known key")
				}
				continue
			}
			if v, ok := checkValue(f, table[name], ps); ok {
				clean[name] = v
			}
		}
	}
	return out
}

// checkValue converts one parsed TOML value to f's type, or reports why it
// cannot. Messages name the types involved, never the value.
func checkValue(f field, v any, ps *Problems) (any, bool) {
	key := f.key()
	if s, ok := legacyValue(key, v); ok {
		return s, true
	}
	wrong := func() (any, bool) {
		ps.add(key, "must be %s, not %s", f.kind.describe(), describeValue(v))
		return nil, false
	}
	switch f.kind {
	case kindString, kindSecret:
		if s, ok := v.(string); ok {
			return s, true
		}
	case kindInt:
		switch n := v.(type) {
		case int64:
			return int(n), true
		case string:
			ps.add(key, "must be an integer, not a string (remove the quotes)")
			return nil, false
		}
	case kindFloat:
		switch n := v.(type) {
		case float64:
			return n, true
		case int64:
			return float64(n), true
		}
	case kindBool:
		if b, ok := v.(bool); ok {
			return b, true
		}
	case kindList:
		items, ok := v.([]any)
		if !ok {
			return wrong()
		}
		out := make([]string, len(items))
		good := true
		for i, item := range items {
			s, ok := item.(string)
			if !ok {
				ps.add(indexed(key, i), "must be a string, not %s", describeValue(item))
				good = false
				continue
			}
			out[i] = s
		}
		return out, good
	}
	return wrong()
}

// describeValue names the TOML type of a parsed value.
func describeValue(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case int64:
		return "an integer"
	case float64:
		return "a floating-point number"
	case bool:
		return "a boolean"
	case []any:
		return "a list"
	case map[string]any:
		return "a table"
	default:
		return "a date or time"
	}
}

// envOverrides returns a koanf provider for the overrides present in env.
// Values that do not parse are reported to ps and skipped.
func envOverrides(fields []field, env LookupEnv, ps *Problems) *envprovider.Env {
	byName := map[string]field{}
	var environ []string
	for _, f := range fields {
		name := EnvOverrideName(f.key())
		byName[name] = f
		if env == nil {
			continue
		}
		if v, ok := env(name); ok {
			environ = append(environ, name+"="+v)
		}
	}
	return envprovider.Provider(".", envprovider.Opt{
		Prefix:      EnvOverridePrefix,
		EnvironFunc: func() []string { return environ },
		TransformFunc: func(name, value string) (string, any) {
			f, ok := byName[name]
			if !ok {
				return "", nil
			}
			if s, ok := legacyValue(f.key(), value); ok {
				return f.key(), s
			}
			v, msg := parseEnvValue(f.kind, value)
			if msg != "" {
				ps.add(f.key(), "the override %s %s", name, msg)
				return "", nil
			}
			return f.key(), v
		},
	})
}

// parseEnvValue converts the text of an environment override.
func parseEnvValue(k kind, s string) (any, string) {
	switch k {
	case kindInt:
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			return nil, "must be an integer"
		}
		return n, ""
	case kindFloat:
		x, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil {
			return nil, "must be a number"
		}
		return x, ""
	case kindBool:
		b, err := strconv.ParseBool(strings.TrimSpace(s))
		if err != nil {
			return nil, "must be true or false"
		}
		return b, ""
	case kindList:
		if strings.HasPrefix(strings.TrimSpace(s), "[") {
			var list []string
			if err := json.Unmarshal([]byte(s), &list); err != nil {
				return nil, "must be a JSON array of strings or a comma-separated list"
			}
			return list, ""
		}
		if strings.TrimSpace(s) == "" {
			return []string{}, ""
		}
		parts := strings.Split(s, ",")
		for i := range parts {
			parts[i] = strings.TrimSpace(parts[i])
		}
		return parts, ""
	default:
		return s, ""
	}
}

// mapProvider is a koanf.Provider serving an in-memory nested map.
type mapProvider map[string]any

// ReadBytes is not supported; koanf calls Read when no parser is given.
func (m mapProvider) ReadBytes() ([]byte, error) {
	return nil, errors.New("config: mapProvider has no byte form")
}

// Read returns the map.
func (m mapProvider) Read() (map[string]any, error) { return m, nil }

// legacyValue maps a value an earlier version accepted for key to today's
// spelling: llm.text_tool_calls was a boolean (true ran text calls, as
// "auto" does; false is "never"), in the file or as its override.
func legacyValue(key string, v any) (string, bool) {
	if key != "llm.text_tool_calls" {
		return "", false
	}
	b, ok := v.(bool)
	if s, isString := v.(string); isString {
		switch strings.ToLower(strings.TrimSpace(s)) {
		case "true":
			b, ok = true, true
		case "false":
			b, ok = false, true
		}
	}
	switch {
	case !ok:
		return "", false
	case b:
		return TextToolCallsAuto, true
	default:
		return TextToolCallsNever, true
	}
}
