package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/lisabot/lisa/config"
	"github.com/lisabot/lisa/daemon"
)

// checkConfig implements "lisa check-config --config FILE": it loads,
// validates and resolves the file, prints every problem to stderr (one per
// line, key first) and exits 2, or prints a short summary without secrets
// and exits 0.
func checkConfig(ctx context.Context, c *cli, args []string) int {
	r, code, ok := loadConfigFlag(c, "check-config", args)
	if !ok {
		return code
	}
	path := &r.Path
	cfg := r.Config
	converter, err := daemon.CheckConverter(ctx, cfg)
	if err != nil {
		fmt.Fprintln(c.stderr, err.Error())
		return exitUsage
	}
	search := "disabled (search.endpoint is empty)"
	if cfg.Search.Enabled() {
		search = "enabled"
	}
	fmt.Fprintf(c.stdout, "config OK: %s\n", *path)
	fmt.Fprintf(c.stdout, "  homeserver: %s\n", cfg.Matrix.HomeserverURL)
	fmt.Fprintf(c.stdout, "  user:       %s (device %s)\n", cfg.Matrix.UserID, cfg.Matrix.DeviceID)
	fmt.Fprintf(c.stdout, "  rooms:      %d\n", len(cfg.Matrix.AllowedRoomIDs))
	fmt.Fprintf(c.stdout, "  model:      %s\n", cfg.LLM.Model)
	fmt.Fprintf(c.stdout, "  web search: %s\n", search)
	fmt.Fprintf(c.stdout, "  data dir:   %s\n", cfg.Runtime.DataDir)
	fmt.Fprintf(c.stdout, "  converter:  %s\n", converter)
	return exitOK
}

// printConfigError prints a configuration error: each problem on its own
// line, or the single error as it is.
func printConfigError(w io.Writer, err error) {
	var ps config.Problems
	if errors.As(err, &ps) {
		for _, p := range ps {
			fmt.Fprintln(w, p.String())
		}
		return
	}
	fmt.Fprintln(w, err.Error())
}

// loadedConfig is a resolved configuration and the file it came from.
type loadedConfig struct {
	config.Resolved
	Path string
}

// loadConfigFlag parses "--config FILE" for command name, then loads,
// validates and resolves the file. When ok is false the command should
// return code: usage errors and every configuration problem are printed.
func loadConfigFlag(c *cli, name string, args []string) (loadedConfig, int, bool) {
	fs := newFlagSet(c, name, "--config FILE")
	path := fs.String("config", "", "the TOML configuration `FILE` (required)")
	if code, ok := parseFlags(fs, args); !ok {
		return loadedConfig{}, code, false
	}
	if *path == "" {
		fmt.Fprintf(c.stderr, "lisa %s: the --config flag is required\n", name)
		fs.Usage()
		return loadedConfig{}, exitUsage, false
	}
	r, err := config.LoadAndResolve(*path, c.getenv)
	if err != nil {
		printConfigError(c.stderr, err)
		return loadedConfig{}, exitUsage, false
	}
	return loadedConfig{Resolved: r, Path: *path}, exitOK, true
}
