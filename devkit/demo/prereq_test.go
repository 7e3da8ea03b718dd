package demo

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lisabot/lisa/devkit/dendrite"
	"github.com/lisabot/lisa/devkit/homeserver"
	"github.com/lisabot/lisa/devkit/synapse"
)

// fakeHost is a machine where everything the demo needs is present and
// Dendrite still has to be built.
func fakeHost(t *testing.T) host {
	return host{
		getenv:   func(string) (string, bool) { return "", false },
		lookPath: func(file string) (string, error) { return "/usr/local/go/bin/" + file, nil },
		listen: func(network, address string) (net.Listener, error) {
			return net.Listen(network, address)
		},
		dendrite: func() (string, error) { return "", nil },
		cacheDir: func() (string, error) { return t.TempDir(), nil },
		goEnv: func(_ context.Context, _ string, names ...string) ([]string, error) {
			return []string{"go1.26.0", "auto"}, nil
		},
		buildGo:      func() (string, error) { return "1.26", nil },
		synapse:      func(context.Context) error { return nil },
		synapseCache: func() (string, error) { return t.TempDir(), nil },
	}
}

func TestCheckPrerequisites(t *testing.T) {
	// A cache directory below a regular file cannot be created, not even
	// by root.
	notDir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notDir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	goEnvSays := func(version, toolchain string) func(context.Context, string, ...string) ([]string, error) {
		return func(context.Context, string, ...string) ([]string, error) { return []string{version, toolchain}, nil }
	}
	cases := []struct {
		name   string
		change func(h *host)
		work   string
		want   []string // substrings of What and Fix of each missing item, in order
	}{
		{name: "all there", change: func(*host) {}},
		{name: "dendrite built, no go", change: func(h *host) {
			h.dendrite = func() (string, error) { return "/cache/dendrite", nil }
			h.lookPath = func(string) (string, error) { return "", errors.New("not found") }
		}},
		{name: "no go command", change: func(h *host) { h.lookPath = func(string) (string, error) { return "", errors.New("not found") } },
			want: []string{"the go command, to build the local homeserver", "sudo apt-get install golang-go"}},
		{name: "go too old to switch", change: func(h *host) { h.goEnv = goEnvSays("go1.19.8", "auto") },
			want: []string{"Go 1.26 or newer to build Dendrite (this go command is go1.19.8, too old", "https://go.dev/dl/"}},
		{name: "go older, may fetch", change: func(h *host) { h.goEnv = goEnvSays("go1.24.2", "auto") }},
		{name: "go older, may not fetch", change: func(h *host) { h.goEnv = goEnvSays("go1.24.2", "local") },
			want: []string{"GOTOOLCHAIN=local forbids", "unset GOTOOLCHAIN"}},
		{name: "devel go", change: func(h *host) { h.goEnv = goEnvSays("devel go1.27-abcdef", "local") }},
		{name: "go env fails", change: func(h *host) {
			h.goEnv = func(context.Context, string, ...string) ([]string, error) { return nil, errors.New("exit status 2") }
		}, want: []string{"a working go command", "install Go 1.26"}},
		{name: "LISA_DENDRITE_BIN names nothing", change: func(h *host) {
			h.dendrite = func() (string, error) { return "", errors.New("dendrite: LISA_DENDRITE_BIN: no such file") }
		}, want: []string{"LISA_DENDRITE_BIN: no such file", "unset " + dendrite.BinaryEnv}},
		{name: "cache not writable", change: func(h *host) { h.cacheDir = func() (string, error) { return filepath.Join(notDir, "lisa"), nil } },
			want: []string{"a writable cache directory for the Dendrite build", "export LISA_CACHE_DIR="}},
		{name: "no loopback", change: func(h *host) {
			h.listen = func(string, string) (net.Listener, error) { return nil, errors.New("cannot assign requested address") }
		}, want: []string{"the loopback interface", "sudo ip link set lo up"}},
		{name: "real model without a name", change: func(h *host) {
			h.getenv = func(k string) (string, bool) {
				return map[string]string{"LISA_DEMO_LLM_URL": "http://127.0.0.1:8080/v1"}[k], k == "LISA_DEMO_LLM_URL"
			}
		}, want: []string{"LISA_DEMO_LLM_MODEL: LISA_DEMO_LLM_URL names", "export LISA_DEMO_LLM_MODEL="}},
		{name: "temporary directory too deep", work: "/" + strings.Repeat("d", 100), change: func(*host) {},
			want: []string{"a short temporary directory: Lisa's admin socket would be", "export TMPDIR=/tmp"}},
		{name: "several at once", change: func(h *host) {
			h.lookPath = func(string) (string, error) { return "", errors.New("not found") }
			h.cacheDir = func() (string, error) { return filepath.Join(notDir, "lisa"), nil }
		}, want: []string{"the go command", "install Go", "a writable cache directory", "LISA_CACHE_DIR"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := fakeHost(t)
			c.change(&h)
			work := c.work
			if work == "" {
				work = "/tmp/lisa-demo-123"
			}
			want := c.want
			missing := checkPrerequisites(context.Background(), h, work, homeserver.Dendrite)
			if len(missing)*2 != len(want) {
				t.Fatalf("missing %+v, want %d item(s) matching %q", missing, len(want)/2, want)
			}
			for i, m := range missing {
				if !strings.Contains(m.What, want[2*i]) || !strings.Contains(m.Fix, want[2*i+1]) {
					t.Errorf("item %d: %+v, want What with %q and Fix with %q", i, m, want[2*i], want[2*i+1])
				}
			}
		})
	}
}

