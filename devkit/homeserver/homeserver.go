package homeserver

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/lisabot/lisa/devkit/dendrite"
	"github.com/lisabot/lisa/devkit/hsclient"
	"github.com/lisabot/lisa/devkit/synapse"
)

// The names of the homeservers [Launch] knows.
const (
	// Dendrite is devkit/dendrite's server.
	Dendrite = "dendrite"
	// Synapse is devkit/synapse's server.
	Synapse = "synapse"
)

// Names returns the homeservers [Launch] knows, in a fixed order.
func Names() []string { return []string{Dendrite, Synapse} }

// Server is a real homeserver on 127.0.0.1, launched for a test or a tool.
// Its methods are safe for concurrent use. The caller must call Stop.
type Server interface {
	// Name is the homeserver's name in [Names], e.g. "synapse".
	Name() string
	// Version is the release running, e.g. "1.67.0" or "v0.13.8".
	Version() string
	// URL is the base URL, http://127.0.0.1:PORT; it stays the same
	// across Restart.
	URL() string
	// ServerName is the Matrix server name ("localhost").
	ServerName() string
	// DataDir is the absolute directory of the server's database.
	DataDir() string
	// PID is the server's process ID, 0 while it is not running.
	PID() int
	// RegisterUser creates an ordinary account with shared-secret
	// registration and logs it in with deviceID (empty: the server
	// chooses).
	RegisterUser(ctx context.Context, localpart, password, deviceID string) (Account, error)
	// RegisterAdmin is RegisterUser for a server admin.
	RegisterAdmin(ctx context.Context, localpart, password, deviceID string) (Account, error)
	// Login logs an existing account in with a new access token for
	// deviceID.
	Login(ctx context.Context, localpart, password, deviceID string) (Account, error)
	// Restart stops the server (SIGTERM, SIGKILL after a grace) and starts
	// it again on the same port and database; it also works after Kill.
	Restart(ctx context.Context) error
	// Kill SIGKILLs the server as a crash would; Restart brings it back.
	Kill() error
	// Stop terminates the server and removes a data directory it
	// created. It is idempotent.
	Stop(ctx context.Context) error
	// OutputTail is the end of the server's log with secrets masked.
	OutputTail() string
	// TxnIDsSurviveRestart reports whether a send repeated with the same
	// access token and transaction ID after Restart returns the original
	// event ID (Synapse: its event_txn_id table, 24 h) rather than
	// storing a second event (Dendrite: an in-memory cache only).
	TxnIDsSurviveRestart() bool
}

// Account is a logged-in Matrix device on any [Server]
// ([hsclient.Account], which both servers return): formatting or logging
// it never shows its access token.
type Account = hsclient.Account

// Options configure [Launch] for either server. The zero value is valid.
type Options struct {
	// DataDir is the server's data directory; empty means a temporary one
	// that Stop removes.
	DataDir string
	// RateLimits turns on the server's own rate limiting: Dendrite's
	// (off by default) or Synapse's defaults (raised by default).
	RateLimits bool
	// StartTimeout bounds each start; zero means the server's default.
	StartTimeout time.Duration
	// Logger receives lifecycle records; nil discards them.
	Logger *slog.Logger
	// Output receives the server's own log; nil discards it.
	Output io.Writer
	// DendriteBinary is the dendrite executable (Dendrite only; empty:
	// devkit/dendrite's cached build, or $LISA_DENDRITE_BIN).
	DendriteBinary string
}

