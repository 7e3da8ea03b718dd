package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/lisabot/lisa/doctor"
)

// doctorCmd is `lisa doctor --config FILE [--only SECTIONS]`: the checks
// of package doctor, one line each, then a summary. Exit 0 all ok, 1
// warnings, 2 Lisa cannot work (or bad usage).
func doctorCmd(ctx context.Context, c *cli, args []string) int {
	usage := "--config FILE [--only SECTION,...]"
	fs := newFlagSet(c, "doctor", usage)
	path := fs.String("config", "", "the TOML configuration `FILE` (required)")
	only := fs.String("only", "", "run only these comma-separated `SECTIONS`: "+strings.Join(doctor.SectionNames(), ", "))
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if *path == "" {
		fmt.Fprintln(c.stderr, "lisa doctor: the --config flag is required")
		fs.Usage()
		return exitUsage
	}
	var sections []string
	if *only != "" {
		sections = strings.Split(*only, ",")
	}
	rep, err := doctor.Run(ctx, doctor.Options{ConfigPath: *path, Getenv: c.getenv, Only: sections,
		OnResult: func(r doctor.Result) { printResult(c.stdout, r) }})
	if errors.Is(err, doctor.ErrUnknownSection) {
		fmt.Fprintf(c.stderr, "lisa doctor: %v\n", err)
		fs.Usage()
		return exitUsage
	}
	fmt.Fprintln(c.stdout, summary(rep))
	return rep.Code()
}

// printResult prints one result: status, section, what was found and
// what to change.
func printResult(w io.Writer, r doctor.Result) {
	line := fmt.Sprintf("%-8s %-11s %s", r.Status, r.Section, r.Message)
	if r.Fix != "" {
		line += " — fix: " + r.Fix
	}
	fmt.Fprintln(w, line)
}

// summary is the last line: the counts and what the exit code means.
func summary(rep doctor.Report) string {
	var counts []string
	for _, c := range []struct {
		s          doctor.Status
		one, other string
	}{{doctor.OK, "ok", "ok"}, {doctor.Warning, "warning", "warnings"}, {doctor.Failed, "failed", "failed"}, {doctor.Skipped, "skipped", "skipped"}} {
		switch n := rep.Count(c.s); n {
		case 0:
		case 1:
			counts = append(counts, "1 "+c.one)
		default:
			counts = append(counts, fmt.Sprintf("%d %s", n, c.other))
		}
	}
	head := "doctor: " + strings.Join(counts, ", ")
	switch rep.Code() {
	case doctor.ExitOK:
		return head + ": Lisa can work with this configuration"
	case doctor.ExitWarnings:
		return head + ": Lisa can work, but look at the warnings"
	}
	return head + ": Lisa cannot work like this; fix what failed"
}
