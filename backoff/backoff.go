package backoff

import "time"

// Policy is a retry delay schedule. Its zero value waits zero.
type Policy struct {
	// Base is the delay after the first failure; it doubles with each
	// further consecutive failure. Zero or less means no wait.
	Base time.Duration
	// Max caps the doubled delay (before jitter). It should be at least
	// Base: a delay never exceeds it, so zero means no wait.
	Max time.Duration
	// MaxRetryAfter caps a server-requested delay. Zero or less means Max.
	MaxRetryAfter time.Duration
	// Rand returns a number in [0, 1) that places a delay within its
	// jitter range. Nil means no jitter: every delay is nominal.
	Rand func() float64
	// Jitter spreads the doubled, capped delay.
	Jitter Jitter
	// RetryAfterJitter spreads a server-requested delay after its cap.
	RetryAfterJitter Jitter
}

// Jitter is the range a nominal delay d is spread over, as fractions of d:
// [d·(1−Below), d·(1+Above)). The zero Jitter keeps d as it is.
//
// For example Below 0.5 draws from the upper half [d/2, d) (a retry never
// comes later than nominal), Above 0.1 adds up to 10 % (a server-requested
// delay is never cut short), and Below 0.5 with Above 0.5 draws from
// [d/2, 3d/2).
type Jitter struct {
	Below, Above float64
}

// Delay returns how long to wait after failures consecutive failures
// (1 for the first; less counts as 1). A positive retryAfter is the
// server's requested delay: it replaces the doubled delay, capped at
// MaxRetryAfter and spread by RetryAfterJitter. Otherwise the delay is
// Base doubled failures−1 times, capped at Max and spread by Jitter.
//
// Delay calls p.Rand at most once, and only when the jitter in use is
// not zero.
func (p Policy) Delay(failures int, retryAfter time.Duration) time.Duration {
	if retryAfter > 0 {
		limit := p.MaxRetryAfter
		if limit <= 0 {
			limit = p.Max
		}
		return p.spread(min(retryAfter, limit), p.RetryAfterJitter)
	}
	return p.spread(Doubled(p.Base, p.Max, failures), p.Jitter)
}

// Doubled returns base doubled n−1 times, capped at limit: base for the
// first failure (n ≤ 1), 2·base for the second, and so on. It never
// overflows; zero or less base gives zero.
func Doubled(base, limit time.Duration, n int) time.Duration {
	if base <= 0 {
		return 0
	}
	d := base
	for i := 1; i < n && d < limit; i++ {
		if d > limit/2 {
			return limit // doubling would pass the cap anyway
		}
		d *= 2
	}
	return max(min(d, limit), 0)
}

// spread places d within j using p.Rand.
func (p Policy) spread(d time.Duration, j Jitter) time.Duration {
	if p.Rand == nil || (j.Below == 0 && j.Above == 0) || d <= 0 {
		return d
	}
	return j.Apply(d, p.Rand())
}

// Apply returns d spread by j at r, a number in [0, 1): d·(1−Below) for
// r = 0, rising linearly towards d·(1+Above). It is the pure core of
// Policy.Delay, for callers that draw r themselves.
func (j Jitter) Apply(d time.Duration, r float64) time.Duration {
	lo := time.Duration(float64(d) * (1 - j.Below))
	return lo + time.Duration(r*float64(d)*(j.Below+j.Above))
}
