package hsproc

import (
	"context"
	"io"
	"net/http"
	"sync"
	"time"
)

// DefaultTail is how much of a server's output a zero TailBuffer keeps.
const DefaultTail = 64 << 10

// ExitText describes a Wait result for logs.
func ExitText(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// Ping reports whether GET baseURL/_matrix/client/versions answers 200
// within a second.
func Ping(ctx context.Context, client *http.Client, baseURL string) bool {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, baseURL+"/_matrix/client/versions", nil)
	if err != nil {
		return false
	}
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// TailBuffer keeps the last Max bytes written to it (DefaultTail if Max
// is zero). It is safe for concurrent use.
type TailBuffer struct {
	// Max bounds the bytes kept.
	Max     int
	mu      sync.Mutex
	buf     []byte
	dropped bool
}

// Write implements io.Writer.
func (b *TailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	limit := b.Max
	if limit <= 0 {
		limit = DefaultTail
	}
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - limit; over > 0 {
		n := copy(b.buf, b.buf[over:])
		b.buf = b.buf[:n]
		b.dropped = true
	}
	return len(p), nil
}

// String returns the kept bytes, marked if earlier output was dropped.
func (b *TailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.buf) == 0 {
		return "(no output)"
	}
	if b.dropped {
		return "[earlier output dropped]\n" + string(b.buf)
	}
	return string(b.buf)
}

// Reset forgets everything written so far.
func (b *TailBuffer) Reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = b.buf[:0]
	b.dropped = false
}
