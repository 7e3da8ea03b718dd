package main

import (
	"context"
	"encoding/json"
	"fmt"
)

// versionCmd is `lisa version [--json]`: the binary's build info.
func versionCmd(_ context.Context, c *cli, args []string) int {
	fs := newFlagSet(c, "version", "[--json]")
	asJSON := fs.Bool("json", false, "print the build info as one JSON object")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if *asJSON {
		b, err := json.Marshal(c.build)
		if err != nil {
			fmt.Fprintln(c.stderr, "lisa version:", err)
			return exitFailure
		}
		fmt.Fprintln(c.stdout, string(b))
		return exitOK
	}
	fmt.Fprintln(c.stdout, c.build.String())
	return exitOK
}