// ParseNames reads a comma-separated list of homeserver names (spaces
// allowed, case ignored, duplicates dropped). An unknown name is an error
// that lists the known ones; an empty list is nil.
func ParseNames(list string) ([]string, error) {
	var names []string
	for _, f := range strings.Split(list, ",") {
		n := strings.ToLower(strings.TrimSpace(f))
		if n == "" {
			continue
		}
		if !slices.Contains(Names(), n) {
			return nil, fmt.Errorf("unknown homeserver %q (known: %s)", n, strings.Join(Names(), ", "))
		}
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	return names, nil
}

// Available returns nil when the named server can be launched here without
// installing anything, else why not: Dendrite needs its binary built or the
// go command to build it; Synapse its tarball and Debian's Python packages
// (a *synapse.MissingError).
func Available(ctx context.Context, name string) error {
	switch name {
	case Dendrite:
		return nil // Launch builds it with the go command the tests run on
	case Synapse:
		return synapse.Prerequisites(ctx, "")
	}
	return fmt.Errorf("unknown homeserver %q (known: %s)", name, strings.Join(Names(), ", "))
}

// Launch starts the named homeserver ([Dendrite] or [Synapse]) with opts
// and returns once it answers. The caller must call Stop.
func Launch(ctx context.Context, name string, opts Options) (Server, error) {
	switch name {
	case Dendrite:
		s, err := dendrite.Launch(ctx, opts.Dendrite())
		if err != nil {
			return nil, err
		}
		return DendriteServer{s}, nil
	case Synapse:
		s, err := synapse.Launch(ctx, opts.Synapse())
		if err != nil {
			return nil, err
		}
		return SynapseServer{s}, nil
	}
	return nil, fmt.Errorf("unknown homeserver %q (known: %s)", name, strings.Join(Names(), ", "))
}

// DendriteServer adapts a devkit/dendrite server to [Server]. Its
// methods are the embedded server's, except that accounts are
// [Account]s; the embedded Server is there for what only Dendrite offers.
type DendriteServer struct {
	// Server is the adapted Dendrite server.
	*dendrite.Server
}

// Name returns [Dendrite].
func (DendriteServer) Name() string { return Dendrite }

// Version returns [dendrite.Version].
func (DendriteServer) Version() string { return dendrite.Version }

// TxnIDsSurviveRestart is false: Dendrite keeps transaction IDs in memory.
func (DendriteServer) TxnIDsSurviveRestart() bool { return false }

// RegisterUser is [dendrite.Server.RegisterUser].
func (d DendriteServer) RegisterUser(ctx context.Context, localpart, password, deviceID string) (Account, error) {
	a, err := d.Server.RegisterUser(ctx, localpart, password, deviceID)
	return a, err
}

// RegisterAdmin is [dendrite.Server.RegisterAdmin].
func (d DendriteServer) RegisterAdmin(ctx context.Context, localpart, password, deviceID string) (Account, error) {
	a, err := d.Server.RegisterAdmin(ctx, localpart, password, deviceID)
	return a, err
}

// Login is [dendrite.Server.Login].
func (d DendriteServer) Login(ctx context.Context, localpart, password, deviceID string) (Account, error) {
	a, err := d.Server.Login(ctx, localpart, password, deviceID)
	return a, err
}

// SynapseServer adapts a devkit/synapse server to [Server], like
// [DendriteServer].
type SynapseServer struct {
	// Server is the adapted Synapse server.
	*synapse.Server
}

// Name returns [Synapse].
func (SynapseServer) Name() string { return Synapse }

// Version returns [synapse.Version].
func (SynapseServer) Version() string { return synapse.Version }

// TxnIDsSurviveRestart is true: Synapse 1.67 keeps them in event_txn_id
// for 24 h, per access token.
func (SynapseServer) TxnIDsSurviveRestart() bool { return true }

// RegisterUser is [synapse.Server.RegisterUser].
func (s SynapseServer) RegisterUser(ctx context.Context, localpart, password, deviceID string) (Account, error) {
	a, err := s.Server.RegisterUser(ctx, localpart, password, deviceID)
	return a, err
}

// RegisterAdmin is [synapse.Server.RegisterAdmin].
func (s SynapseServer) RegisterAdmin(ctx context.Context, localpart, password, deviceID string) (Account, error) {
	a, err := s.Server.RegisterAdmin(ctx, localpart, password, deviceID)
	return a, err
}

// Login is [synapse.Server.Login].
func (s SynapseServer) Login(ctx context.Context, localpart, password, deviceID string) (Account, error) {
	a, err := s.Server.Login(ctx, localpart, password, deviceID)
	return a, err
}

// Dendrite returns opts as devkit/dendrite options.
func (o Options) Dendrite() dendrite.Options {
	return dendrite.Options{Binary: o.DendriteBinary, DataDir: o.DataDir, RateLimiting: o.RateLimits,
		StartTimeout: o.StartTimeout, Logger: o.Logger, Output: o.Output}
}

// Synapse returns opts as devkit/synapse options.
func (o Options) Synapse() synapse.Options {
	return synapse.Options{DataDir: o.DataDir, DefaultRateLimits: o.RateLimits,
		StartTimeout: o.StartTimeout, Logger: o.Logger, Output: o.Output}
}
