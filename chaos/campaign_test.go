package chaos

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lisabot/lisa/testkit/dendrite"
	"github.com/lisabot/lisa/testkit/homeserver"
	"github.com/lisabot/lisa/testkit/need"
)

// lisaBin is the lisa binary built for the campaign (see TestMain).
var lisaBin string

// TestMain builds cmd/lisa-chaos (Lisa with failpoints and fault injection) once, with the race detector when the tests
// have it, so the campaign runs Lisa as a real process it can SIGKILL.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "lisa-chaos-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	lisaBin = filepath.Join(dir, "lisa-chaos")
	args := []string{"build", "-o", lisaBin}
	if raceEnabled {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, "github.com/lisabot/lisa/cmd/lisa-chaos")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building lisa:", err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// campaignSeed is LISA_CHAOS_SEED, or a fixed seed so CI runs are
// comparable; a failing seed is printed for replay.
func campaignSeed(t *testing.T) uint64 {
	if s := os.Getenv("LISA_CHAOS_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("LISA_CHAOS_SEED: %v", err)
		}
		return v
	}
	return 20261202
}

// TestCICampaign is the short campaign of the reliability issue, on each
// homeserver of testkit/homeserver.List (Dendrite, and Synapse where it can
// run or LISA_REQUIRE_SYNAPSE=1 asks for it; LISA_HOMESERVERS chooses): at
// least 200 actor faults, 20 process kills and 5 homeserver restarts across
// at least 100 invocations in 3 rooms, with network faults on both the
// homeserver and the LLM link — and then 0 duplicates, 0 losses, nothing
// else answered, journals replaying to the live state, no leaked actors
// or goroutines and no typing left on.
//
// The servers' campaigns run in parallel: most of Dendrite's is its
// quiet phase waiting out its late-store window, and one after the other
// they would take the package past 10 minutes under -race on 2 cores.
func TestCICampaign(t *testing.T) {
	need.SetConverterEnv(t) // Lisa's environment: the built-in converter where pandoc is missing
	seed := campaignSeed(t)
	for _, name := range homeserver.List(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ciCampaign(t, name, seed)
		})
	}
}

// ciCampaign runs the CI campaign against the homeserver name.
func ciCampaign(t *testing.T, name string, seed uint64) {
	t.Logf("chaos seed %d on %s (replay: LISA_CHAOS_SEED=%d LISA_HOMESERVERS=%s go test -run 'TestCICampaign/%s' ./chaos)", seed, name, seed, name, name)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	dir := keptIfFailed(t)
	if keep := os.Getenv("LISA_CHAOS_DIR"); keep != "" { // keep logs and data for debugging
		dir = filepath.Join(keep, name)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	cfg := CIConfig(seed, dir, func(args ...string) *exec.Cmd { return exec.Command(lisaBin, args...) })
	cfg.Homeserver = name
	cfg.Progress = testWriter{t}
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatalf("campaign did not run: %v", err)
	}
	var text = &lineBuffer{}
	rep.WriteText(text)
	t.Logf("report:\n%s", text)
	if keep := os.Getenv("LISA_CHAOS_DIR"); keep != "" {
		if err := os.WriteFile(filepath.Join(dir, "report.txt"), []byte(text.String()), 0o600); err != nil {
			t.Error(err)
		}
	}
	if rep.Homeserver != name || rep.HomeserverVersion == "" {
		t.Errorf("report names homeserver %q %q, want %s and its version", rep.Homeserver, rep.HomeserverVersion, name)
	}
	m := cfg.Min
	if rep.Invocations < m.Invocations || rep.TotalActorFaults < m.ActorFaults || rep.TotalKills < m.Kills || rep.HomeserverRestarts < m.HomeserverRestarts {
		t.Errorf("campaign too small: %+v", rep)
	}
	for _, k := range RelationKinds() {
		if rep.Kinds[k] < m.EachRelation {
			t.Errorf("%d messages of kind %q, want at least %d", rep.Kinds[k], k, m.EachRelation)
		}
	}
	if rep.Duplicates != 0 || rep.Losses != 0 || rep.Unexpected != 0 || rep.AnsweredRedacted != 0 {
		t.Errorf("duplicates %d, losses %d, unexpected %d, answered redacted %d", rep.Duplicates, rep.Losses, rep.Unexpected, rep.AnsweredRedacted)
	}
	if rep.RoomsReplayed != cfg.Rooms {
		t.Errorf("journal replay matched in %d of %d rooms", rep.RoomsReplayed, cfg.Rooms)
	}
	checkExitsExplained(t, rep)
	checkLogs(t, rep, dir)
	if !rep.OK() {
		logTail(t, filepath.Join(dir, "lisa.log"))
		t.Fatalf("invariants violated (seed %d, %s):\n%s", seed, name, text)
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

type lineBuffer struct{ b []byte }

func (l *lineBuffer) Write(p []byte) (int, error) { l.b = append(l.b, p...); return len(p), nil }
func (l *lineBuffer) String() string              { return string(l.b) }

// logTail prints the end of Lisa's log for a failed campaign.
func logTail(t *testing.T, path string) {
	b, err := os.ReadFile(path)
	if err != nil {
		return
	}
	if len(b) > 30000 {
		b = b[len(b)-30000:]
	}
	t.Logf("end of lisa.log:\n%s", b)
}

// TestLisaThatCannotStartEndsTheCampaign: a Lisa that refuses to start
// (here: pandoc is not on her PATH) ends the campaign at once with her own
// error, instead of being restarted until a deadline.
func TestLisaThatCannotStartEndsTheCampaign(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin, err := dendrite.EnsureBinary(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := CIConfig(1, t.TempDir(), func(args ...string) *exec.Cmd { return exec.Command(lisaBin, args...) })
	cfg.DendriteBinary = bin
	t.Setenv("PATH", t.TempDir()) // Lisa's environment: no pandoc
	_, err = Run(ctx, cfg)
	if err == nil || !strings.Contains(err.Error(), "refused to start") || !strings.Contains(err.Error(), "pandoc") {
		t.Fatalf("campaign error = %v, want Lisa's refusal naming pandoc", err)
	}
	// The campaign that did not run left both logs in its directory.
	lisaLog, err := os.ReadFile(filepath.Join(cfg.Dir, LisaLog))
	if err != nil || !strings.Contains(string(lisaLog), "cannot start: html_to_markdown has no converter") {
		t.Errorf("lisa.log (%v) lacks her refusal", err)
	}
	campaignLog, err := os.ReadFile(filepath.Join(cfg.Dir, CampaignLog))
	if err != nil || !strings.Contains(string(campaignLog), "starting Dendrite") {
		t.Errorf("campaign.log (%v) lacks the campaign's progress", err)
	}
}

// keptIfFailed is a directory for a campaign that is removed after the
// test unless it failed: a failed campaign keeps its logs and data, and
// the test says where.
func keptIfFailed(t *testing.T) string {
	dir, err := os.MkdirTemp("", "lisa-chaos-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the failed campaign's logs are kept: %s, %s", filepath.Join(dir, CampaignLog), filepath.Join(dir, LisaLog))
			return
		}
		_ = os.RemoveAll(dir)
	})
	return dir
}

