package hsproc

import "testing"

// TestTailBuffer checks that only the end of the output is kept.
func TestTailBuffer(t *testing.T) {
	t.Parallel()
	b := TailBuffer{Max: 8}
	_, _ = b.Write([]byte("0123456789"))
	_, _ = b.Write([]byte("ab"))
	if got, want := b.String(), "[earlier output dropped]\n456789ab"; got != want {
		t.Errorf("tail = %q, want %q", got, want)
	}
	b.Reset()
	if got := b.String(); got != "(no output)" {
		t.Errorf("tail after reset = %q", got)
	}
}
