package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/lisabot/lisa/buildinfo"
	"github.com/lisabot/lisa/config"
	"github.com/lisabot/lisa/daemon"
	"github.com/lisabot/lisa/devkit/demo"
)

// Exit codes shared by every command.
const (
	exitOK      = 0 // success
	exitFailure = 1 // the command ran and failed
	exitUsage   = 2 // bad usage or an invalid configuration
)

// cli carries what a command may use of the outside world. Commands get
// nothing from package state or the process directly.
type cli struct {
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	getenv config.LookupEnv
	// build is the binary's build info (lisa version, the daemon).
	build buildinfo.Info
	// arm arms test hooks in the daemon (failpoints); nil in the
	// production binary.
	arm daemon.ArmFunc
	// demo changes the demo's options where no flag reaches (a test's
	// observer); nil in the production binary.
	demo func(*demo.Options)
}

// command is one entry of the dispatch table.
type command struct {
	name    string
	usage   string // flags synopsis, shown after the name
	summary string // one line for "lisa help"
	run     func(ctx context.Context, c *cli, args []string) int
}

// commands is the dispatch table. Adding a subcommand is adding an entry.
func commands() []command {
	return []command{
		{
			name:    "check-config",
			usage:   "--config FILE",
			summary: "validate a configuration file, its env: secrets and its persona file",
			run:     checkConfig,
		},
		{
			name:    "doctor",
			usage:   "--config FILE [--only SECTION,...]",
			summary: "check what Lisa needs, online: homeserver, rooms, LLM, SearXNG, converter, data dir (exit 0 ok, 1 warnings, 2 cannot work)",
			run:     doctorCmd,
		},
		{
			name:    "run",
			usage:   "--config FILE",
			summary: "run Lisa until SIGTERM or SIGINT",
			run:     runCmd,
		},
		{
			name:    "shell",
			usage:   "(--config FILE | --socket PATH) [--json]",
			summary: "debug shell of a running Lisa: actors, rooms, invocations, journal, health",
			run:     shellCmd,
		},
		{
			name:    "health",
			usage:   "(--config FILE | --socket PATH) [--json]",
			summary: "exit 0 healthy, 1 degraded, 2 failed or not reachable; prints a JSON summary",
			run:     healthCmd,
		},
		{
			name:    "backup",
			usage:   "--config FILE --to PATH",
			summary: "write a consistent snapshot of Lisa's data dir to a new file, while she runs or not",
			run:     backupCmd,
		},
		{
			name:    "restore",
			usage:   "--config FILE --from PATH",
			summary: "restore a backup into an empty data dir (Lisa stopped); she never answers twice after it",
			run:     restoreCmd,
		},
		{
			name:    "version",
			usage:   "[--json]",
			summary: "print the module version, VCS revision and time, modified flag and Go version of this binary",
			run:     versionCmd,
		},
		{
			name:    "demo",
			usage:   "[--homeserver dendrite|synapse] [--exit-after-transcript]",
			summary: "run Lisa on this machine: local Dendrite, a room, a scripted (or real) LLM",
			run:     demoCmd,
		},
	}
}

// run is the whole program minus process setup: it dispatches args (without
// the program name) to a command and returns the exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv config.LookupEnv) int {
	return runWith(ctx, &cli{stdin: stdin, stdout: stdout, stderr: stderr, getenv: getenv, build: buildinfo.Read()}, args)
}

// runWith is run with a prepared cli (tests arm failpoints through it).
func runWith(ctx context.Context, c *cli, args []string) int {
	stdout, stderr := c.stdout, c.stderr
	if len(args) == 0 {
		fmt.Fprintln(stderr, "lisa: missing command")
		printUsage(stderr)
		return exitUsage
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		printUsage(stdout)
		return exitOK
	}
	for _, cmd := range commands() {
		if cmd.name == args[0] {
			return cmd.run(ctx, c, args[1:])
		}
	}
	fmt.Fprintf(stderr, "lisa: unknown command %q\n", args[0])
	printUsage(stderr)
	return exitUsage
}

// printUsage lists the commands.
func printUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: lisa <command> [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "commands:")
	for _, cmd := range commands() {
		fmt.Fprintf(w, "  %-14s %s\n", cmd.name, cmd.summary)
		fmt.Fprintf(w, "  %-14s   lisa %s %s\n", "", cmd.name, cmd.usage)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, `Run "lisa <command> -h" for a command's flags.`)
}

// newFlagSet returns a flag set for cmd that reports to c.stderr and never
// exits the process.
func newFlagSet(c *cli, name, usage string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: lisa %s %s\n", name, usage)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args into fs and rejects positional arguments. When it
// returns false the command should return code.
func parseFlags(fs *flag.FlagSet, args []string) (code int, ok bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK, false
		}
		return exitUsage, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "lisa %s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		fs.Usage()
		return exitUsage, false
	}
	return exitOK, true
}
