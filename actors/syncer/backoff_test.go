package syncer

import (
	"testing"
	"time"

	"github.com/lisabot/lisa/messages"
)

func TestRetryDelay(t *testing.T) {
	cases := []struct {
		name     string
		failures int
		err      *messages.Error
		jitter   float64
		want     time.Duration
	}{
		{"first failure, no jitter", 1, &messages.Error{Code: messages.CodeMatrixUnavailable}, 0, 500 * time.Millisecond},
		{"first failure, max jitter", 1, &messages.Error{Code: messages.CodeMatrixUnavailable}, 0.999999999, time.Second - 1},
		{"doubles", 3, &messages.Error{Code: messages.CodeMatrixUnavailable}, 0, 2 * time.Second},
		{"capped", 20, &messages.Error{Code: messages.CodeMatrixUnavailable}, 0, 30 * time.Second},
		{"no error counts as transient", 2, nil, 0, time.Second},
		{"retry_after honoured", 1, &messages.Error{Code: messages.CodeMatrixRateLimit, RetryAfter: 2 * time.Second}, 0, 2 * time.Second},
		{"retry_after jitter", 1, &messages.Error{Code: messages.CodeMatrixRateLimit, RetryAfter: 2 * time.Second}, 0.5, 2*time.Second + 100*time.Millisecond},
		{"retry_after bounded", 1, &messages.Error{Code: messages.CodeMatrixRateLimit, RetryAfter: time.Hour}, 0, 30 * time.Second},
		{"permanent waits long", 1, &messages.Error{Code: messages.CodeMatrixForbidden, Permanent: true}, 0, 30 * time.Second},
		{"permanent with retry_after honours it", 1, &messages.Error{Code: messages.CodeMatrixForbidden, Permanent: true, RetryAfter: time.Second}, 0, time.Second},
	}
	for _, c := range cases {
		p := NewBackoff(time.Second, time.Minute, 30*time.Second, func() float64 { return c.jitter })
		if got := retryDelay(p, c.failures, c.err); got != c.want {
			t.Errorf("%s: retryDelay = %v, want %v", c.name, got, c.want)
		}
	}
}
