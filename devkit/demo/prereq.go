package demo

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/lisabot/lisa/config"
	"github.com/lisabot/lisa/devkit/dendrite"
	"github.com/lisabot/lisa/devkit/homeserver"
	"github.com/lisabot/lisa/devkit/synapse"
)

// maxSocketPath is the longest path a Unix socket may have on Linux
// (sun_path holds 108 bytes with the terminating NUL). Lisa's admin
// socket lives in the demo's data directory.
const maxSocketPath = 107

// minSwitchingGo is the oldest go command that can fetch a newer
// toolchain by itself (GOTOOLCHAIN, Go 1.21).
const minSwitchingGo = "1.21"

// Missing is one thing the demo needs and does not have.
type Missing struct {
	// What says what is missing and why the demo needs it.
	What string
	// Fix is the command (or setting) that provides it.
	Fix string
}

// PrerequisiteError is [Run]'s error when something the demo needs is
// missing. Run returns it before it starts (or builds) anything.
type PrerequisiteError struct {
	// Missing lists everything missing, in the order checked.
	Missing []Missing
}

func (e *PrerequisiteError) Error() string {
	parts := make([]string, len(e.Missing))
	for i, m := range e.Missing {
		parts[i] = m.What + " (fix: " + m.Fix + ")"
	}
	return "missing prerequisite: " + strings.Join(parts, "; ")
}

// host is what the prerequisite checks read of this machine; tests
// replace parts of it.
type host struct {
	getenv   config.LookupEnv
	lookPath func(file string) (string, error)
	listen   func(network, address string) (net.Listener, error)
	// dendrite returns a binary that needs no build, or "" (see
	// [dendrite.Built]).
	dendrite func() (string, error)
	cacheDir func() (string, error)
	// goEnv runs `go env` for the named variables with the go command at
	// path and returns their values in order.
	goEnv func(ctx context.Context, path string, names ...string) ([]string, error)
	// buildGo is the Go version the Dendrite build needs.
	buildGo func() (string, error)
	// synapse says whether Synapse can run here (see
	// [homeserver.Available]): nil, or a *[synapse.MissingError].
	synapse func(ctx context.Context) error
	// synapseCache is the directory Synapse's source is unpacked into
	// (see [synapse.CacheDir]).
	synapseCache func() (string, error)
}

// thisHost is the real machine, with the demo's environment lookup.
func thisHost(getenv config.LookupEnv) host {
	return host{getenv: getenv, lookPath: exec.LookPath, listen: net.Listen, dendrite: dendrite.Built,
		cacheDir: dendrite.CacheDir, goEnv: goEnv, buildGo: dendrite.GoDirective,
		synapse:      func(ctx context.Context) error { return homeserver.Available(ctx, homeserver.Synapse) },
		synapseCache: synapse.CacheDir}
}

// goEnv runs `go env NAME…`.
func goEnv(ctx context.Context, path string, names ...string) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, append([]string{"env"}, names...)...).Output()
	if err != nil {
		return nil, err
	}
	vals := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(vals) != len(names) {
		return nil, fmt.Errorf("go env printed %d values for %d names", len(vals), len(names))
	}
	return vals, nil
}

