package matrix

import (
	"errors"
	"testing"
	"time"

	"github.com/lisabot/lisa/messages"
)

func TestLimiterPacesTheAccountAfterARefusal(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	l := &limiter{now: func() time.Time { return now }}
	refusal := &messages.Error{Code: messages.CodeMatrixRateLimit, RetryAfter: 5 * time.Second}
	mustGo := func(what string) func(error) {
		t.Helper()
		done, err := l.admit()
		if err != nil {
			t.Fatalf("%s: held (%v), want it to go", what, err)
		}
		return done
	}
	mustWait := func(what string, want time.Duration) {
		t.Helper()
		done, err := l.admit()
		var le *messages.Error
		if done != nil || !errors.As(err, &le) || le.Code != messages.CodeMatrixRateLimit || !errors.Is(err, messages.ErrRateLimitWait) || le.RetryAfter != want || le.Ambiguous {
			t.Fatalf("%s: admit = %v, %v; want a local wait of %v", what, done != nil, err, want)
		}
	}

	// Not limited: requests go side by side.
	a, b := mustGo("first"), mustGo("second at once")
	a(nil)
	b(refusal) // the homeserver asked for 5 s
	mustWait("right after the refusal", 5*time.Second)
	now = now.Add(2 * time.Second)
	mustWait("during the wait", 3*time.Second)
	now = now.Add(3 * time.Second)
	probe := mustGo("after the wait")
	mustWait("while the probe is out", probeWait)
	probe(nil)
	next := mustGo("after the probe was accepted")
	next(&messages.Error{Code: messages.CodeMatrixRateLimit}) // no retry_after_ms
	mustWait("after a refusal naming no wait", limitFloor)
	now = now.Add(limitFloor)
	mustGo("after the floor")(errors.New("other failure"))
	mustGo("a failure that is not a refusal ends no pacing")(nil)
	now = now.Add(limitMemory + time.Second)
	x, y := mustGo("long after the last refusal"), mustGo("side by side again")
	x(nil)
	y(nil)
}
