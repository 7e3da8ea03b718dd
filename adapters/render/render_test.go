package render

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestHTMLIsSanitized(t *testing.T) {
	r := New()
	cases := []struct {
		name, in      string
		want, notWant []string
	}{
		{"emphasis", "**bold** and `code`", []string{"<strong>bold</strong>", "<code>code</code>"}, nil},
		{"raw html escaped", "<script>alert(1)</script> hi", nil, []string{"<script", "alert(1)</script>"}},
		{"javascript link dropped", "[x](javascript:alert(1))", nil, []string{"javascript:"}},
		{"https link kept", "[site](https://example.org/a)", []string{`href="https://example.org/a"`}, nil},
		{"matrix link kept", "[room](matrix:r/lisa:example.org)", []string{`href="matrix:r/lisa:example.org"`}, nil},
		{"image removed", "![x](https://example.org/x.png)", nil, []string{"<img"}},
		{"code block language", "```go\nfmt.Println()\n```", []string{`class="language-go"`}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := r.HTML(c.in)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range c.want {
				if !strings.Contains(got, w) {
					t.Errorf("HTML(%q) = %q, missing %q", c.in, got, w)
				}
			}
			for _, w := range c.notWant {
				if strings.Contains(got, w) {
					t.Errorf("HTML(%q) = %q, contains %q", c.in, got, w)
				}
			}
		})
	}
}

func TestReplyContent(t *testing.T) {
	b, err := New().Reply("Hello **there**\n\n- one\n- two", "$inv")
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	rel := c["m.relates_to"].(map[string]any)["m.in_reply_to"].(map[string]any)["event_id"]
	if rel != "$inv" || c[InvocationKey] != "$inv" || c["msgtype"] != "m.text" || c["format"] != "org.matrix.custom.html" {
		t.Fatalf("content = %s", b)
	}
	if body := c["body"].(string); body != "Hello there\n\n- one\n- two" {
		t.Fatalf("plain body = %q", body)
	}
	if _, err := New().Reply("   ", "$inv"); err == nil {
		t.Fatal("empty reply accepted")
	}
	// Deterministic: the same input gives byte-identical content.
	again, _ := New().Reply("Hello **there**\n\n- one\n- two", "$inv")
	if string(again) != string(b) {
		t.Fatal("rendering is not deterministic")
	}
}
