package config

import (
	"fmt"
	"log/slog"
	"strings"
)

// EnvPrefix introduces a secret reference: "env:NAME" names the environment
// variable NAME that holds the secret.
const EnvPrefix = "env:"

// redacted is what every formatting path prints instead of a secret.
const redacted = "[REDACTED]"

// SecretRef is the configured text of a secret field. The only accepted
// form is "env:NAME"; anything else is treated as a literal secret that was
// pasted into the file by mistake, and Validate rejects it.
//
// Because the text may be such a literal, SecretRef never prints it: fmt
// (all verbs), slog, JSON and text marshalling show the reference when it
// is a well-formed env: reference and a redaction marker otherwise. The
// text lives behind a pointer, so even a struct printed through unexported
// fields shows an address rather than the text. The zero value is an empty
// (unset) reference.
type SecretRef struct {
	text *string
}

// NewSecretRef wraps raw configuration text without checking it; Validate
// reports whether it is an acceptable reference.
func NewSecretRef(raw string) SecretRef {
	if raw == "" {
		return SecretRef{}
	}
	return SecretRef{text: &raw}
}

// EnvRef returns the reference "env:name".
func EnvRef(name string) SecretRef { return NewSecretRef(EnvPrefix + name) }

// raw returns the configured text. It must never reach output.
func (r SecretRef) raw() string {
	if r.text == nil {
		return ""
	}
	return *r.text
}

// IsZero reports whether the reference is empty.
func (r SecretRef) IsZero() bool { return r.raw() == "" }

// EnvName returns the variable name of a well-formed "env:NAME" reference.
// ok is false for an empty reference, a literal, or a malformed name.
func (r SecretRef) EnvName() (name string, ok bool) {
	name, found := strings.CutPrefix(r.raw(), EnvPrefix)
	if !found || !validEnvName(name) {
		return "", false
	}
	return name, true
}

// String returns "env:NAME" for a well-formed reference, "" for an empty
// one and a redaction marker for anything else.
func (r SecretRef) String() string {
	if r.IsZero() {
		return ""
	}
	if name, ok := r.EnvName(); ok {
		return EnvPrefix + name
	}
	return redacted
}

// GoString is like String, quoted, so %#v output stays readable.
func (r SecretRef) GoString() string { return fmt.Sprintf("config.SecretRef(%q)", r.String()) }

// Format prints the String form for every fmt verb, so no verb (not even a
// mismatched one such as %d or %x) can print the raw text.
func (r SecretRef) Format(f fmt.State, verb rune) {
	if verb == 'v' && f.Flag('#') {
		_, _ = f.Write([]byte(r.GoString()))
		return
	}
	_, _ = f.Write([]byte(r.String()))
}

// LogValue implements slog.LogValuer with the String form.
func (r SecretRef) LogValue() slog.Value { return slog.StringValue(r.String()) }

// MarshalText implements encoding.TextMarshaler with the String form, so
// JSON and other encoders never see the raw text.
func (r SecretRef) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler; it is how [Load] fills
// the field. It keeps the text unchecked.
func (r *SecretRef) UnmarshalText(b []byte) error {
	*r = NewSecretRef(string(b))
	return nil
}

// validEnvName reports whether s matches [A-Za-z_][A-Za-z0-9_]*.
func validEnvName(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range []byte(s) {
		switch {
		case c == '_', 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case '0' <= c && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// Secret is a resolved secret value. Like [SecretRef] it never prints its
// value: fmt (all verbs), slog, JSON and text marshalling show a redaction
// marker. Call Reveal only where the value is handed to the library that
// needs it. The zero value is an absent secret.
type Secret struct {
	value *string
}

// NewSecret wraps a secret value.
func NewSecret(value string) Secret {
	if value == "" {
		return Secret{}
	}
	return Secret{value: &value}
}

// Reveal returns the secret value, or "" for an absent secret.
func (s Secret) Reveal() string {
	if s.value == nil {
		return ""
	}
	return *s.value
}

// IsZero reports whether the secret is absent.
func (s Secret) IsZero() bool { return s.value == nil }

// String returns a redaction marker, or "" for an absent secret.
func (s Secret) String() string {
	if s.IsZero() {
		return ""
	}
	return redacted
}

// GoString returns a redacted Go-syntax form.
func (s Secret) GoString() string { return fmt.Sprintf("config.Secret(%q)", s.String()) }

// Format prints the redacted form for every fmt verb.
func (s Secret) Format(f fmt.State, verb rune) {
	if verb == 'v' && f.Flag('#') {
		_, _ = f.Write([]byte(s.GoString()))
		return
	}
	_, _ = f.Write([]byte(s.String()))
}

// LogValue implements slog.LogValuer with the redacted form.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// MarshalText implements encoding.TextMarshaler with the redacted form.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// MarshalJSON implements json.Marshaler with the redacted form.
func (s Secret) MarshalJSON() ([]byte, error) { return fmt.Appendf(nil, "%q", s.String()), nil }
