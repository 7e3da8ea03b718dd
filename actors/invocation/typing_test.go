package invocation

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/lisabot/lisa/messages/roompb"
)

type recTyper struct {
	mu    sync.Mutex
	calls []bool
	fail  bool
	on    chan struct{}
}

func (r *recTyper) SetTyping(_ context.Context, _ string, on bool, _ time.Duration) error {
	r.mu.Lock()
	r.calls = append(r.calls, on)
	n := 0
	for _, c := range r.calls {
		if c {
			n++
		}
	}
	r.mu.Unlock()
	if on && n == 3 && r.on != nil {
		close(r.on)
	}
	if r.fail {
		return errors.New("typing refused")
	}
	return nil
}

func (r *recTyper) snapshot() []bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]bool(nil), r.calls...)
}

func TestTypingLeaseEveryExitPath(t *testing.T) {
	lease := TypingLease{Timeout: time.Second, Refresh: 5 * time.Millisecond, ClearTimeout: time.Second}
	log := slog.New(slog.DiscardHandler)
	cand := &roompb.Candidate{RoomId: "!r:hs", EventId: "$e"}
	cases := []struct {
		name      string
		inner     InvokerFunc
		typerFail bool
		wantErr   bool
		wantPanic bool
	}{
		{"success", func(context.Context, *roompb.Candidate, uint32) ([]byte, error) { return []byte("{}"), nil }, false, false, false},
		{"failure", func(context.Context, *roompb.Candidate, uint32) ([]byte, error) { return nil, errors.New("llm down") }, false, true, false},
		{"panic", func(context.Context, *roompb.Candidate, uint32) ([]byte, error) { panic("boom") }, false, false, true},
		{"typing fails but invocation succeeds", func(context.Context, *roompb.Candidate, uint32) ([]byte, error) { return []byte("{}"), nil }, true, false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			typer := &recTyper{fail: c.typerFail}
			inv := WithTyping(c.inner, typer, lease, log)
			func() {
				defer func() {
					if r := recover(); (r != nil) != c.wantPanic {
						t.Fatalf("panic = %v", r)
					}
				}()
				_, err := inv.Invoke(context.Background(), cand, 1)
				if (err != nil) != c.wantErr {
					t.Fatalf("err = %v", err)
				}
			}()
			calls := typer.snapshot()
			if len(calls) < 2 || !calls[0] || calls[len(calls)-1] {
				t.Fatalf("typing calls = %v; want on first and off last", calls)
			}
		})
	}
	t.Run("refreshed while working", func(t *testing.T) {
		typer := &recTyper{on: make(chan struct{})}
		inv := WithTyping(InvokerFunc(func(ctx context.Context, _ *roompb.Candidate, _ uint32) ([]byte, error) {
			select {
			case <-typer.on: // third "on": refreshed twice
				return []byte("{}"), nil
			case <-time.After(10 * time.Second):
				return nil, errors.New("lease never refreshed")
			}
		}), typer, lease, log)
		if _, err := inv.Invoke(context.Background(), cand, 1); err != nil {
			t.Fatal(err)
		}
		if calls := typer.snapshot(); calls[len(calls)-1] {
			t.Fatalf("typing left on: %v", calls)
		}
	})
}

// blockingOff holds every "typing off" until released.
type blockingOff struct {
	recTyper
	release chan struct{}
}

func (b *blockingOff) SetTyping(ctx context.Context, room string, on bool, d time.Duration) error {
	if !on {
		<-b.release
	}
	return b.recTyper.SetTyping(ctx, room, on, d)
}

// TestTypingClearedInBackground: with Background set, the answer is handed
// back while typing off is still on its way, and the wait group covers
// the clean-up, so shutdown waits for it.
func TestTypingClearedInBackground(t *testing.T) {
	var bg sync.WaitGroup
	typer := &blockingOff{release: make(chan struct{})}
	lease := TypingLease{Timeout: time.Second, Refresh: time.Second, ClearTimeout: time.Second, Background: &bg}
	inv := WithTyping(InvokerFunc(func(context.Context, *roompb.Candidate, uint32) ([]byte, error) {
		return []byte("{}"), nil
	}), typer, lease, slog.New(slog.DiscardHandler))
	if _, err := inv.Invoke(context.Background(), &roompb.Candidate{RoomId: "!r:hs", EventId: "$e"}, 1); err != nil {
		t.Fatal(err)
	}
	// Invoke returned although "off" is blocked.
	waited := make(chan struct{})
	go func() { bg.Wait(); close(waited) }()
	select {
	case <-waited:
		t.Fatal("the wait group did not count the pending clean-up")
	case <-time.After(20 * time.Millisecond):
	}
	close(typer.release)
	<-waited
	if calls := typer.snapshot(); len(calls) < 2 || !calls[0] || calls[len(calls)-1] {
		t.Fatalf("typing calls = %v; want on first and off last", calls)
	}
}
