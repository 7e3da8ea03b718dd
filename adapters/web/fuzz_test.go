package web

import (
	"strings"
	"testing"
)

// FuzzValidateURL: validation never panics, and whatever it accepts is an
// absolute http(s) URL with a host and no user information.
func FuzzValidateURL(f *testing.F) {
	for _, seed := range []string{
		"https://example.org/a?b=c#d", "http://[::1]:8080/", "file:///etc/passwd", "https://user:pw@example.org/",
		"http://127.1/", "https://exa mple.org/", "javascript:alert(1)", "HTTPS://EXAMPLE.ORG", "https://xn--bcher-kva.example/",
		"https://bücher.example/", "http://0x7f.0.0.1/", "http://example.org:99999/", "//example.org/x", "",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := ValidateURL(raw)
		if err != nil {
			return
		}
		if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || strings.ContainsAny(u.String(), " \t\n") {
			t.Fatalf("accepted %q as %q", raw, u.String())
		}
	})
}
