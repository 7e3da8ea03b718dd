package config

import (
	"strings"
	"testing"
)

func TestUserIDSyntax(t *testing.T) {
	valid := []string{
		"@lisa:example.org",
		"@l.i_s=a-/+9:example.org",
		"@lisa:example.org:8448",
		"@lisa:localhost",
		"@lisa:127.0.0.1:8008",
		"@lisa:[::1]",
		"@lisa:[2001:db8::1]:8448",
		"@lisa:xn--bcher-kva.example",
	}
	invalid := []string{
		"",
		"lisa:example.org",
		"@lisa",
		"@:example.org",
		"@Lisa:example.org",
		"@li sa:example.org",
		"@lisa!:example.org",
		"@lisä:example.org",
		"@lisa:",
		"@lisa:exa mple.org",
		"@lisa:example..org",
		"@lisa:.example.org",
		"@lisa:example.org:",
		"@lisa:example.org:0",
		"@lisa:example.org:65536",
		"@lisa:example.org:123456",
		"@lisa:example.org:80a",
		"@lisa:::1",
		"@lisa:[::1",
		"@lisa:[1.2.3.4]",
		"@lisa:[fe80::1%eth0]",
		"@lisa:[::1]8448",
		"@lisa:" + strings.Repeat("a", MaxMatrixIDBytes),
	}
	for _, id := range valid {
		if msg := userIDProblem(id); msg != "" {
			t.Errorf("userIDProblem(%q) = %q, want valid", id, msg)
		}
	}
	for _, id := range invalid {
		if userIDProblem(id) == "" {
			t.Errorf("userIDProblem(%q) accepted an invalid ID", id)
		}
	}
}

func TestRoomIDSyntax(t *testing.T) {
	valid := []string{
		"!abc:example.org",
		"!AbC123-_.=+/~:example.org:8448",
		"!abc:[::1]:8008",
		"!abc:localhost",
	}
	invalid := map[string]string{
		"":                   "empty",
		"#room:example.org":  "alias",
		"room:example.org":   "!opaque:server",
		"@user:example.org":  "!opaque:server",
		"$event:example.org": "!opaque:server",
		"!abc":               "missing",
		"!:example.org":      "empty opaque",
		"!a b:example.org":   "whitespace",
		"!a\x00b:example":    "control",
		"!abc:bad_host":      "server name",
		"!abc:" + strings.Repeat("a", MaxMatrixIDBytes): "longer",
	}
	for _, id := range valid {
		if msg := roomIDProblem(id); msg != "" {
			t.Errorf("roomIDProblem(%q) = %q, want valid", id, msg)
		}
	}
	for id, want := range invalid {
		msg := roomIDProblem(id)
		if !strings.Contains(msg, want) {
			t.Errorf("roomIDProblem(%q) = %q, want it to mention %q", id, msg, want)
		}
	}
}

func TestServerNameProblemsDoNotEchoInput(t *testing.T) {
	for _, s := range []string{"secret_host", "[zz]", "a:b:c", "host:99999"} {
		if msg := serverNameProblem(s); msg == "" || strings.Contains(msg, s) {
			t.Errorf("serverNameProblem(%q) = %q", s, msg)
		}
	}
}
