package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

// TestDemoEndToEnd runs `lisa demo --exit-after-transcript` against a real
// Dendrite and the scripted LLM, and checks the transcript the homeserver
// returns: each human question is followed by exactly one reply from Lisa.
func TestDemoEndToEnd(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	env := func(k string) (string, bool) {
		if strings.HasPrefix(k, "LISA_DEMO_") {
			return "", false // always the scripted LLM here
		}
		return os.LookupEnv(k)
	}
	code := run(ctx, []string{"demo", "--exit-after-transcript"}, strings.NewReader(""), &stdout, &stderr, env)
	if code != exitOK {
		t.Fatalf("demo exited %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	out := stdout.String()
	start := strings.Index(out, "--- transcript ---")
	if start < 0 {
		t.Fatalf("no transcript:\n%s", out)
	}
	var lines []string
	for _, l := range strings.Split(out[start:], "\n") {
		if strings.HasPrefix(l, "@") {
			lines = append(lines, l)
		}
	}
	want := []string{
		"@human:localhost: Good morning, everyone!",
		"@human:localhost: Lisa, what can you do?",
		"@lisa:localhost: Hello! You asked: Lisa, what can you do?",
		"@human:localhost: And who wrote your persona?",
		"@lisa:localhost: Hello! You asked: And who wrote your persona?",
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Fatalf("transcript senders/bodies:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	if strings.Contains(stderr.String(), `"level":"ERROR"`) {
		t.Fatalf("demo logged errors:\n%s", stderr.String())
	}
}
