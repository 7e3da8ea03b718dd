package main

import (
	"context"
	"testing"
	"time"

	"github.com/lisabot/lisa/testkit/llmfake"
)

// TestPromptPrefixPhase: the lived-in room's requests share most of their
// bytes with the one before; the excerpt's start moves now and then, not
// with every invocation.
func TestPromptPrefixPhase(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := benchPrefix(ctx, t.TempDir(), benchOptions{prefixInvocations: 16, prefixBetween: 3})
	if err != nil {
		t.Fatal(err)
	}
	// 16 invocations, 5 new events each, the default steps of 20: the
	// start moves about every fourth invocation, never at every one.
	if rep.Requests != 15 || rep.StartMoves == 0 || rep.StartMoves > 6 || rep.WindowStepEvents != 20 {
		t.Fatalf("report = %+v", rep)
	}
	if rep.P50Fraction < 0.85 || rep.SharedFraction <= rep.MinFraction || rep.SharedFraction >= 1 || rep.MeanRequestBytes < 5000 {
		t.Fatalf("fractions: %+v", rep)
	}
}

func TestPromptText(t *testing.T) {
	r := llmfake.Request{Tools: []llmfake.Tool{{Name: "t", Description: "d", Parameters: []byte(`{}`)}},
		Messages: []llmfake.Message{{Role: "system", Content: "S"}, {Role: "assistant", ToolCalls: []llmfake.ToolCall{{Name: "t", Arguments: "{}"}}}}}
	if got := promptText(r); got != "t\nd\n{}\n<|system|>\nS\n<|assistant|>\n\nt{}\n" {
		t.Fatalf("promptText = %q", got)
	}
	if commonPrefix("abcd", "abxy") != 2 || commonPrefix("ab", "abc") != 2 || commonPrefix("", "a") != 0 {
		t.Fatal("commonPrefix")
	}
}
