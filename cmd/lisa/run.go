package main

import (
	"context"

	"github.com/lisabot/lisa/adapters/logging"
	"github.com/lisabot/lisa/daemon"
)

// runCmd is `lisa run --config FILE`: the daemon, until SIGTERM or SIGINT.
func runCmd(ctx context.Context, c *cli, args []string) int {
	loaded, code, ok := loadConfigFlag(c, "run", args)
	if !ok {
		return code
	}
	res := loaded.Resolved
	log := logging.New(c.stderr, res.Config.Runtime.SlogLevel(), res.Secrets())
	if err := daemon.Run(ctx, res, log, daemon.RunOptions{Arm: c.arm, Build: c.build}); err != nil {
		return exitFailure
	}
	return exitOK
}
