package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/lisabot/lisa/chaos"
)

// chaosCmd is `lisa chaos`: a seeded fault campaign against Lisa itself
// (this binary, run as `lisa run`), a local Dendrite and a scripted LLM.
// It exits 0 only if every invariant held.
func chaosCmd(ctx context.Context, c *cli, args []string) int {
	fs := newFlagSet(c, "chaos", "[--seed S] [--duration D] [--rooms N] [--actor-rate P] [--net-rate P] [--dir DIR] [--json FILE]")
	seed := fs.Uint64("seed", uint64(time.Now().UnixNano()), "seed of every random choice (printed; pass it again to replay)")
	duration := fs.Duration("duration", 10*time.Minute, "length of the fault phase")
	rooms := fs.Int("rooms", 3, "allowed rooms with traffic")
	actorRate := fs.Float64("actor-rate", 0, "actor fault probability per message (default: the CI campaign's)")
	netRate := fs.Float64("net-rate", 0, "network fault probability per request (default: the CI campaign's)")
	killEvery := fs.Duration("kill-every", 0, "mean time between random SIGKILLs, drawn from [D/2, 3D/2] (default: the CI campaign's 3–8 s)")
	dir := fs.String("dir", "", "working directory, kept afterwards (default: a temporary one, removed)")
	jsonOut := fs.String("json", "", "also write the report as JSON to this file")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if *rooms < 1 || *duration <= 0 || *actorRate < 0 || *actorRate > 1 || *netRate < 0 || *netRate > 1 || *killEvery < 0 {
		fmt.Fprintln(c.stderr, "lisa chaos: --rooms must be positive, --duration positive, --kill-every not negative, rates within [0, 1]")
		return exitUsage
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(c.stderr, "lisa chaos:", err)
		return exitFailure
	}
	work := *dir
	if work == "" {
		if work, err = os.MkdirTemp("", "lisa-chaos-"); err != nil {
			fmt.Fprintln(c.stderr, "lisa chaos:", err)
			return exitFailure
		}
		defer os.RemoveAll(work)
	} else if err := os.MkdirAll(work, 0o700); err != nil {
		fmt.Fprintln(c.stderr, "lisa chaos:", err)
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
	cfg.Progress = c.stdout
	rep, err := chaos.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintf(c.stderr, "lisa chaos: campaign did not run (seed %d): %v\n", *seed, err)
		return exitFailure
	}
	rep.WriteText(c.stdout)
	if *jsonOut != "" {
		b, _ := json.MarshalIndent(rep, "", "  ")
		if err := os.WriteFile(*jsonOut, append(b, '\n'), 0o600); err != nil {
			fmt.Fprintln(c.stderr, "lisa chaos:", err)
			return exitFailure
		}
	}
	if !rep.OK() {
		return exitFailure
	}
	return exitOK
}
