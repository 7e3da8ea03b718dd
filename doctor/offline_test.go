package doctor_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lisabot/lisa/adapters/admin"
	"github.com/lisabot/lisa/doctor"
	"github.com/lisabot/lisa/persistence"
)

// childConfigEnv makes the test binary run `doctor --only datadir` on the
// configuration it names and print the report (see TestMain), so a test
// can run the check as another user.
const childConfigEnv = "LISA_DOCTOR_CHILD_CONFIG"

func TestMain(m *testing.M) {
	if path := os.Getenv(childConfigEnv); path != "" {
		rep, err := doctor.Run(context.Background(), doctor.Options{ConfigPath: path, Getenv: os.LookupEnv, Only: []string{"datadir"}})
		if err != nil {
			fmt.Println(err)
			os.Exit(3)
		}
		fmt.Print(text(rep))
		os.Exit(rep.Code())
	}
	os.Exit(m.Run())
}

// offlineConfig is a configuration whose servers are at hs, llm and
// searx (base URLs) and whose data directory is dataDir.
func offlineConfig(hs, llm, searx, dataDir string) string {
	return fmt.Sprintf(`[matrix]
homeserver_url = %q
user_id = "@lisa:localhost"
device_id = "LISADEV"
access_token = "env:LISA_MATRIX_ACCESS_TOKEN"
allowed_room_ids = ["!room:localhost"]
mention_aliases = ["Lisa"]

[llm]
base_url = %q
model = "m"
api_key = "env:LISA_LLM_API_KEY"

[search]
endpoint = %q

[persona]
path = "persona.md"

[runtime]
data_dir = %q
`, hs, llm+"/v1", searx+"/search", dataDir)
}

const offlineToken = "syt_offline_token_31337"

func offlineEnv(k string) (string, bool) {
	switch k {
	case "LISA_MATRIX_ACCESS_TOKEN":
		return offlineToken, true
	case "LISA_LLM_API_KEY":
		return llmKey, true
	}
	return "", false
}

// silent is a TCP server on 127.0.0.1 that accepts connections and never
// answers; it closes them when the test ends.
func silent(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			go func() { _, _ = io.Copy(io.Discard, c) }() // read, never write
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	return "http://" + ln.Addr().String()
}

// TestDoctorWhenServersNeverAnswer: a homeserver, LLM server and SearXNG
// that accept connections and never answer cost one request timeout, not
// one per check: the whole run ends within seconds, each server's line
// says it did not answer, the checks that need the homeserver are
// skipped, and the exit code is 2.
func TestDoctorWhenServersNeverAnswer(t *testing.T) {
	dir := t.TempDir()
	path := writeConfig(t, dir, offlineConfig(silent(t), silent(t), silent(t), "data"))
	start := time.Now()
	rep, err := doctor.Run(context.Background(), doctor.Options{ConfigPath: path, Getenv: offlineEnv,
		Only: []string{"homeserver", "rooms", "llm", "search"}})
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	out := text(rep)
	// One request timeout (5 s) and the runner's slack; far less than
	// the sum of the checks' limits.
	if took > 9*time.Second {
		t.Fatalf("took %v:\n%s", took, out)
	}
	for _, want := range []struct {
		section string
		status  doctor.Status
		text    string
	}{
		{"homeserver", doctor.Failed, "did not answer GET /_matrix/client/versions within 5s"},
		{"homeserver", doctor.Skipped, "whoami not asked: the homeserver is not reachable"},
		{"rooms", doctor.Skipped, "rooms not checked"},
		{"llm", doctor.Failed, "did not answer GET /models within 5s"},
		{"search", doctor.Failed, "did not answer the test query within 5s"},
	} {
		if lines := find(rep, want.section, want.text); len(lines) != 1 || lines[0].Status != want.status {
			t.Errorf("want one %s %s line with %q", want.status, want.section, want.text)
		}
	}
	if rep.Code() != doctor.ExitFailed || t.Failed() {
		t.Fatalf("exit %d after %v:\n%s", rep.Code(), took, out)
	}
	noSecrets(t, out, offlineToken)
}

// TestDoctorUnwritableDataDir: a data directory Lisa's user cannot write
// fails the datadir section (exit 2), naming the key. As root the check
// runs in a child process as another user (root may write anywhere);
// otherwise the directory is made read-only.
func TestDoctorUnwritableDataDir(t *testing.T) {
	if os.Geteuid() != 0 {
		dir := t.TempDir()
		data := filepath.Join(dir, "data")
		if err := os.Mkdir(data, 0o500); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.Chmod(data, 0o700) })
		path := writeConfig(t, dir, offlineConfig("http://127.0.0.1:9", "http://127.0.0.1:9", "http://127.0.0.1:9", "data"))
		rep, err := doctor.Run(context.Background(), doctor.Options{ConfigPath: path, Getenv: offlineEnv, Only: []string{"datadir"}})
		if err != nil {
			t.Fatal(err)
		}
		assertUnwritable(t, rep.Code(), text(rep), data)
		return
	}
	// Root: everything the child reads must be readable by nobody, the
	// data directory not writable by it.
	dir, err := os.MkdirTemp("", "lisa-doctor-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	data := filepath.Join(dir, "data")
	for _, d := range []string{dir, data} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	path := writeConfig(t, dir, offlineConfig("http://127.0.0.1:9", "http://127.0.0.1:9", "http://127.0.0.1:9", "data"))
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "doctor.test")
	copyFile(t, self, bin)
	cmd := exec.Command(bin, "-test.run=^$")
	cmd.Dir = dir
	cmd.Env = []string{childConfigEnv + "=" + path, "LISA_MATRIX_ACCESS_TOKEN=" + offlineToken, "LISA_LLM_API_KEY=" + llmKey, "PATH=/usr/bin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.Output()
	code := cmd.ProcessState.ExitCode()
	if code != doctor.ExitFailed {
		t.Fatalf("child as uid 65534: exit %d (%v):\n%s", code, err, out)
	}
	assertUnwritable(t, code, string(out), data)
}

