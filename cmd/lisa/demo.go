package main

import (
	"context"
	"fmt"

	"github.com/lisabot/lisa/devkit/demo"
)

// demoCmd runs the whole system on this machine (package devkit/demo).
func demoCmd(ctx context.Context, c *cli, args []string) int {
	fs := newFlagSet(c, "demo", "[--exit-after-transcript]")
	exitAfter := fs.Bool("exit-after-transcript", false, "stop everything after printing the transcript (for CI)")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	opts := demo.Options{Out: c.stdout, Log: c.stderr, Getenv: c.getenv, ExitAfterTranscript: *exitAfter}
	if c.demo != nil {
		c.demo(&opts)
	}
	if err := demo.Run(ctx, opts); err != nil {
		fmt.Fprintln(c.stderr, "lisa demo:", err)
		return exitFailure
	}
	return exitOK
}
