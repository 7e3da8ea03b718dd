package syncer

import (
	"time"

	"github.com/lisabot/lisa/messages"
)

// Backoff bounds retry delays.
type Backoff struct {
	Base, Max time.Duration
	// MaxRetryAfter caps a server-requested delay.
	MaxRetryAfter time.Duration
}

// Delay returns how long to wait before the next request after failures
// consecutive failures ending in err. jitter is a random number in [0, 1).
// It is pure: randomness is an input.
func (b Backoff) Delay(failures int, err *messages.Error, jitter float64) time.Duration {
	if err != nil && err.RetryAfter > 0 {
		d := min(err.RetryAfter, b.MaxRetryAfter)
		return d + time.Duration(jitter*float64(d)/10) // up to +10 %
	}
	d := b.Base
	for i := 1; i < failures && d < b.Max; i++ {
		d *= 2
	}
	d = min(d, b.Max)
	if err != nil && err.Permanent {
		d = b.Max // nothing will change soon; don't hammer the server
	}
	// Full jitter in the upper half: spreads retries, never below Base/2.
	return d/2 + time.Duration(jitter*float64(d/2))
}