// checkPrerequisites checks everything the demo needs before it starts
// anything: its working directory work (already created) can hold Lisa's
// admin socket, 127.0.0.1 takes listeners, a real model is named in full,
// and the homeserver named server can run: Dendrite is built or can be
// built, Synapse has its tarball and Python packages. It returns every
// missing item.
func checkPrerequisites(ctx context.Context, h host, work, server string) []Missing {
	var missing []Missing
	if sock := filepath.Join(work, "data", config.AdminSocketName); len(sock) > maxSocketPath {
		missing = append(missing, Missing{
			What: fmt.Sprintf("a short temporary directory: Lisa's admin socket would be %s, %d bytes, over the %d a Unix socket path may have", sock, len(sock), maxSocketPath),
			Fix:  "export TMPDIR=/tmp",
		})
	}
	if l, err := h.listen("tcp4", "127.0.0.1:0"); err != nil {
		missing = append(missing, Missing{
			What: fmt.Sprintf("the loopback interface: every server of the demo listens on 127.0.0.1, and listening there failed (%v)", err),
			Fix:  "sudo ip link set lo up",
		})
	} else {
		_ = l.Close()
	}
	if url, _ := h.getenv("LISA_DEMO_LLM_URL"); url != "" {
		if model, _ := h.getenv("LISA_DEMO_LLM_MODEL"); model == "" {
			missing = append(missing, Missing{
				What: "LISA_DEMO_LLM_MODEL: LISA_DEMO_LLM_URL names a real model server, but not which model to use",
				Fix:  "export LISA_DEMO_LLM_MODEL=<a model that server lists>, or unset LISA_DEMO_LLM_URL for the scripted model",
			})
		}
	}
	if server == homeserver.Synapse {
		return append(missing, synapsePrerequisites(ctx, h)...)
	}
	return append(missing, dendritePrerequisites(ctx, h)...)
}

// onDendrite is the alternative every Synapse fix ends with.
const onDendrite = "; or run the demo on Dendrite (without --homeserver synapse)"

// synapsePrerequisites checks that Synapse can run: its source tarball is
// found and Debian's python3 imports every module it needs; and that the
// cache directory it is unpacked into is writable.
func synapsePrerequisites(ctx context.Context, h host) []Missing {
	var missing []Missing
	err := h.synapse(ctx)
	var m *synapse.MissingError
	switch {
	case err == nil:
	case errors.As(err, &m):
		if m.Tarball != "" {
			missing = append(missing, Missing{
				What: "the Synapse " + synapse.Version + " source tarball, to run the local homeserver: " + m.Tarball,
				Fix: "export " + synapse.TarballEnv + "=<path of synapse-" + synapse.Version + ".tar.gz> (a clone of Lisa has it in third_party/synapse/), " +
					"or run the demo from inside Lisa's checkout" + onDendrite,
			})
		}
		if m.Python != "" {
			missing = append(missing, Missing{
				What: "Debian's Python 3, which Synapse runs on: " + m.Python,
				Fix:  "sudo apt-get install python3" + onDendrite,
			})
		}
		if len(m.Packages) > 0 {
			pkgs := strings.Join(m.Packages, " ")
			missing = append(missing, Missing{
				What: "the Python modules Synapse imports, from the Debian packages " + pkgs,
				Fix:  "sudo apt-get install " + pkgs + onDendrite,
			})
		}
	default:
		missing = append(missing, Missing{What: "Synapse " + synapse.Version + ": " + err.Error(), Fix: "run the demo on Dendrite (without --homeserver synapse)"})
	}
	if dir, err := h.synapseCache(); err != nil {
		missing = append(missing, Missing{What: err.Error(), Fix: "export " + synapse.CacheDirEnv + "=$HOME/.cache/lisa"})
	} else if err := writable(dir); err != nil {
		missing = append(missing, Missing{
			What: fmt.Sprintf("a writable cache directory to unpack Synapse's source into (%v)", err),
			Fix:  "export " + synapse.CacheDirEnv + "=<a writable directory>",
		})
	}
	return missing
}

