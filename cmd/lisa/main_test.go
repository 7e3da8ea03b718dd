package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// result is what one run of the program produced.
type result struct {
	code           int
	stdout, stderr string
}

// runLisa runs the program with args and an environment holding exactly env.
func runLisa(t *testing.T, env map[string]string, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, strings.NewReader(""), &stdout, &stderr, lookupFrom(env))
	return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

func TestDispatch(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		code     int
		stdout   string
		stderr   string
		noStdout bool
		noStderr bool
	}{
		{name: "no command", args: nil, code: exitUsage, stderr: "missing command", noStdout: true},
		{name: "unknown command", args: []string{"frobnicate"}, code: exitUsage, stderr: `unknown command "frobnicate"`, noStdout: true},
		{name: "help", args: []string{"help"}, code: exitOK, stdout: "check-config", noStderr: true},
		{name: "dash h", args: []string{"-h"}, code: exitOK, stdout: "usage: lisa", noStderr: true},
		{name: "check-config without flag", args: []string{"check-config"}, code: exitUsage, stderr: "--config flag is required", noStdout: true},
		{name: "check-config empty flag", args: []string{"check-config", "--config", ""}, code: exitUsage, stderr: "--config flag is required", noStdout: true},
		{name: "check-config unknown flag", args: []string{"check-config", "--cfg", "x"}, code: exitUsage, stderr: "flag provided but not defined", noStdout: true},
		{name: "check-config extra argument", args: []string{"check-config", "--config", "a.toml", "b.toml"}, code: exitUsage, stderr: `unexpected argument "b.toml"`, noStdout: true},
		{name: "version", args: []string{"version"}, code: exitOK, stdout: "built with go", noStderr: true},
		{name: "version extra argument", args: []string{"version", "x"}, code: exitUsage, stderr: `unexpected argument "x"`, noStdout: true},
		{name: "check-config help", args: []string{"check-config", "-h"}, code: exitOK, stderr: "usage: lisa check-config --config FILE", noStdout: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runLisa(t, nil, tt.args...)
			if r.code != tt.code {
				t.Errorf("exit code %d, want %d\nstdout: %s\nstderr: %s", r.code, tt.code, r.stdout, r.stderr)
			}
			if !strings.Contains(r.stdout, tt.stdout) || !strings.Contains(r.stderr, tt.stderr) {
				t.Errorf("output lacks %q / %q\nstdout: %s\nstderr: %s", tt.stdout, tt.stderr, r.stdout, r.stderr)
			}
			if tt.noStdout && r.stdout != "" || tt.noStderr && r.stderr != "" {
				t.Errorf("unexpected output\nstdout: %s\nstderr: %s", r.stdout, r.stderr)
			}
		})
	}
}

func TestUsageListsEveryCommand(t *testing.T) {
	r := runLisa(t, nil, "help")
	seen := map[string]bool{}
	for _, cmd := range commands() {
		if seen[cmd.name] {
			t.Errorf("command %q registered twice", cmd.name)
		}
		seen[cmd.name] = true
		if !strings.Contains(r.stdout, cmd.name) || !strings.Contains(r.stdout, cmd.summary) {
			t.Errorf("usage lacks %q", cmd.name)
		}
	}
}