// TestCheckSynapsePrerequisites: on Synapse the demo checks Synapse's
// tarball, Python and packages and its cache, not what building Dendrite
// needs, and names a fix for each.
func TestCheckSynapsePrerequisites(t *testing.T) {
	notDir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notDir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	synapseSays := func(m *synapse.MissingError) func(context.Context) error {
		return func(context.Context) error { return m }
	}
	cases := []struct {
		name   string
		change func(h *host)
		want   []string // substrings of What and Fix of each missing item, in order
	}{
		{name: "all there", change: func(*host) {}},
		{name: "no go command is no matter", change: func(h *host) {
			h.lookPath = func(string) (string, error) { return "", errors.New("not found") }
		}},
		{name: "no tarball", change: func(h *host) {
			h.synapse = synapseSays(&synapse.MissingError{Tarball: "no source tarball at LISA_SYNAPSE_TARBALL=/x.tar.gz (no such file or directory)"})
		}, want: []string{"the Synapse " + synapse.Version + " source tarball, to run the local homeserver: no source tarball at LISA_SYNAPSE_TARBALL=/x.tar.gz",
			"export " + synapse.TarballEnv + "=<path of synapse-" + synapse.Version + ".tar.gz>"}},
		{name: "no python", change: func(h *host) {
			h.synapse = synapseSays(&synapse.MissingError{Python: "no Python interpreter /usr/bin/python3 (Debian python3): not found"})
		}, want: []string{"Debian's Python 3, which Synapse runs on", "sudo apt-get install python3; or run the demo on Dendrite"}},
		{name: "packages and cache", change: func(h *host) {
			h.synapse = synapseSays(&synapse.MissingError{Packages: []string{"python3-treq", "python3-ijson"}})
			h.synapseCache = func() (string, error) { return filepath.Join(notDir, "lisa"), nil }
		}, want: []string{"the Python modules Synapse imports, from the Debian packages python3-treq python3-ijson", "sudo apt-get install python3-treq python3-ijson",
			"a writable cache directory to unpack Synapse's source into", "export LISA_CACHE_DIR="}},
		{name: "another error", change: func(h *host) {
			h.synapse = func(context.Context) error { return errors.New("something else") }
		}, want: []string{"Synapse " + synapse.Version + ": something else", "without --homeserver synapse"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := fakeHost(t)
			c.change(&h)
			missing := checkPrerequisites(context.Background(), h, "/tmp/lisa-demo-123", homeserver.Synapse)
			if len(missing)*2 != len(c.want) {
				t.Fatalf("missing %+v, want %d item(s) matching %q", missing, len(c.want)/2, c.want)
			}
			for i, m := range missing {
				if !strings.Contains(m.What, c.want[2*i]) || !strings.Contains(m.Fix, c.want[2*i+1]) {
					t.Errorf("item %d: %+v, want What with %q and Fix with %q", i, m, c.want[2*i], c.want[2*i+1])
				}
			}
		})
	}
}

func TestVersionAtLeast(t *testing.T) {
	cases := []struct {
		v, min string
		want   bool
	}{
		{"go1.26.0", "1.26", true}, {"go1.26rc1", "1.26", true}, {"go1.25.7", "1.26", false},
		{"go1.21", "1.21", true}, {"go1.9", "1.21", false}, {"go2.0", "1.26", true}, {"nonsense", "1.21", false},
	}
	for _, c := range cases {
		if got := versionAtLeast(c.v, c.min); got != c.want {
			t.Errorf("versionAtLeast(%q, %q) = %v", c.v, c.min, got)
		}
	}
}

func TestPrerequisiteErrorNamesEveryFix(t *testing.T) {
	err := &PrerequisiteError{Missing: []Missing{{What: "the go command", Fix: "install Go"}, {What: "loopback", Fix: "ip link set lo up"}}}
	if got, want := err.Error(), "missing prerequisite: the go command (fix: install Go); loopback (fix: ip link set lo up)"; got != want {
		t.Fatalf("Error() = %q, want %q", got, want)
	}
}

func TestChooseConverter(t *testing.T) {
	got := chooseConverter(context.Background(), func(context.Context) (string, error) { return "3.1.3", nil })
	if got.setting != "" || got.note != "[demo] pages are converted by pandoc 3.1.3" {
		t.Errorf("with pandoc: %+v", got)
	}
	got = chooseConverter(context.Background(), func(context.Context) (string, error) {
		return "", errors.New(`pandoc executable "pandoc" was not found or is not executable`)
	})
	if got.setting != `converter = "builtin"` || !strings.Contains(got.note, `pandoc executable "pandoc" was not found`) ||
		!strings.Contains(got.note, "built-in converter") || !strings.Contains(got.note, installPandoc) {
		t.Errorf("without pandoc: %+v, want the built-in converter selected and named", got)
	}
}
