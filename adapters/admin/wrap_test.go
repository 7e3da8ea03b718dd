package admin

import (
	"context"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// TestWrapAddsToAnswers: a middleware wrapped around a running server's
// handler sees every later request and changes its answer; commands it
// passes on still reach the handler underneath; wrapping while clients
// call is safe (run with -race).
func TestWrapAddsToAnswers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "admin.sock")
	base := HandlerFunc(func(_ context.Context, cmd string, _ []string) (any, error) {
		return "base:" + cmd, nil
	})
	s, err := Listen(path, base, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	call := func(c *Client, cmd string) string {
		t.Helper()
		data, err := c.Call(cmd)
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	c, err := Dial(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := call(c, "health"); got != `"base:health"` {
		t.Fatalf("before Wrap: %s", got)
	}

	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			cc, err := Dial(path, time.Second)
			if err != nil {
				t.Error(err)
				return
			}
			defer cc.Close()
			for range 20 {
				if _, err := cc.Call("health"); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	s.Wrap(func(next Handler) Handler {
		return HandlerFunc(func(ctx context.Context, cmd string, args []string) (any, error) {
			if cmd != "health" {
				return next.Handle(ctx, cmd, args)
			}
			v, err := next.Handle(ctx, cmd, args)
			return v.(string) + "+wrapped", err
		})
	})
	wg.Wait()
	if got := call(c, "health"); got != `"base:health+wrapped"` {
		t.Errorf("after Wrap: health = %s", got)
	}
	if got := call(c, "rooms"); got != `"base:rooms"` {
		t.Errorf("after Wrap: rooms = %s", got)
	}
}
