package matrix

import (
	"errors"
	"sync"
	"time"

	"github.com/lisabot/lisa/messages"
)

// Account-wide pacing of the requests a homeserver's message rate limit
// counts (sends, reactions, redactions). Synapse keys rc_message by the
// requesting user (synapse/api/ratelimiting.py Ratelimiter.can_do_action,
// key requester.user.to_string(); synapse/handlers/message.py
// EventCreationHandler.handle_new_client_event calls it for every client
// event), so all of Lisa's rooms draw on one bucket. Each room already
// waits the retry_after_ms its own refusal asked for; without a shared
// pace the rooms' waits end together and all but one meet a new 429.
const (
	// limitFloor is the wait after a refusal that named none.
	limitFloor = time.Second
	// probeWait is the wait given to a request while another one tries
	// whether the limit has passed.
	probeWait = 500 * time.Millisecond
	// limitMemory is how long after its last refusal the account is
	// still paced one request at a time.
	limitMemory = time.Minute
)

// limiter paces the account's rate-limited requests after a refusal:
// until the wait the homeserver asked for has passed no request is made
// (each fails at once, with the remaining wait, as a CodeMatrixRateLimit
// error whose cause is messages.ErrRateLimitWait); after it one request
// at a time goes, until limitMemory has passed without a refusal. The
// zero value paces nothing until the first refusal.
type limiter struct {
	now func() time.Time

	mu      sync.Mutex
	refused time.Time // the latest refusal
	until   time.Time // no request before
	probing bool      // a request is out while paced
}

// admit decides whether a request may go now. If it may, done must be
// called with its outcome; if not, err is the error to return instead.
func (l *limiter) admit() (done func(error), err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock()
	if l.refused.IsZero() || now.Sub(l.refused) > limitMemory && !now.Before(l.until) {
		return l.done, nil
	}
	wait := l.until.Sub(now)
	if wait <= 0 && l.probing {
		wait = probeWait
	}
	if wait > 0 {
		return nil, &messages.Error{Code: messages.CodeMatrixRateLimit, Message: "waiting for the homeserver's rate limit", RetryAfter: wait, Err: messages.ErrRateLimitWait}
	}
	l.probing = true
	return l.done, nil
}

// done records the outcome of an admitted request.
func (l *limiter) done(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.probing = false
	var le *messages.Error
	if !errors.As(err, &le) || le.Code != messages.CodeMatrixRateLimit {
		return
	}
	now := l.clock()
	l.refused = now
	if u := now.Add(max(le.RetryAfter, limitFloor)); u.After(l.until) {
		l.until = u
	}
}

func (l *limiter) clock() time.Time {
	if l.now != nil {
		return l.now()
	}
	return time.Now()
}

// paced runs a rate-limited request through the client's limiter.
func (c *Client) paced(f func() error) error {
	done, err := c.limit.admit()
	if err != nil {
		return err
	}
	err = f()
	done(err)
	return err
}
