package synapse

import (
	"context"
	"log/slog"
	"testing"
	"time"

	devsynapse "github.com/lisabot/lisa/devkit/synapse"
	"github.com/lisabot/lisa/testkit/need"
)

// The types are aliases of devkit/synapse's, so values pass freely between
// code written against either package.
type (
	// Options is [devsynapse.Options].
	Options = devsynapse.Options
	// Server is [devsynapse.Server].
	Server = devsynapse.Server
	// Account is [devsynapse.Account].
	Account = devsynapse.Account
	// APIError is [devsynapse.APIError].
	APIError = devsynapse.APIError
	// MissingError is [devsynapse.MissingError].
	MissingError = devsynapse.MissingError
)

const (
	// Version is [devsynapse.Version].
	Version = devsynapse.Version
	// TarballEnv is [devsynapse.TarballEnv].
	TarballEnv = devsynapse.TarballEnv
	// CacheDirEnv is [devsynapse.CacheDirEnv].
	CacheDirEnv = devsynapse.CacheDirEnv
	// RequireEnv is [need.RequireSynapseEnv].
	RequireEnv = need.RequireSynapseEnv
)

// ErrStopped is [devsynapse.ErrStopped].
var ErrStopped = devsynapse.ErrStopped

// stopTimeout bounds Stop in the cleanup registered by Start.
const stopTimeout = 30 * time.Second

// Start launches a Synapse server for a test and registers [Server.Stop]
// with t.Cleanup. Where Synapse cannot run (no tarball, no Debian Python
// packages) it skips t with one line naming what is missing, or fails t
// with that line when LISA_REQUIRE_SYNAPSE=1. Any other failure fails the
// test with t.Fatal, the error carrying Synapse's log tail with secrets
// masked. If opts.Logger is nil, lifecycle records go to the test log.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	need.Synapse(t)
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	s, err := devsynapse.Launch(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("synapse log tail (secrets masked):\n%s", s.OutputTail())
		}
		ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
		defer cancel()
		if err := s.Stop(ctx); err != nil {
			t.Error(err)
		}
	})
	return s
}
