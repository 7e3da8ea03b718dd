package dendrite

import (
	"context"
	"log/slog"

	devdendrite "github.com/lisabot/lisa/devkit/dendrite"
)

// The types are aliases of devkit/dendrite's, so values pass freely between
// code written against either package.
type (
	// Options is [devdendrite.Options].
	Options = devdendrite.Options
	// Server is [devdendrite.Server].
	Server = devdendrite.Server
	// Account is [devdendrite.Account].
	Account = devdendrite.Account
	// APIError is [devdendrite.APIError].
	APIError = devdendrite.APIError
)

const (
	// Version is [devdendrite.Version].
	Version = devdendrite.Version
	// BinaryEnv is [devdendrite.BinaryEnv].
	BinaryEnv = devdendrite.BinaryEnv
	// CacheDirEnv is [devdendrite.CacheDirEnv].
	CacheDirEnv = devdendrite.CacheDirEnv
)

// ErrStopped is [devdendrite.ErrStopped].
var ErrStopped = devdendrite.ErrStopped

// EnsureBinary is [devdendrite.EnsureBinary].
func EnsureBinary(ctx context.Context, log *slog.Logger) (string, error) {
	return devdendrite.EnsureBinary(ctx, log)
}

// Launch is [devdendrite.Launch]; tests normally use [Start] instead.
func Launch(ctx context.Context, opts Options) (*Server, error) {
	return devdendrite.Launch(ctx, opts)
}
