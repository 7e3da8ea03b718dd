// Package config defines Lisa's configuration: the TOML file format, its
// defaults, its validation rules and the resolution of the secrets and
// files it refers to.
//
// # Steps
//
// Turning a file into something the daemon can run with takes four steps,
// kept apart so that each can be tested on its own:
//
//  1. [Load] reads the TOML file over [Default] and applies environment
//     overrides. It reports unknown keys (a typo such as homserver_url is
//     an error, not a silently ignored line) and values of the wrong type.
//     Load is the only code that uses koanf.
//  2. [Config.WithDefaults] fills derived defaults; Load already applies it.
//  3. [Config.Validate] is pure: it checks syntax, ranges, hard ceilings and
//     the consistency between keys, and lists every problem with its key.
//  4. [Resolve] is the impure step: it reads the env: references and the
//     persona file, and makes relative paths absolute against the
//     configuration file's directory.
//
// [LoadAndResolve] runs all of them and reports every problem at once; it
// is what `lisa check-config` and `lisa run` use.
//
// # Secrets
//
// The secret keys matrix.access_token, llm.api_key and search.api_key take
// only references of the form "env:NAME", where NAME matches
// [A-Za-z_][A-Za-z0-9_]*; the secret itself lives in that environment
// variable. A literal value is rejected so it is less likely to be
// committed with the file, and the rejection never repeats the value.
// llm.api_key and search.api_key may be left empty for services that need
// no key; matrix.access_token is required.
//
// [SecretRef] (configured text) and [Secret] (resolved value) print as a
// redaction marker through fmt, slog and JSON. [Resolved.Secrets] lists the
// values for the log redaction filter.
//
// # Environment overrides
//
// Any key can be overridden by an environment variable named "LISA_", the
// section, "__", and the key, all upper case: LISA_LLM__MODEL sets
// llm.model and LISA_RUNTIME__LOG_LEVEL sets runtime.log_level. Lists take
// a JSON array or a comma-separated string. Overrides apply after the file.
// They are distinct from secret variables such as LISA_MATRIX_ACCESS_TOKEN
// (single underscore), which are only read through env: references.
//
// # Optional web search
//
// search.endpoint may be empty; web_search is then not offered to the
// model, while the page download and HTML conversion tools remain.
//
// # Limits
//
// Every numeric limit must be positive and at most a hard ceiling kept in
// code (the Max* and Min* constants), so a configuration can never ask for
// an unlimited download, a zero timeout or an unbounded tool loop.
package config
