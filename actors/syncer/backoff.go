package syncer

import (
	"math"
	"time"

	"github.com/lisabot/lisa/backoff"
	"github.com/lisabot/lisa/messages"
)

// NewBackoff returns the sync actor's retry schedule: base doubled per
// consecutive failure up to max, each delay drawn from its upper half
// (spread, never later than nominal, never below half); a server's
// Retry-After is honoured up to maxRetryAfter and lengthened by up to
// 10 %. rand returns a number in [0, 1).
func NewBackoff(base, max, maxRetryAfter time.Duration, rand func() float64) backoff.Policy {
	return backoff.Policy{
		Base: base, Max: max, MaxRetryAfter: maxRetryAfter, Rand: rand,
		Jitter:           backoff.Jitter{Below: 0.5},
		RetryAfterJitter: backoff.Jitter{Above: 0.1},
	}
}

// retryDelay returns how long to wait before the next request after
// failures consecutive failures ending in err. A permanent failure waits
// the longest delay at once: nothing will change soon, and hammering the
// server does not help.
func retryDelay(p backoff.Policy, failures int, err *messages.Error) time.Duration {
	var retryAfter time.Duration
	if err != nil {
		retryAfter = err.RetryAfter
		if err.Permanent {
			failures = math.MaxInt
		}
	}
	return p.Delay(failures, retryAfter)
}
