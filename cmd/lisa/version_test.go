package main

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lisabot/lisa/buildinfo"
)

// TestVersionNamesTheRevision builds the binary from this checkout with
// VCS stamping (-buildvcs=true overrides a GOFLAGS=-buildvcs=false) and
// checks that `lisa version` names the commit checked out and the Go
// version, as text and as JSON.
func TestVersionNamesTheRevision(t *testing.T) {
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("not a git checkout (git rev-parse HEAD: %v): the revision cannot be compared", err)
	}
	rev := strings.TrimSpace(string(head))
	bin := filepath.Join(t.TempDir(), "lisa")
	if out, err := exec.Command("go", "build", "-buildvcs=true", "-o", bin, "github.com/lisabot/lisa/cmd/lisa").CombinedOutput(); err != nil {
		t.Fatalf("building lisa: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version", "--json").Output()
	if err != nil {
		t.Fatalf("lisa version --json: %v", err)
	}
	var info buildinfo.Info
	if err := json.Unmarshal(out, &info); err != nil {
		t.Fatalf("lisa version --json printed %q: %v", out, err)
	}
	if info.Revision != rev || info.Time == buildinfo.Unknown || !strings.HasPrefix(info.GoVersion, "go1.") {
		t.Fatalf("lisa version --json = %+v, want revision %s, a commit time and a Go version", info, rev)
	}
	text, err := exec.Command(bin, "version").Output()
	if err != nil || !strings.Contains(string(text), "revision "+rev) {
		t.Fatalf("lisa version printed %q (%v), want the revision %s", text, err, rev)
	}
}
