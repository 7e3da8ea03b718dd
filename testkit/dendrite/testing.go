package dendrite

import (
	"context"
	"log/slog"
	"testing"
	"time"

	devdendrite "github.com/lisabot/lisa/devkit/dendrite"
)

// stopTimeout bounds Stop in the cleanup registered by Start.
const stopTimeout = 30 * time.Second

// Start launches a Dendrite server for a test: it finds or builds the binary
// ([EnsureBinary], unless opts.Binary is set), calls [Launch], and registers
// [Server.Stop] with t.Cleanup. Any failure fails the test with t.Fatal; Start
// never skips, so tests that need Dendrite run wherever the go command (or
// LISA_DENDRITE_BIN) is available. If opts.Logger is nil, lifecycle records
// go to the test log.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	s, err := devdendrite.Launch(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
		defer cancel()
		if err := s.Stop(ctx); err != nil {
			t.Error(err)
		}
	})
	return s
}
