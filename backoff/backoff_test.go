package backoff

import (
	"math"
	"testing"
	"time"
)

const ms = time.Millisecond

func fixed(r float64) func() float64 { return func() float64 { return r } }

func TestDoubled(t *testing.T) {
	cases := []struct {
		name        string
		base, limit time.Duration
		n           int
		want        time.Duration
	}{
		{"first failure", time.Second, time.Minute, 1, time.Second},
		{"zero failures counts as the first", time.Second, time.Minute, 0, time.Second},
		{"negative failures counts as the first", time.Second, time.Minute, -3, time.Second},
		{"second doubles", time.Second, time.Minute, 2, 2 * time.Second},
		{"fourth", time.Second, time.Minute, 4, 8 * time.Second},
		{"capped", time.Second, 30 * time.Second, 6, 30 * time.Second},
		{"cap below base", time.Second, 500 * ms, 1, 500 * ms},
		{"huge count stays at the cap", time.Second, time.Minute, math.MaxInt, time.Minute},
		{"huge cap does not overflow", time.Second, time.Duration(math.MaxInt64), 200, time.Duration(math.MaxInt64)},
		{"zero base waits zero", 0, time.Minute, 5, 0},
		{"zero cap waits zero", time.Second, 0, 5, 0},
		{"negative cap waits zero", time.Second, -time.Second, 1, 0},
	}
	for _, c := range cases {
		if got := Doubled(c.base, c.limit, c.n); got != c.want {
			t.Errorf("%s: Doubled(%v, %v, %d) = %v, want %v", c.name, c.base, c.limit, c.n, got, c.want)
		}
	}
}

func TestPolicyDelay(t *testing.T) {
	// The schedules Lisa uses, as their callers configure them.
	sync := Policy{Base: time.Second, Max: time.Minute, MaxRetryAfter: 30 * time.Second,
		Jitter: Jitter{Below: 0.5}, RetryAfterJitter: Jitter{Above: 0.1}}
	read := Policy{Base: 250 * ms, Max: 2 * time.Second, MaxRetryAfter: 2 * time.Second}
	send := Policy{Base: 500 * ms, Max: 30 * time.Second}
	connect := Policy{Base: time.Second, Max: 30 * time.Second, MaxRetryAfter: time.Minute}
	llm := Policy{Base: 500 * ms, Max: 10 * time.Second, Jitter: Jitter{Below: 0.5, Above: 0.5}}
	with := func(p Policy, r float64) Policy { p.Rand = fixed(r); return p }
	cases := []struct {
		name       string
		p          Policy
		failures   int
		retryAfter time.Duration
		want       time.Duration
	}{
		{"zero policy", Policy{}, 3, 0, 0},
		{"zero policy ignores retry-after", Policy{}, 1, time.Second, 0},
		{"no jitter source: nominal", sync, 1, 0, time.Second},
		{"read 1", read, 1, 0, 250 * ms},
		{"read 2", read, 2, 0, 500 * ms},
		{"read 3", read, 3, 0, time.Second},
		{"read 4 capped", read, 4, 0, 2 * time.Second},
		{"read retry-after honoured", read, 1, 1500 * ms, 1500 * ms},
		{"read retry-after capped", read, 1, time.Hour, 2 * time.Second},
		{"retry-after cap defaults to Max", send, 1, time.Hour, 30 * time.Second},
		{"retry-after below the doubled delay wins", send, 6, 100 * ms, 100 * ms},
		{"negative retry-after is absent", send, 2, -time.Second, time.Second},
		{"connect doubles to 30 s", connect, 7, 0, 30 * time.Second},
		{"connect retry-after has its own cap", connect, 1, 5 * time.Minute, time.Minute},
		{"connect retry-after above Max", connect, 1, 45 * time.Second, 45 * time.Second},
		{"sync first, r=0: lower bound", with(sync, 0), 1, 0, 500 * ms},
		{"sync first, r→1: below nominal", with(sync, 0.999999999), 1, 0, time.Second - 1},
		{"sync doubles", with(sync, 0), 3, 0, 2 * time.Second},
		{"sync capped", with(sync, 0), 20, 0, 30 * time.Second},
		{"sync permanent waits Max", with(sync, 0.5), math.MaxInt, 0, 45 * time.Second},
		{"sync retry-after, r=0: never cut short", with(sync, 0), 1, 2 * time.Second, 2 * time.Second},
		{"sync retry-after, r=0.5: +5 %", with(sync, 0.5), 1, 2 * time.Second, 2100 * ms},
		{"sync retry-after capped, then spread", with(sync, 0.5), 1, time.Hour, 31500 * ms},
		{"llm, r=0: half", with(llm, 0), 2, 0, 500 * ms},
		{"llm, r=0.5: nominal", with(llm, 0.5), 2, 0, time.Second},
		{"llm, r=0.75", with(llm, 0.75), 2, 0, 1250 * ms},
	}
	for _, c := range cases {
		if got := c.p.Delay(c.failures, c.retryAfter); got != c.want {
			t.Errorf("%s: Delay(%d, %v) = %v, want %v", c.name, c.failures, c.retryAfter, got, c.want)
		}
	}
}

func TestJitterApply(t *testing.T) {
	cases := []struct {
		name string
		j    Jitter
		d    time.Duration
		r    float64
		want time.Duration
	}{
		{"zero jitter keeps d", Jitter{}, time.Second, 0.7, time.Second},
		{"upper half, r=0", Jitter{Below: 0.5}, time.Second, 0, 500 * ms},
		{"upper half, r=0.5", Jitter{Below: 0.5}, time.Second, 0.5, 750 * ms},
		{"up to +10 %, r=0", Jitter{Above: 0.1}, time.Second, 0, time.Second},
		{"up to +10 %, r=0.5", Jitter{Above: 0.1}, time.Second, 0.5, 1050 * ms},
		{"odd nanoseconds truncate like integer halving", Jitter{Below: 0.5}, 3, 0, 1},
	}
	for _, c := range cases {
		if got := c.j.Apply(c.d, c.r); got != c.want {
			t.Errorf("%s: Apply(%v, %v) = %v, want %v", c.name, c.d, c.r, got, c.want)
		}
	}
}

// TestDelayCallsRandOnlyWhenNeeded keeps the source's sequence
// deterministic: a delay without jitter draws nothing.
func TestDelayCallsRandOnlyWhenNeeded(t *testing.T) {
	calls := 0
	p := Policy{Base: time.Second, Max: time.Minute, Jitter: Jitter{Below: 0.5},
		Rand: func() float64 { calls++; return 0 }}
	p.Delay(1, 0)
	p.Delay(2, 5*time.Second) // retry-after without RetryAfterJitter
	if calls != 1 {
		t.Fatalf("Rand called %d times, want 1", calls)
	}
}
