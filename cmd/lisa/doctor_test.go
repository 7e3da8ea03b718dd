package main

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/lisabot/lisa/persistence"
)

// TestDoctorCommand: `lisa doctor` prints one line per check (status,
// section, finding, fix) and a summary, and exits 0 when all is well, 1
// with warnings and 2 when Lisa cannot work or the usage is wrong; no
// secret reaches its output. (The online checks are tested against
// Dendrite and the fakes in package doctor.)
func TestDoctorCommand(t *testing.T) {
	line := regexp.MustCompile(`^(ok|warning|failed|skipped) +(config|datadir|admin) +\S`)
	check := func(t *testing.T, r result, code int, want ...string) {
		t.Helper()
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		for _, l := range lines[:len(lines)-1] {
			if !line.MatchString(l) {
				t.Errorf("line %q is not status, section, message", l)
			}
		}
		if !strings.HasPrefix(lines[len(lines)-1], "doctor: ") {
			t.Errorf("no summary line:\n%s", r.stdout)
		}
		for _, w := range want {
			if !strings.Contains(r.stdout, w) {
				t.Errorf("no %q in:\n%s", w, r.stdout)
			}
		}
		if r.code != code {
			t.Errorf("exit %d, want %d:\n%s%s", r.code, code, r.stdout, r.stderr)
		}
		assertNoCanaries(t, "doctor output", r.stdout, r.stderr)
	}

	t.Run("all ok: exit 0", func(t *testing.T) {
		p := writeCanaryConfig(t, "env:LISA_MATRIX_ACCESS_TOKEN")
		r := runLisa(t, canaryEnv(), "doctor", "--config", p, "--only", "config,datadir,admin")
		check(t, r, exitOK, "ok       config      ", "ok       datadir     ", "ok       admin       ",
			"doctor: 5 ok: Lisa can work with this configuration")
	})

	t.Run("warnings: exit 1", func(t *testing.T) {
		p := writeCanaryConfig(t, "env:LISA_MATRIX_ACCESS_TOKEN")
		store, err := persistence.OpenBadger(filepath.Join(filepath.Dir(p), "state"), persistence.BadgerOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		r := runLisa(t, canaryEnv(), "doctor", "--config", p, "--only", "datadir")
		check(t, r, 1, "warning  datadir     ", "(its LOCK file)", " — fix: ", "doctor: 2 ok, 1 warning: Lisa can work, but look at the warnings")
	})

	t.Run("cannot work: exit 2", func(t *testing.T) {
		p := writeCanaryConfig(t, canaryLiteral)
		r := runLisa(t, canaryEnv(), "doctor", "--config", p)
		check(t, r, exitUsage, "failed   config      ", "fix: matrix.access_token", "Lisa cannot work like this")
	})

	t.Run("usage: exit 2", func(t *testing.T) {
		p := writeCanaryConfig(t, "env:LISA_MATRIX_ACCESS_TOKEN")
		for _, args := range [][]string{{"doctor"}, {"doctor", "--config", p, "--only", "dns"}, {"doctor", "--config", p, "extra"}} {
			r := runLisa(t, canaryEnv(), args...)
			if r.code != exitUsage || r.stdout != "" || !strings.Contains(r.stderr, "usage: lisa doctor --config FILE") {
				t.Errorf("%v: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
			}
		}
	})
}
