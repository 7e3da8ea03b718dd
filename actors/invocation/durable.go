package invocation

import (
	"context"
	"sync"

	"github.com/lisabot/lisa/messages"
	"github.com/lisabot/lisa/messages/roompb"
)

// Durability syncs the store: Sync returns once every write acknowledged
// before the call is on disk (persistence.Store.Sync).
type Durability interface {
	Sync() error
}

// durableKey carries an invocation's *durableOnce in its context.
type durableKey struct{}

// durableOnce syncs once per invocation, before its first model request.
type durableOnce struct {
	d    Durability
	mu   sync.Mutex
	done bool
}

// WithDurability wraps inv so that its first request to the model waits
// until the store is synced: the accepted invocation, committed with the
// sync cursor but not waited for, is durable before the model is asked,
// and the model is never asked twice for one mention because a power
// failure took the mention back. The room starts that sync when it records
// the attempt's start, while the context is fetched, so the wait is
// normally over before it begins. Later requests of the invocation do not
// wait.
func WithDurability(inv Invoker, d Durability) Invoker {
	return InvokerFunc(func(ctx context.Context, c *roompb.Candidate, attempt uint32) ([]byte, error) {
		return inv.Invoke(context.WithValue(ctx, durableKey{}, &durableOnce{d: d}), c, attempt)
	})
}

// awaitDurable waits, the first time it is called for an invocation
// wrapped by WithDurability, until the store is synced.
func awaitDurable(ctx context.Context) error {
	o, _ := ctx.Value(durableKey{}).(*durableOnce)
	if o == nil {
		return nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.done {
		return nil
	}
	if err := o.d.Sync(); err != nil {
		return &messages.Error{Code: messages.CodeStorage, Message: "store not synced before asking the model", Err: err}
	}
	o.done = true
	return nil
}
