package chaos

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// logLine is one line of Lisa's JSON log.
func logLine(t *testing.T, level, msg string, attrs ...string) string {
	t.Helper()
	rec := map[string]string{"time": time.Now().UTC().Format(time.RFC3339Nano), "level": level, "msg": msg}
	for i := 0; i+1 < len(attrs); i += 2 {
		rec[attrs[i]] = attrs[i+1]
	}
	b, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// fakeLisa runs a process that writes lines to stderr as Lisa would and
// exits with code, and waits for it.
func fakeLisa(t *testing.T, logPath string, launch int, lines []string, code int) *lisaProc {
	t.Helper()
	script := filepath.Join(t.TempDir(), "out")
	if err := os.WriteFile(script, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-c", `cat "$1" >&2; exit "$2"`, "sh", script, itoa(code))
	p, err := startLisa(cmd, logPath, launch)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		p.kill()
		t.Fatal("fake lisa did not exit")
	}
	return p
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// TestOwnExitCauses: each way Lisa can end by herself is named from her
// log, by design or not, with IDs normalised away.
func TestOwnExitCauses(t *testing.T) {
	lost := func(actor string) string { return logLine(t, "ERROR", logLost, "actor", actor) }
	fault := func(actor, kind string) string {
		return logLine(t, "WARN", logFault, "kind", kind, "actor", actor, "message", "*syncer.fetched")
	}
	panicked := func(actor, text string) string {
		return logLine(t, "ERROR", logPanicked, "actor", actor, "panic", text, "stack", "goroutine 1 [running]")
	}
	for _, tc := range []struct {
		name     string
		lines    []string
		code     int
		want     string // ExitCause.Name
		byDesign bool
		detail   string // substring of the detail
		status   string
	}{
		{name: "stop fault on sync", code: 1, want: ExitActorStopped, byDesign: true, status: "exit:1",
			detail: "sync stopped by an injected stop-after-send fault",
			lines: []string{fault("app/sync", "stop-after-send"), panicked("app/rooms/Op8y71FQeBpq", "chaos: injected panic-on-receive"), lost("sync"),
				panicked("app/rooms", "chaos: injected panic-before-send")}},
		{name: "injected panics exhaust rooms", code: 1, want: ExitActorFailing, byDesign: true, status: "exit:1",
			detail: "rooms exhausted its restarts under injected panics",
			lines: []string{fault("app/rooms", "panic-on-receive"), panicked("app/rooms", "chaos: injected panic-on-receive"),
				fault("app/rooms/Op8y71FQeBpq", "stop-after-send"), lost("rooms")}},
		{name: "a real panic loses sync", code: 1, want: ExitActorLost, status: "exit:1",
			detail: "sync lost after a panic that was not injected: runtime error: index out of range [N] with length 0",
			lines:  []string{fault("app/sync", "panic-on-receive"), panicked("app/sync", "runtime error: index out of range [1234] with length 0"), lost("sync")}},
		{name: "lost without a fault", code: 1, want: ExitActorLost, status: "exit:1",
			detail: "tools stopped for good with no fault injected into it",
			lines:  []string{fault("app/tools/w1", "stop-after-send"), lost("tools")}},
		{name: "store sync failure", code: 1, want: ExitStoreSync, byDesign: true, status: "exit:1",
			detail: "code=store_sync_failed err=fsync data/N.vlog: input/output error",
			lines:  []string{logLine(t, "ERROR", "store sync failed; Lisa stops sending and exits", "code", "store_sync_failed", "err", "fsync data/000001.vlog: input/output error")}},
		{name: "store sync failure, then more errors on the way out", code: 1, want: ExitStoreSync, byDesign: true, status: "exit:1",
			detail: "the store could not sync to disk; it accepts no more writes and nothing more is sent code=store_sync_failed err=sync: input/output error",
			lines: []string{logLine(t, "ERROR", "the store could not sync to disk; it accepts no more writes and nothing more is sent", "code", "store_sync_failed", "err", "sync: input/output error"),
				logLine(t, "ERROR", "shutdown incomplete", "err", "persistence: store sync failed earlier")}},
		{name: "lost actor, then a failed shutdown", code: 1, want: ExitActorStopped, byDesign: true, status: "exit:1",
			detail: "rooms stopped by an injected stop-after-send fault",
			lines:  []string{fault("app/rooms", "stop-after-send"), lost("rooms"), logLine(t, "ERROR", "shutdown incomplete", "err", "app: actors did not stop in time")}},
		{name: "no pandoc", code: 1, want: ExitStartRefused, byDesign: true, status: "exit:1",
			detail: "cannot start: html_to_markdown has no converter",
			lines: []string{logLine(t, "ERROR", "cannot start: html_to_markdown has no converter", "err",
				`web.converter: pandoc executable "pandoc" was not found or is not executable; install pandoc 2.15 or newer (Debian package pandoc), or set web.converter = "builtin"`)}},
		{name: "pandoc check cut short", code: 1, want: ExitUnexplained, status: "exit:1",
			detail: "cannot start: html_to_markdown has no converter err=web.converter: running \"/usr/bin/pandoc\" --version failed: The conversion was cancelled.",
			lines:  []string{logLine(t, "ERROR", "cannot start: html_to_markdown has no converter", "err", `web.converter: running "/usr/bin/pandoc" --version failed: The conversion was cancelled.`)}},
		{name: "whoami mismatch", code: 1, want: ExitStartRefused, byDesign: true, status: "exit:1",
			detail: "access token belongs to @user device ID",
			lines: []string{logLine(t, "ERROR", "cannot start: Matrix session check failed",
				"err", "matrix: access token belongs to @lisa:localhost device OTHER1, but the configuration says @lisa:localhost device LISACHAOS")}},
		{name: "refusal on a homeserver fault", code: 1, want: ExitUnexplained, status: "exit:1",
			detail: "cannot start: Matrix session check failed err=matrix: whoami: homeserver rejected the request (404 M_UNRECOGNIZED)",
			lines:  []string{logLine(t, "ERROR", "cannot start: Matrix session check failed", "err", "matrix: whoami: homeserver rejected the request (404 M_UNRECOGNIZED)")}},
		{name: "go runtime panic", code: 2, want: ExitGoPanic, status: "exit:2",
			detail: "panic: runtime error: invalid memory address or nil pointer dereference",
			lines:  []string{logLine(t, "INFO", logReady), "panic: runtime error: invalid memory address or nil pointer dereference", "[signal SIGSEGV: segmentation violation code=0x1 addr=0x0 pc=0x4a1b2c]", "", "goroutine 77 [running]:"}},
		{name: "silent exit", code: 3, want: ExitUnexplained, status: "exit:3", detail: "no ERROR line in her log",
			lines: []string{logLine(t, "INFO", logReady), logLine(t, "ERROR", logLeakCheck, "leaked", "1")}},
		{name: "last error wins", code: 1, want: ExitUnexplained, status: "exit:1",
			detail: "shutdown incomplete err=app: actors did not stop in time: context deadline exceeded",
			lines:  []string{logLine(t, "ERROR", "cannot start: pandoc is needed for html_to_markdown"), logLine(t, "ERROR", "shutdown incomplete", "err", "app: actors did not stop in time: context deadline exceeded")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logPath := filepath.Join(t.TempDir(), LisaLog)
			p := fakeLisa(t, logPath, 7, tc.lines, tc.code)
			got, ok := p.ownExit()
			if !ok {
				t.Fatalf("exit %s not counted as her own", p.cause())
			}
			if got.Name != tc.want || got.ByDesign != tc.byDesign || got.Status != tc.status || !strings.Contains(got.Detail, tc.detail) {
				t.Errorf("cause = %+v, want name %s, by design %v, status %s, detail containing %q", got, tc.want, tc.byDesign, tc.status, tc.detail)
			}
			b, err := os.ReadFile(logPath)
			if err != nil {
				t.Fatal(err)
			}
			first, _, _ := bytes.Cut(b, []byte("\n"))
			var mark struct {
				Msg    string `json:"msg"`
				Launch int    `json:"launch"`
				PID    int    `json:"pid"`
			}
			if err := json.Unmarshal(first, &mark); err != nil || mark.Msg != logLaunch || mark.Launch != 7 || mark.PID == 0 {
				t.Errorf("first line of lisa.log = %s, want the launch mark of launch 7", first)
			}
			if !bytes.Contains(b, []byte(tc.lines[len(tc.lines)-1])) {
				t.Errorf("lisa.log lacks the process's last line")
			}
		})
	}
}

// TestExitsTheCampaignCausedAreNotHers: a SIGKILL, a failpoint kill and a
// clean stop on SIGTERM are the campaign's doing; a failed stop is hers.
func TestExitsTheCampaignCausedAreNotHers(t *testing.T) {
	dir := t.TempDir()
	start := func(script string) *lisaProc {
		p, err := startLisa(exec.Command("sh", "-c", script), filepath.Join(dir, LisaLog), 1)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	// Echo a ready line, then wait for a signal: sh runs its trap after
	// the foreground sleep ends, so sleep in the background and wait.
	ready := logLine(t, "INFO", logReady)
	awaitReady := func(p *lisaProc) {
		t.Helper()
		select {
		case <-p.ready:
		case <-time.After(30 * time.Second):
			p.kill()
			t.Fatal("not ready")
		}
	}

	killed := start(`echo '` + ready + `' >&2; sleep 60 >/dev/null 2>&1 & wait`)
	awaitReady(killed)
	killed.kill()
	if c, own := killed.ownExit(); own || killed.cause() != "sigkill" {
		t.Errorf("SIGKILL by the campaign: cause %s, own %v (%+v)", killed.cause(), own, c)
	}

	failpoint := start(`echo '` + logLine(t, "WARN", logKill, "failpoint", FailBeforeSend) + `' >&2; kill -9 $$`)
	<-failpoint.done
	if _, own := failpoint.ownExit(); own || failpoint.cause() != "failpoint:"+FailBeforeSend {
		t.Errorf("failpoint kill: cause %s, own %v", failpoint.cause(), own)
	}

	clean := start(`trap 'exit 0' TERM; echo '` + ready + `' >&2; sleep 60 >/dev/null 2>&1 & wait`)
	awaitReady(clean)
	if err := clean.stop(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	if _, own := clean.ownExit(); own || clean.cause() != "stopped" {
		t.Errorf("clean stop: cause %s, own %v", clean.cause(), own)
	}

	failed := start(`trap 'echo '"'"'` + logLine(t, "ERROR", "shutdown incomplete", "err", "app: actors did not stop in time") + `'"'"' >&2; exit 1' TERM; echo '` + ready + `' >&2; sleep 60 >/dev/null 2>&1 & wait`)
	awaitReady(failed)
	if err := failed.stop(30 * time.Second); err == nil {
		t.Error("a failed stop returned no error")
	}
	c, own := failed.ownExit()
	if !own || c.Status != "sigterm:exit:1" || c.Name != ExitUnexplained || !strings.Contains(c.Detail, "shutdown incomplete") {
		t.Errorf("failed stop: own %v, cause %+v", own, c)
	}
}

// TestNormalisedCausesGroup: two exits that differ only in IDs,
// addresses, times and large numbers are one cause; the report lists it
// with its count, bugs first, and a bug is a violation.
func TestNormalisedCausesGroup(t *testing.T) {
	dir := t.TempDir()
	c := &campaign{report: &Report{}, ownExits: exitCauses{}}
	for i, err := range []string{
		`matrix: whoami: Get "http://127.0.0.1:38211/_matrix/client/v3/account/whoami": dial tcp 127.0.0.1:38211: connect: connection refused (txn lisa-Op8y71FQeBpq-1733430000123, room !AbCdEf:localhost, event $Xyz_123-abc, at 2026-12-05T21:41:21.666Z after 1.5s)`,
		`matrix: whoami: Get "http://127.0.0.1:40999/_matrix/client/v3/account/whoami": dial tcp 127.0.0.1:40999: connect: connection refused (txn lisa-LU9PLYZEsNS0-1733430999999, room !QqQq:localhost, event $Other-99, at 2026-12-05T22:01:01Z after 12.25s)`,
	} {
		p := fakeLisa(t, filepath.Join(dir, LisaLog), i+3, []string{logLine(t, "ERROR", "cannot start: Matrix session check failed", "err", err)}, 1)
		own, ok := p.ownExit()
		if !ok {
			t.Fatal("not her own exit")
		}
		c.ownExits.add(own, p.launch)
	}
	p := fakeLisa(t, filepath.Join(dir, LisaLog), 9, []string{logLine(t, "WARN", logFault, "kind", "stop-after-send", "actor", "app/sync"), logLine(t, "ERROR", logLost, "actor", "sync")}, 1)
	own, _ := p.ownExit()
	c.ownExits.add(own, p.launch)
	c.explainExits()
	r := c.report
	if len(r.OwnExits) != 2 || r.OwnExitCount() != 3 {
		t.Fatalf("own exits = %+v, want 2 causes, 3 exits", r.OwnExits)
	}
	bug := r.OwnExits[0]
	if bug.Count != 2 || bug.ByDesign || bug.FirstLaunch != 3 || bug.Name != ExitUnexplained {
		t.Errorf("first cause = %+v, want the unexplained refusal twice, first at launch 3", bug)
	}
	for _, leak := range []string{"38211", "40999", "Op8y71FQeBpq", "!AbCdEf", "$Xyz", "2026-12-05", "1.5s"} {
		if strings.Contains(bug.Detail, leak) {
			t.Errorf("detail %q keeps %q", bug.Detail, leak)
		}
	}
	if len(r.Violations) != 1 || !strings.Contains(r.Violations[0], "2 times") || !strings.Contains(r.Violations[0], ExitUnexplained) {
		t.Errorf("violations = %q, want one for the refusal", r.Violations)
	}
	r.LogDir = dir
	var text strings.Builder
	r.WriteText(&text)
	for _, want := range []string{
		"lisa's own exits", "2 × unexplained", "BUG, exit:1 (first: launch 3): cannot start: Matrix session check failed",
		"1 × essential_actor_stopped", "by design, exit:1 (first: launch 9): sync stopped by an injected stop-after-send fault",
		"logs: " + filepath.Join(dir, CampaignLog) + ", " + filepath.Join(dir, LisaLog),
	} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, text.String())
		}
	}
}
