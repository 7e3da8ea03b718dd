package homeserver

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"

	devhs "github.com/lisabot/lisa/devkit/homeserver"
	"github.com/lisabot/lisa/testkit/dendrite"
	"github.com/lisabot/lisa/testkit/need"
	"github.com/lisabot/lisa/testkit/synapse"
)

// The types are aliases of devkit/homeserver's.
type (
	// Server is [devhs.Server].
	Server = devhs.Server
	// Account is [devhs.Account].
	Account = devhs.Account
	// Options is [devhs.Options].
	Options = devhs.Options
	// DendriteServer is [devhs.DendriteServer].
	DendriteServer = devhs.DendriteServer
	// SynapseServer is [devhs.SynapseServer].
	SynapseServer = devhs.SynapseServer
)

const (
	// Dendrite is [devhs.Dendrite].
	Dendrite = devhs.Dendrite
	// Synapse is [devhs.Synapse].
	Synapse = devhs.Synapse
	// Env names the environment variable listing the homeservers tests
	// run against, comma-separated, e.g. "dendrite,synapse".
	Env = "LISA_HOMESERVERS"
)

// Start launches the named homeserver for a test and stops it in
// t.Cleanup, as testkit/dendrite.Start and testkit/synapse.Start do (so
// Synapse skips where it cannot run, unless LISA_REQUIRE_SYNAPSE=1). When
// the test fails, the server's log tail (secrets masked) goes to the test
// log. An unknown name fails the test.
func Start(t testing.TB, name string, opts Options) Server {
	t.Helper()
	switch name {
	case Dendrite:
		s := DendriteServer{Server: dendrite.Start(t, opts.Dendrite())}
		// testkit/synapse.Start logs Synapse's tail itself.
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("dendrite log tail (secret masked):\n%s", s.OutputTail())
			}
		})
		return s
	case Synapse:
		return SynapseServer{Server: synapse.Start(t, opts.Synapse())}
	}
	_, err := devhs.ParseNames(name)
	t.Fatalf("homeserver.Start: %v", err)
	return nil
}

// List returns the homeservers a test runs against: those [Env] names
// (each must be able to run here, else the test fails), or, when it is
// unset, Dendrite plus Synapse where it can run or is required (with one
// line in the test log when it is left out).
func List(t testing.TB) []string {
	t.Helper()
	if v := os.Getenv(Env); strings.TrimSpace(v) != "" {
		names, err := devhs.ParseNames(v)
		if err != nil {
			t.Fatalf("%s=%q: %v", Env, v, err)
		}
		if slices.Contains(names, Synapse) {
			if why := need.SynapseProblem(); why != "" {
				t.Fatalf("%s=%q asks for synapse, which cannot run here: %s", Env, v, why)
			}
		}
		return names
	}
	names := []string{Dendrite}
	if need.HaveSynapse() || need.SynapseRequired() {
		return append(names, Synapse)
	}
	t.Logf("homeservers: dendrite only; %s", need.SynapseProblem())
	return names
}

// Each runs f as a subtest per homeserver in [List], named by the server
// ("dendrite", "synapse"), each with its own server started by [Start] with
// the zero [Options].
func Each(t *testing.T, f func(t *testing.T, hs Server)) {
	t.Helper()
	EachWith(t, Options{}, f)
}

// EachWith is [Each] with opts for every server.
func EachWith(t *testing.T, opts Options, f func(t *testing.T, hs Server)) {
	t.Helper()
	for _, name := range List(t) {
		t.Run(name, func(t *testing.T) {
			f(t, Start(t, name, opts))
		})
	}
}

// Launch is [devhs.Launch], for code that manages the server's lifetime
// itself; tests normally use [Start] or [Each].
func Launch(ctx context.Context, name string, opts Options) (Server, error) {
	return devhs.Launch(ctx, name, opts)
}
