package ollama

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/lisabot/lisa/testkit/need"
)

// RequireEnv, set to 1, makes tests that need the real server fail where
// it is not built instead of skipping; .ci/run sets it after building it.
const RequireEnv = "LISA_REQUIRE_OLLAMA"

// Tool is the real Ollama server as a tool tests may need: usable when
// its binary is built (or named by [BinaryEnv]).
var Tool = need.Tool{
	Name:       "ollama " + Version,
	RequireEnv: RequireEnv,
	Fix: "build it once with `go run ./testkit/ollama/cmd/ensure-ollama` (needs the Debian packages " +
		strings.Join(DebianPackages, " and ") + "; 8 to 19 minutes on two cores)",
	Check: func() string {
		bin, err := Built()
		switch {
		case err != nil:
			return err.Error()
		case bin == "":
			return "not built in Lisa's cache"
		}
		return ""
	},
}

// Need skips t with one line unless the server is built; with
// LISA_REQUIRE_OLLAMA=1 it builds it if missing and fails t if that
// fails.
func Need(t testing.TB) {
	t.Helper()
	if !Tool.Required() {
		Tool.Need(t)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	if _, err := EnsureBinary(ctx, slog.New(slog.NewTextHandler(t.Output(), nil))); err != nil {
		Tool.Missing(t, err.Error())
	}
}

// Models are the models [Start] creates on every server; all of them end
// their replies after a few tokens ([ShortStops]).
var Models = map[string]Model{
	// ModelTools: tool support, a window of 8192.
	ModelTools: {NumCtx: 8192, Tools: true, Stops: ShortStops},
	// ModelCtx512: tool support, a window of 512.
	ModelCtx512: {NumCtx: 512, Tools: true, Stops: ShortStops},
	// ModelNoTools: Ollama's default template (no tools) and no num_ctx,
	// so Ollama's default window applies.
	ModelNoTools: {Stops: ShortStops},
}

// Names of [Models].
const (
	ModelTools   = "lisa-tiny"
	ModelCtx512  = "lisa-tiny-ctx512"
	ModelNoTools = "lisa-tiny-notools"
)

// Start launches a server for a test (after [Need]), creates [Models] on
// it and stops it when the test ends; any failure fails the test.
func Start(t testing.TB) *Server {
	t.Helper()
	Need(t)
	bin, err := EnsureBinary(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Launch(t.Context(), bin, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := s.Stop(ctx); err != nil {
			t.Error(err)
		}
	})
	began := time.Now()
	for _, name := range []string{ModelTools, ModelCtx512, ModelNoTools} {
		if err := s.Create(t.Context(), name, Models[name]); err != nil {
			t.Fatal(fmt.Errorf("%w\nserver log:\n%s", err, s.log.tail(8<<10)))
		}
	}
	t.Logf("ollama %s on %s: %d models created in %s", Version, s.URL(), len(Models), time.Since(began).Round(time.Millisecond))
	return s
}
