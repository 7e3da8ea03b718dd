package web

import (
	"errors"
	"strings"
	"testing"

	"github.com/lisabot/lisa/messages"
)

// wantCode fails the test unless err is a *messages.ToolError with code.
func wantCode(t *testing.T, err error, code messages.ToolCode) *messages.ToolError {
	t.Helper()
	var te *messages.ToolError
	if !errors.As(err, &te) {
		t.Fatalf("error = %v (%T), want *messages.ToolError %s", err, err, code)
	}
	if te.Code != code {
		t.Fatalf("code = %s (%q), want %s", te.Code, te.Message, code)
	}
	if te.Message == "" || len(te.Message) > 80 {
		t.Errorf("message %q should be short and non-empty", te.Message)
	}
	for _, leak := range []string{"http", "127.", "::", "secret", "/"} {
		if strings.Contains(te.Message, leak) && !strings.Contains(te.Message, "http and https") {
			t.Errorf("message %q leaks detail %q", te.Message, leak)
		}
	}
	return te
}

func TestValidateURLAccepts(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"http://example.com", "http://example.com"},
		{"https://example.com/a/b?q=1&r=%20x", "https://example.com/a/b?q=1&r=%20x"},
		{"HTTPS://Example.COM/Path", "https://example.com/Path"},
		{"https://example.com/page#section", "https://example.com/page"},
		{"http://example.com:8080/", "http://example.com:8080/"},
		{"http://example.com:080/", "http://example.com:80/"},
		{"http://example.com:/", "http://example.com/"},
		{"http://example.com./", "http://example.com./"},
		{"http://sub-domain.example.co.uk/", "http://sub-domain.example.co.uk/"},
		{"http://exämple.com/", "http://xn--exmple-cua.com/"},
		{"https://bücher.de/ü", "https://xn--bcher-kva.de/%C3%BC"},
		{"http://93.184.216.34/", "http://93.184.216.34/"},
		{"http://[2001:DB8:0:0::1]:443/x", "http://[2001:db8::1]:443/x"},
		{"http://[::ffff:127.0.0.1]/", "http://[::ffff:127.0.0.1]/"},
		{"http://localhost/", "http://localhost/"}, // syntax only: the address guard decides reachability
	} {
		u, err := ValidateURL(tc.in)
		if err != nil {
			t.Errorf("ValidateURL(%q) = %v", tc.in, err)
			continue
		}
		if got := u.String(); got != tc.want {
			t.Errorf("ValidateURL(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestValidateURLRejects(t *testing.T) {
	for _, in := range []string{
		"",
		"example.com",
		"/relative/path",
		"//example.com/scheme-relative",
		"file:///etc/passwd",
		"file://localhost/etc/passwd",
		"ftp://example.com/file",
		"data:text/plain,hello",
		"gopher://example.com/",
		"javascript:alert(1)",
		"mailto:a@example.com",
		"ws://example.com/",
		"http:example.com",
		"http:/example.com",
		"http://",
		"http:///path",
		"http://:80/",
		"http://user@example.com/",
		"http://user:pass@example.com/",
		"http://:pass@example.com/",
		"http://exa mple.com/",
		"http://example.com/a b",
		" http://example.com/",
		"http://example.com/\t",
		"http://example.com/\n",
		"http://example.com/\x00",
		"http://example.com/\x7f",
		"http://example.com/\u00a0",
		"http://example.com/\u2028",
		"http://example.com/%zz",
		"http://example.com/%4",
		"http://example.com/?q=%g0",
		"http://example.com/%",
		"http://example.com:0/",
		"http://example.com:65536/",
		"http://example.com:99999999999999999999/",
		"http://example.com:-1/",
		"http://example.com:http/",
		"http://exa_mple.com/",
		"http://-example.com/",
		"http://a..b/",
		"http://" + strings.Repeat("a", 64) + ".com/",
		"http://" + strings.Repeat("abcdefghi.", 26) + "com/",
		"http://xn--zz.com/",
		"http://127.1/",
		"http://0x7f.0.0.1/",
		"http://2130706433/",
		"http://010.0.0.1/",
		"http://[::1/",
		"http://[fe80::1%25eth0]/",
		"http://[example.com]/",
		"http://[1.2.3]/",
		"http://example.com/" + strings.Repeat("a", MaxURLBytes),
		"http://example.com/\xff",
	} {
		_, err := ValidateURL(in)
		if err == nil {
			t.Errorf("ValidateURL(%q) accepted", in)
			continue
		}
		wantCode(t, err, messages.ToolInvalidURL)
	}
}