// checkExitsExplained: every exit of Lisa's own has a named cause, and
// the report lists them all.
func checkExitsExplained(t *testing.T, rep *Report) {
	t.Helper()
	own := 0
	for status, n := range rep.Exits {
		if strings.HasPrefix(status, "exit:") || strings.HasPrefix(status, "signal:") || strings.HasPrefix(status, "sigterm:") {
			own += n
		}
	}
	if got := rep.OwnExitCount(); got != own {
		t.Errorf("the report explains %d of Lisa's %d own exits (exits %v, causes %+v)", got, own, rep.Exits, rep.OwnExits)
	}
	var text strings.Builder
	rep.WriteText(&text)
	for _, e := range rep.OwnExits {
		if e.Name == "" || e.Detail == "" || e.FirstLaunch < 1 {
			t.Errorf("cause without a name, detail or launch: %+v", e)
		}
		if !strings.Contains(text.String(), fmt.Sprintf("%d × %s", e.Count, e.Name)) {
			t.Errorf("the report's text does not list %d × %s", e.Count, e.Name)
		}
	}
}

// checkLogs: the campaign's own log and Lisa's are in the directory the
// report names, with one launch mark per Lisa start.
func checkLogs(t *testing.T, rep *Report, dir string) {
	t.Helper()
	if rep.LogDir != dir {
		t.Errorf("report's log directory %q, want %q", rep.LogDir, dir)
	}
	campaignLog, err := os.ReadFile(filepath.Join(dir, CampaignLog))
	if err != nil || !strings.Contains(string(campaignLog), "traffic and faults begin") {
		t.Errorf("campaign log (%v) lacks its progress", err)
	}
	lisaLog, err := os.ReadFile(filepath.Join(dir, LisaLog))
	if err != nil {
		t.Fatal(err)
	}
	// (LISA_CHAOS_DIR may hold earlier campaigns too.)
	if n := strings.Count(string(lisaLog), `"msg":"`+logLaunch+`"`); n < rep.LisaStarts || (os.Getenv("LISA_CHAOS_DIR") == "" && n != rep.LisaStarts) {
		t.Errorf("lisa.log marks %d launches, the report counts %d starts", n, rep.LisaStarts)
	}
}
