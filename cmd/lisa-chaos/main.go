package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/lisabot/lisa/adapters/logging"
	"github.com/lisabot/lisa/buildinfo"
	"github.com/lisabot/lisa/chaos"
	"github.com/lisabot/lisa/config"
	"github.com/lisabot/lisa/daemon"
	"github.com/lisabot/lisa/devkit/dendrite"
	"github.com/lisabot/lisa/devkit/homeserver"
	"github.com/lisabot/lisa/devkit/synapse"
)

// Exit codes, as lisa's.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.LookupEnv)
	stop()
	os.Exit(code)
}

// run dispatches: `lisa-chaos run --config FILE` is Lisa with the chaos
// plan of the environment armed (what a campaign starts), anything else
// is the campaign's flags.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv config.LookupEnv) int {
	if len(args) > 0 && args[0] == "run" {
		return runLisa(ctx, args[1:], stderr, getenv)
	}
	return campaign(ctx, args, stdout, stderr)
}

// runLisa is `lisa run` with the failpoints and faults of chaos.Arm.
func runLisa(ctx context.Context, args []string, stderr io.Writer, getenv config.LookupEnv) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "", "the TOML configuration `FILE` (required)")
	if err := fs.Parse(args); err != nil || *path == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "usage: lisa-chaos run --config FILE")
		return exitUsage
	}
	res, err := config.LoadAndResolve(*path, getenv)
	if err != nil {
		fmt.Fprintln(stderr, "lisa-chaos run:", err)
		return exitUsage
	}
	log := logging.New(stderr, res.Config.Runtime.SlogLevel(), res.Secrets())
	if err := daemon.Run(ctx, res, log, daemon.RunOptions{Arm: chaos.Arm(getenv), Build: buildinfo.Read()}); err != nil {
		return exitFailure
	}
	return exitOK
}

// campaign is a seeded fault campaign against Lisa (this binary, run as
// `lisa-chaos run`), a local homeserver (Dendrite or Synapse) and a
// scripted LLM. It exits 0 only
// if every invariant held.
func campaign(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("lisa-chaos", flag.ContinueOnError)
	fs.SetOutput(stderr)
	seed := fs.Uint64("seed", uint64(time.Now().UnixNano()), "seed of every random choice (printed; pass it again to replay)")
	duration := fs.Duration("duration", 10*time.Minute, "length of the fault phase")
	rooms := fs.Int("rooms", 3, "allowed rooms with traffic")
	actorRate := fs.Float64("actor-rate", 0, "actor fault probability per message (default: the CI campaign's)")
	netRate := fs.Float64("net-rate", 0, "network fault probability per request (default: the CI campaign's)")
	killEvery := fs.Duration("kill-every", 0, "mean time between random SIGKILLs, drawn from [D/2, 3D/2] (default: the CI campaign's 3–8 s)")
	dir := fs.String("dir", "", "working directory, kept afterwards (default: a temporary one, removed if the campaign passed)")
	jsonOut := fs.String("json", "", "also write the report as JSON to this file")
	hsName := fs.String("homeserver", homeserver.Dendrite, "the homeserver to run against: "+strings.Join(homeserver.Names(), " or ")+
		" (Synapse from its source tarball, $"+synapse.TarballEnv+" or ../shared/tools/synapse/; Dendrite: $"+dendrite.BinaryEnv+" or the cached build)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "lisa-chaos: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	hs, err := homeserverName(*hsName)
	if err != nil {
		fmt.Fprintln(stderr, "lisa-chaos:", err)
		return exitUsage
	}
	if *rooms < 1 || *duration <= 0 || *actorRate < 0 || *actorRate > 1 || *netRate < 0 || *netRate > 1 || *killEvery < 0 {
		fmt.Fprintln(stderr, "lisa-chaos: --rooms must be positive, --duration positive, --kill-every not negative, rates within [0, 1]")
		return exitUsage
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(stderr, "lisa-chaos:", err)
		return exitFailure
	}
	work, temporary := *dir, *dir == ""
	if temporary {
		if work, err = os.MkdirTemp("", "lisa-chaos-"); err != nil {
			fmt.Fprintln(stderr, "lisa-chaos:", err)
			return exitFailure
		}
	} else if err := os.MkdirAll(work, 0o700); err != nil {
		fmt.Fprintln(stderr, "lisa-chaos:", err)
		return exitFailure
	}
	cfg := chaos.CIConfig(*seed, work, func(args ...string) *exec.Cmd { return exec.Command(self, args...) })
	cfg.Duration, cfg.MaxDuration, cfg.Min, cfg.Rooms = *duration, *duration+time.Minute, chaos.Minimums{}, *rooms
	if *actorRate > 0 {
		cfg.ActorRate = *actorRate
	}
	if *netRate > 0 {
		cfg.NetRate = *netRate
	}
	if *killEvery > 0 {
		cfg.KillEvery = [2]time.Duration{*killEvery / 2, *killEvery * 3 / 2}
	}
	cfg.Progress = stdout
	cfg.Homeserver = hs
	rep, err := chaos.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "lisa-chaos: campaign did not run (seed %d): %v\n", *seed, err)
		finish(work, temporary, false, stderr)
		return exitFailure
	}
	if !finish(work, temporary, rep.OK(), stderr) {
		rep.LogDir = ""
	}
	rep.WriteText(stdout)
	if *jsonOut != "" {
		b, _ := json.MarshalIndent(rep, "", "  ")
		if err := os.WriteFile(*jsonOut, append(b, '\n'), 0o600); err != nil {
			fmt.Fprintln(stderr, "lisa-chaos:", err)
			return exitFailure
		}
	}
	if !rep.OK() {
		return exitFailure
	}
	return exitOK
}

// homeserverName reads --homeserver: exactly one of homeserver.Names().
func homeserverName(flagValue string) (string, error) {
	names, err := homeserver.ParseNames(flagValue)
	if err != nil {
		return "", err
	}
	if len(names) != 1 {
		return "", fmt.Errorf("--homeserver names one of %s", strings.Join(homeserver.Names(), ", "))
	}
	return names[0], nil
}

// finish removes a temporary working directory of a campaign that passed
// and keeps any other; it says where a failed campaign's logs are, and
// reports whether the directory is still there.
func finish(work string, temporary, passed bool, stderr io.Writer) (kept bool) {
	if temporary && passed {
		if err := os.RemoveAll(work); err != nil {
			fmt.Fprintln(stderr, "lisa-chaos:", err)
			return true
		}
		return false
	}
	if !passed {
		fmt.Fprintf(stderr, "lisa-chaos: the campaign failed; its logs are kept: %s, %s (data and the homeserver's files beside them)\n",
			filepath.Join(work, chaos.CampaignLog), filepath.Join(work, chaos.LisaLog))
	}
	return true
}
