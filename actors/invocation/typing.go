package invocation

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/lisabot/lisa/messages"
	"github.com/lisabot/lisa/messages/roompb"
)

// Typer sets Lisa's typing notification in a room.
type Typer interface {
	SetTyping(ctx context.Context, room string, on bool, timeout time.Duration) error
}

// TypingLease bounds the typing notification.
type TypingLease struct {
	// Timeout is how long the server shows typing per request.
	Timeout time.Duration
	// Refresh is how often the lease is renewed; it must be shorter than
	// Timeout.
	Refresh time.Duration
	// ClearTimeout bounds the final "typing off" request.
	ClearTimeout time.Duration
	// Background, if set, lets Invoke return before typing is cleared:
	// the clean-up runs beside the reply's send, counted in Background
	// so shutdown still waits for it. Nil clears before returning.
	Background *sync.WaitGroup
}

// WithTyping wraps inv so Lisa shows as typing while it works: on at the
// start, refreshed before it expires, and cleared on every way out of
// Invoke (success, failure, cancellation, panic). Typing failures are
// logged and never fail the invocation.
func WithTyping(inv Invoker, t Typer, lease TypingLease, log *slog.Logger) Invoker {
	return InvokerFunc(func(ctx context.Context, c *roompb.Candidate, attempt uint32) ([]byte, error) {
		room := c.GetRoomId()
		leaseCtx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(lease.Refresh)
			defer tick.Stop()
			for {
				if err := t.SetTyping(leaseCtx, room, true, lease.Timeout); err != nil && leaseCtx.Err() == nil {
					log.Debug("typing on failed", "room", messages.RoomID(room), "code", messages.ErrorCode(err))
				}
				select {
				case <-leaseCtx.Done():
					return
				case <-tick.C:
				}
			}
		}()
		clear := func() {
			stop()
			wg.Wait()
			clearCtx, cancel := context.WithTimeout(context.Background(), lease.ClearTimeout)
			defer cancel()
			if err := t.SetTyping(clearCtx, room, false, 0); err != nil {
				log.Debug("typing off failed", "room", messages.RoomID(room), "code", messages.ErrorCode(err))
			}
		}
		defer func() {
			if lease.Background == nil {
				clear()
				return
			}
			// Off the reply's path: the answer is handed back now and
			// sent while typing is cleared.
			lease.Background.Add(1)
			go func() {
				defer lease.Background.Done()
				clear()
			}()
		}()
		return inv.Invoke(ctx, c, attempt)
	})
}
