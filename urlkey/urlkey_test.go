package urlkey

import (
	"net/url"
	"testing"
)

func TestOf(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"https://Example.ORG./a/b/", "https://example.org/a/b"},
		{"HTTPS://example.org:443", "https://example.org"},
		{"http://example.org:80/", "http://example.org"},
		{"http://example.org:8080/x", "http://example.org:8080/x"},
		{"https://example.org/%7euser/%2f?q=%e2%82%ac&a=1#frag", "https://example.org/~user/%2F?q=%E2%82%AC&a=1"},
		{"https://example.org/?", "https://example.org"},
		{"https://user:pw@example.org/p", "https://example.org/p"},
		{"https://[2001:DB8::1]:443/p", "https://[2001:db8::1]/p"},
		{"https://example.org/Path?b=2&a=1", "https://example.org/Path?b=2&a=1"}, // case and order kept
		{"https://example.org/a b", "https://example.org/a%20b"},
	} {
		u, err := url.Parse(c.in)
		if err != nil {
			t.Fatalf("%s: %v", c.in, err)
		}
		if got := Of(u); got != c.want {
			t.Errorf("Of(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestEscapes(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"%41%2d%5F%7e", "A-_~"},
		{"%2f%3A", "%2F%3A"},
		{"%zz%4", "%zz%4"}, // not an escape: kept as it is
		{"é\x01", "%C3%A9%01"},
	} {
		if got := Escapes(c.in); got != c.want {
			t.Errorf("Escapes(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