func assertUnwritable(t *testing.T, code int, out, data string) {
	t.Helper()
	want := fmt.Sprintf("failed datadir %s is not writable for this user", data)
	if code != doctor.ExitFailed || !strings.Contains(out, want) || !strings.Contains(out, "runtime.data_dir") ||
		!strings.Contains(out, "permission denied") {
		t.Fatalf("exit %d, want 2 and %q:\n%s", code, want, out)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o755); err != nil {
		t.Fatal(err)
	}
}

// TestDoctorInvalidConfig: an invalid file gets one failed config line per
// problem, naming the key, and no online check runs (exit 2).
func TestDoctorInvalidConfig(t *testing.T) {
	dir := t.TempDir()
	text0 := strings.Replace(offlineConfig("http://127.0.0.1:9", "http://127.0.0.1:9", "http://127.0.0.1:9", "data"),
		`access_token = "env:LISA_MATRIX_ACCESS_TOKEN"`, `access_token = "syt_pasted_literal_token_999"`, 1)
	path := writeConfig(t, dir, text0)
	rep, err := doctor.Run(context.Background(), doctor.Options{ConfigPath: path, Getenv: offlineEnv})
	if err != nil {
		t.Fatal(err)
	}
	out := text(rep)
	if rep.Code() != doctor.ExitFailed || len(rep.Results) == 0 {
		t.Fatalf("exit %d:\n%s", rep.Code(), out)
	}
	for _, r := range rep.Results {
		if r.Section != "config" || r.Status != doctor.Failed {
			t.Fatalf("only failed config lines expected:\n%s", out)
		}
	}
	if len(find(rep, "config", "")) == 0 || !strings.Contains(out, "matrix.access_token") {
		t.Fatalf("the key is not named:\n%s", out)
	}
	noSecrets(t, out, "syt_pasted_literal_token_999")

	if _, err := doctor.Run(context.Background(), doctor.Options{ConfigPath: path, Only: []string{"nonsense"}}); err == nil ||
		!strings.Contains(err.Error(), "homeserver, rooms") {
		t.Fatalf("unknown section: %v", err)
	}
}

// TestDoctorAdminSocketDir: a socket directory others can write fails,
// naming runtime.admin_socket; a private one passes with its mode.
func TestDoctorAdminSocketDir(t *testing.T) {
	for _, c := range []struct {
		mode   os.FileMode
		status doctor.Status
		text   string
	}{
		{0o777, doctor.Failed, "is writable by group or others"},
		{0o700, doctor.OK, "has mode 0700 and is this user's"},
	} {
		dir := t.TempDir()
		sockDir := filepath.Join(dir, "run")
		if err := os.Mkdir(sockDir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(sockDir, c.mode); err != nil {
			t.Fatal(err)
		}
		cfg := offlineConfig("http://127.0.0.1:9", "http://127.0.0.1:9", "http://127.0.0.1:9", "data") +
			fmt.Sprintf("admin_socket = %q\n", filepath.Join(sockDir, "lisa.sock"))
		path := writeConfig(t, dir, cfg)
		rep, err := doctor.Run(context.Background(), doctor.Options{ConfigPath: path, Getenv: offlineEnv, Only: []string{"admin"}})
		if err != nil {
			t.Fatal(err)
		}
		lines := find(rep, "admin", c.text)
		if len(lines) != 1 || lines[0].Status != c.status || (c.status == doctor.Failed && !strings.Contains(lines[0].Message+lines[0].Fix, "runtime.admin_socket")) {
			t.Fatalf("mode %o:\n%s", c.mode, text(rep))
		}
	}
}

// TestDoctorDataDirOfRunningLisa: a data directory held by the Lisa that
// serves this configuration's admin socket is in order (doctor run beside
// the service), and the admin line says she is serving.
func TestDoctorDataDirOfRunningLisa(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	store, err := persistence.OpenBadger(data, persistence.BadgerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	srv, err := admin.Listen(filepath.Join(data, "admin.sock"), admin.HandlerFunc(func(context.Context, string, []string) (any, error) {
		return nil, nil
	}), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	path := writeConfig(t, dir, offlineConfig("http://127.0.0.1:9", "http://127.0.0.1:9", "http://127.0.0.1:9", "data"))
	rep, err := doctor.Run(context.Background(), doctor.Options{ConfigPath: path, Getenv: offlineEnv, Only: []string{"datadir", "admin"}})
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("%s is in use by the Lisa of this configuration (pid %d, serving %s)", data, os.Getpid(), filepath.Join(data, "admin.sock"))
	if len(find(rep, "datadir", want)) != 1 || len(find(rep, "admin", "a Lisa is serving")) != 1 || rep.Code() != doctor.ExitOK {
		t.Fatalf("want %q and exit 0:\n%s", want, text(rep))
	}
}