// dendritePrerequisites checks that Dendrite is built, or that it can be:
// a go command that can build it (its own version or one it may fetch)
// and a writable cache directory.
func dendritePrerequisites(ctx context.Context, h host) []Missing {
	bin, err := h.dendrite()
	switch {
	case err != nil:
		return []Missing{{What: err.Error(), Fix: "unset " + dendrite.BinaryEnv + " (the demo then builds Dendrite with Go), or point it at a dendrite " + dendrite.Version + " executable"}}
	case bin != "":
		return nil
	}
	var missing []Missing
	need, err := h.buildGo()
	if err != nil {
		return []Missing{{What: err.Error(), Fix: "reinstall Lisa from a clean checkout"}}
	}
	installGo := fmt.Sprintf("install Go %s or newer from https://go.dev/dl/ (Debian: sudo apt-get install golang-go), or set %s to a dendrite %s executable", need, dendrite.BinaryEnv, dendrite.Version)
	goPath, err := h.lookPath("go")
	if err != nil {
		missing = append(missing, Missing{What: "the go command, to build the local homeserver (Dendrite " + dendrite.Version + ") on the first run", Fix: installGo})
	} else if vals, err := h.goEnv(ctx, goPath, "GOVERSION", "GOTOOLCHAIN"); err != nil {
		missing = append(missing, Missing{What: fmt.Sprintf("a working go command (%s env failed: %v), to build Dendrite", goPath, err), Fix: installGo})
	} else if m, ok := goVersionProblem(vals[0], vals[1], need); !ok {
		m.Fix = installGo + m.Fix
		missing = append(missing, m)
	}
	if dir, err := h.cacheDir(); err != nil {
		missing = append(missing, Missing{What: err.Error(), Fix: "export " + dendrite.CacheDirEnv + "=$HOME/.cache/lisa"})
	} else if err := writable(dir); err != nil {
		missing = append(missing, Missing{
			What: fmt.Sprintf("a writable cache directory for the Dendrite build (%v)", err),
			Fix:  "export " + dendrite.CacheDirEnv + "=<a writable directory>",
		})
	}
	return missing
}

// goVersionProblem reports whether a go command of version have (such as
// "go1.24.2") under GOTOOLCHAIN toolchain can build a module that needs Go
// need: it can if it is new enough, or if it may fetch a newer toolchain.
func goVersionProblem(have, toolchain, need string) (Missing, bool) {
	if strings.HasPrefix(have, "devel") || versionAtLeast(have, need) {
		return Missing{}, true
	}
	if !versionAtLeast(have, minSwitchingGo) {
		return Missing{What: fmt.Sprintf("Go %s or newer to build Dendrite (this go command is %s, too old to fetch a newer one)", need, have)}, false
	}
	if toolchain == "local" || strings.HasSuffix(toolchain, "+path") || toolchain == "path" {
		return Missing{What: fmt.Sprintf("Go %s or newer to build Dendrite (this go command is %s, and GOTOOLCHAIN=%s forbids fetching one)", need, have, toolchain),
			Fix: "; or unset GOTOOLCHAIN so that go fetches Go " + need}, false
	}
	return Missing{}, true
}

// versionAtLeast reports whether Go version v ("go1.24.2", "1.26") is at
// least min ("1.21"), comparing major and minor numbers.
func versionAtLeast(v, min string) bool {
	parse := func(s string) (int, int, bool) {
		s = strings.TrimPrefix(s, "go")
		parts := strings.SplitN(s, ".", 3)
		if len(parts) < 2 {
			return 0, 0, false
		}
		major, err1 := strconv.Atoi(parts[0])
		minor := parts[1]
		if i := strings.IndexFunc(minor, func(r rune) bool { return r < '0' || r > '9' }); i >= 0 {
			minor = minor[:i] // "26rc1" → "26"
		}
		n, err2 := strconv.Atoi(minor)
		return major, n, err1 == nil && err2 == nil
	}
	vMaj, vMin, ok1 := parse(v)
	mMaj, mMin, ok2 := parse(min)
	if !ok1 || !ok2 {
		return false
	}
	return vMaj > mMaj || vMaj == mMaj && vMin >= mMin
}

// writable reports, as an error, why files cannot be created in dir
// (created if missing).
func writable(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".write-check-")
	if err != nil {
		return err
	}
	name := f.Name()
	_ = f.Close()
	return os.Remove(name)
}
