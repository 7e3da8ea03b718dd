package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lisabot/lisa/chaos"
	"github.com/lisabot/lisa/testkit/dendrite"
)

// TestMain lets the test binary stand in for lisa-chaos: a campaign runs
// its own executable as `lisa-chaos run --config FILE`.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "run" {
		os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr, os.LookupEnv))
	}
	os.Exit(m.Run())
}

// TestFailedCampaignKeepsItsLogs: a campaign that fails (here: Lisa
// refuses to start, for pandoc is not on her PATH) keeps its temporary
// directory with the campaign's log and Lisa's, and says where they are.
func TestFailedCampaignKeepsItsLogs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin, err := dendrite.EnsureBinary(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	t.Setenv("LISA_DENDRITE_BIN", bin)
	t.Setenv("PATH", t.TempDir()) // Lisa's environment: no pandoc
	var stdout, stderr bytes.Buffer
	if code := campaign(ctx, []string{"--seed", "1", "--duration", "1s"}, &stdout, &stderr); code != exitFailure {
		t.Fatalf("exit code %d, want %d; stderr:\n%s", code, exitFailure, &stderr)
	}
	dirs, _ := filepath.Glob(filepath.Join(tmp, "lisa-chaos-*"))
	if len(dirs) != 1 {
		t.Fatalf("working directories left: %v, want the failed campaign's", dirs)
	}
	campaignLog, lisaLog := filepath.Join(dirs[0], chaos.CampaignLog), filepath.Join(dirs[0], chaos.LisaLog)
	if !strings.Contains(stderr.String(), "its logs are kept: "+campaignLog+", "+lisaLog) {
		t.Errorf("stderr does not name the kept logs:\n%s", &stderr)
	}
	if b, err := os.ReadFile(lisaLog); err != nil || !strings.Contains(string(b), "cannot start: html_to_markdown has no converter") {
		t.Errorf("lisa.log (%v) lacks her refusal", err)
	}
	if b, err := os.ReadFile(campaignLog); err != nil || !strings.Contains(string(b), "starting Dendrite") {
		t.Errorf("campaign.log (%v) lacks the campaign's progress", err)
	}
}

// TestFinish: a temporary directory goes only when the campaign passed;
// one given with --dir always stays.
func TestFinish(t *testing.T) {
	for _, tc := range []struct {
		name              string
		temporary, passed bool
		kept              bool
		says              string
	}{
		{name: "temporary, passed", temporary: true, passed: true, kept: false},
		{name: "temporary, failed", temporary: true, passed: false, kept: true, says: "its logs are kept"},
		{name: "--dir, passed", temporary: false, passed: true, kept: true},
		{name: "--dir, failed", temporary: false, passed: false, kept: true, says: "its logs are kept"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			work := filepath.Join(t.TempDir(), "work")
			if err := os.MkdirAll(work, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(work, chaos.LisaLog), []byte("{}\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			var stderr bytes.Buffer
			kept := finish(work, tc.temporary, tc.passed, &stderr)
			_, statErr := os.Stat(filepath.Join(work, chaos.LisaLog))
			if kept != tc.kept || (statErr == nil) != tc.kept {
				t.Errorf("kept = %v, log present = %v; want %v", kept, statErr == nil, tc.kept)
			}
			if !strings.Contains(stderr.String(), tc.says) || (tc.says == "" && stderr.Len() > 0) {
				t.Errorf("stderr = %q, want %q", &stderr, tc.says)
			}
		})
	}
}

// TestHomeserverFlag: --homeserver takes exactly one known name; anything
// else is a usage error naming the known ones, before any campaign runs.
func TestHomeserverFlag(t *testing.T) {
	for _, tc := range []struct {
		value, says string
	}{
		{"conduit", `unknown homeserver "conduit" (known: dendrite, synapse)`},
		{"", "--homeserver names one of dendrite, synapse"},
		{"dendrite,synapse", "--homeserver names one of dendrite, synapse"},
	} {
		t.Run(tc.value, func(t *testing.T) {
			t.Setenv("TMPDIR", t.TempDir())
			var stdout, stderr bytes.Buffer
			code := campaign(context.Background(), []string{"--homeserver", tc.value, "--duration", "1s"}, &stdout, &stderr)
			if code != exitUsage {
				t.Fatalf("exit code %d, want %d (usage); stderr:\n%s", code, exitUsage, &stderr)
			}
			if !strings.Contains(stderr.String(), tc.says) {
				t.Errorf("stderr = %q, want it to say %q", &stderr, tc.says)
			}
			if stdout.Len() > 0 {
				t.Errorf("a campaign began: %q", &stdout)
			}
		})
	}
	// The flag's help names both servers.
	var stderr bytes.Buffer
	if code := campaign(context.Background(), []string{"-h"}, io.Discard, &stderr); code != exitOK {
		t.Fatalf("-h: exit code %d", code)
	}
	if !strings.Contains(stderr.String(), "-homeserver") || !strings.Contains(stderr.String(), "dendrite or synapse") {
		t.Errorf("help does not describe --homeserver:\n%s", &stderr)
	}
}

// TestHomeserverNames: the names the flag accepts, case and spaces ignored.
func TestHomeserverNames(t *testing.T) {
	for in, want := range map[string]string{"dendrite": "dendrite", " Synapse ": "synapse"} {
		got, err := homeserverName(in)
		if err != nil || got != want {
			t.Errorf("homeserverName(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}
