package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/lisabot/lisa/devkit/demo"
	"github.com/lisabot/lisa/devkit/homeserver"
)

// demoCmd runs the whole system on this machine (package devkit/demo).
// It exits 2 when something the demo needs is missing, 1 when the demo
// failed (its self-check included).
func demoCmd(ctx context.Context, c *cli, args []string) int {
	fs := newFlagSet(c, "demo", "[--homeserver dendrite|synapse] [--exit-after-transcript]")
	hs := fs.String("homeserver", homeserver.Dendrite, "the local homeserver the conversation runs on: "+strings.Join(homeserver.Names(), " or "))
	exitAfter := fs.Bool("exit-after-transcript", false, "stop everything after printing the transcript and the self-check (for CI)")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if !slices.Contains(homeserver.Names(), *hs) {
		fmt.Fprintf(c.stderr, "lisa demo: unknown homeserver %q for --homeserver (known: %s)\n", *hs, strings.Join(homeserver.Names(), ", "))
		fs.Usage()
		return exitUsage
	}
	opts := demo.Options{Out: c.stdout, Log: c.stderr, Getenv: c.getenv, Homeserver: *hs, ExitAfterTranscript: *exitAfter}
	if c.demo != nil {
		c.demo(&opts)
	}
	err := demo.Run(ctx, opts)
	var pre *demo.PrerequisiteError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &pre):
		for _, m := range pre.Missing {
			fmt.Fprintf(c.stderr, "lisa demo: missing %s\n    fix: %s\n", m.What, m.Fix)
		}
		return exitUsage
	default:
		fmt.Fprintln(c.stderr, "lisa demo:", err)
		return exitFailure
	}
}
