package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lisabot/lisa/testkit/need"
)

// unitPath is the systemd unit shipped in deploy/.
const unitPath = "../../deploy/lisa.service"

// unitSettings returns the unit's Key=value lines (comments and sections
// left out); a key set twice keeps every value.
func unitSettings(t *testing.T, text string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == '[' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("unit line %q is not Key=value", line)
		}
		out[k] = append(out[k], v)
	}
	return out
}

// TestSystemdUnit (#33): deploy/lisa.service has what docs/operations.md
// promises (a dedicated user, restart on failure, the state directory,
// the hardening, secrets from an environment file, Type=simple because
// Lisa sends no READY=1), docs/operations.md shows it unchanged, and
// systemd-analyze verify accepts it without a word.
func TestSystemdUnit(t *testing.T) {
	raw, err := os.ReadFile(unitPath)
	if err != nil {
		t.Fatal(err)
	}
	unit := string(raw)
	got := unitSettings(t, unit)
	for k, want := range map[string]string{
		"Type":                    "simple",
		"User":                    "lisa",
		"Group":                   "lisa",
		"ExecStart":               "/usr/local/bin/lisa run --config /etc/lisa/lisa.toml",
		"Restart":                 "on-failure",
		"StateDirectory":          "lisa",
		"StateDirectoryMode":      "0700",
		"NoNewPrivileges":         "yes",
		"ProtectSystem":           "strict",
		"ProtectHome":             "yes",
		"PrivateTmp":              "yes",
		"ReadWritePaths":          "/var/lib/lisa",
		"RestrictAddressFamilies": "AF_UNIX AF_INET AF_INET6",
		"EnvironmentFile":         "/etc/lisa/lisa.env",
		"CapabilityBoundingSet":   "",
	} {
		if v := got[k]; len(v) != 1 || v[0] != want {
			t.Errorf("%s = %q, want exactly %q", k, v, want)
		}
	}
	docs, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(docs), "```ini\n"+unit+"```\n") {
		t.Errorf("docs/operations.md does not show deploy/lisa.service as it is")
	}

	need.Systemd(t)
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Fatal(err)
	}
	// verify checks that ExecStart is executable: point it at this test
	// binary.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	copyUnit := filepath.Join(dir, "lisa.service")
	if err := os.WriteFile(copyUnit, []byte(strings.ReplaceAll(unit, "/usr/local/bin/lisa ", self+" ")), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", copyUnit).CombinedOutput()
	// verify reports unknown keys and bad values without failing: any
	// output is a finding.
	if err != nil || len(out) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}

	// The check itself catches a mistake.
	bad := strings.Replace(unit, "ProtectHome=yes", "ProtectHom=yes", 1)
	if err := os.WriteFile(copyUnit, []byte(strings.ReplaceAll(bad, "/usr/local/bin/lisa ", self+" ")), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, _ := exec.Command(analyze, "verify", copyUnit).CombinedOutput(); !strings.Contains(string(out), "ProtectHom") {
		t.Fatalf("systemd-analyze verify did not flag a misspelt key: %s", out)
	}
}
