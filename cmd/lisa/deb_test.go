package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lisabot/lisa/testkit/need"
)

// lintianWarnings are the lintian warnings the package is known to get,
// each with why it stays. Any other warning, and any error, fails
// TestDebianPackage.
var lintianWarnings = map[string]string{
	// Go's internal linker writes a position-independent executable that
	// needs no shared library (it makes its system calls itself), so the
	// ELF has an interpreter but no NEEDED entry for libc. Linking
	// against libc would take cgo and a C toolchain for nothing.
	"shared-library-lacks-prerequisites": "a Go PIE needs no shared library",
}

// buildDeb runs deploy/build-deb.sh into a new directory with the given
// SOURCE_DATE_EPOCH and returns the package's path.
func buildDeb(t *testing.T, epoch string) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	start := time.Now()
	cmd := exec.Command(filepath.Join(root, "deploy", "build-deb.sh"), out)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "SOURCE_DATE_EPOCH="+epoch)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("deploy/build-deb.sh: %v\n%s", err, stderr.String())
	}
	deb := strings.TrimSpace(stdout.String())
	t.Logf("built %s in %s", filepath.Base(deb), time.Since(start).Round(time.Millisecond))
	return deb
}

// runTool runs name with args and returns its combined output; it fails t
// on an error.
func runTool(t *testing.T, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// dpkgRoot is an empty dpkg database in a new directory: a throw-away
// root to install into.
func dpkgRoot(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for _, d := range []string{"var/lib/dpkg/info", "var/lib/dpkg/updates"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "var/lib/dpkg/status"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

// dpkgIn runs dpkg on root. The package's scripts run on the host with
// DPKG_ROOT set (the root has no shell), and its dependency on systemd
// is the host's.
func dpkgIn(t *testing.T, root string, args ...string) string {
	t.Helper()
	return runTool(t, nil, "dpkg", append([]string{"--root=" + root, "--force-script-chrootless", "--force-depends", "--log=/dev/null"}, args...)...)
}

// TestDebianPackage builds the Debian package twice from this checkout
// (byte-identical), has lintian check it (no error, no warning but the
// explained ones), installs it into a throw-away root with dpkg --root
// and checks the result: the files, the lisa system user and its 0700
// data dir, the conffiles; the installed lisa names this revision and
// check-config accepts the installed configuration; systemd-analyze
// verify accepts the installed unit; a reinstall keeps an edited
// conffile and the data; a purge removes the configuration and the data
// dir.
func TestDebianPackage(t *testing.T) {
	need.DebianPackaging(t)
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatalf("git rev-parse HEAD: %v", err)
	}
	epoch := strings.TrimSpace(runTool(t, nil, "git", "log", "-1", "--format=%ct"))

	deb := buildDeb(t, epoch)
	again := buildDeb(t, epoch)
	a, err := os.ReadFile(deb)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(again)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(deb) != filepath.Base(again) || !bytes.Equal(a, b) {
		t.Fatalf("two builds differ: %s (%d bytes) and %s (%d bytes)", deb, len(a), again, len(b))
	}
	t.Logf("package %s: %d bytes, reproducible", filepath.Base(deb), len(a))

	// lintian exits 0 with warnings and 2 with errors; each line is
	// "X: package: tag [where]".
	lint, _ := exec.Command("lintian", "--tag-display-limit", "0", deb).CombinedOutput()
	tagLine := regexp.MustCompile(`(?m)^([EWIPXO]): lisa[^:]*: (\S+)(.*)$`)
	for _, m := range tagLine.FindAllStringSubmatch(string(lint), -1) {
		switch kind, tag := m[1], m[2]; {
		case kind == "E":
			t.Errorf("lintian error: %s", m[0])
		case kind == "W" && lintianWarnings[tag] == "":
			t.Errorf("lintian warning not explained in lintianWarnings: %s", m[0])
		case kind == "W":
			t.Logf("lintian warning %s: %s", tag, lintianWarnings[tag])
		}
	}
	if t.Failed() {
		t.Fatalf("lintian:\n%s", lint)
	}

	contents := runTool(t, nil, "dpkg-deb", "--contents", deb)
	for _, line := range strings.Split(strings.TrimSpace(contents), "\n") {
		if f := strings.Fields(line); len(f) < 6 || f[1] != "root/root" {
			t.Errorf("not owned by root/root in the archive: %s", line)
		}
	}
	for _, want := range []string{"./usr/bin/lisa", "./usr/lib/systemd/system/lisa.service", "./usr/lib/sysusers.d/lisa.conf",
		"./usr/lib/tmpfiles.d/lisa.conf", "./etc/lisa/lisa.toml", "./etc/lisa/persona.md", "./usr/share/doc/lisa/copyright",
		"./usr/share/man/man1/lisa.1.gz"} {
		if !strings.Contains(contents, " "+want+"\n") {
			t.Errorf("the package lacks %s:\n%s", want, contents)
		}
	}
	control := runTool(t, nil, "dpkg-deb", "--field", deb, "Depends", "Recommends")
	if !strings.Contains(control, "Recommends: pandoc") {
		t.Errorf("pandoc is not recommended: %s", control)
	}

	root := dpkgRoot(t)
	dpkgIn(t, root, "--install", deb)

	passwd, err := os.ReadFile(filepath.Join(root, "etc", "passwd"))
	if err != nil {
		t.Fatal(err)
	}
	user := regexp.MustCompile(`(?m)^lisa:x:(\d+):(\d+):[^:]*:/var/lib/lisa:(/usr/sbin/nologin|/sbin/nologin|/bin/false)$`).FindStringSubmatch(string(passwd))
	if user == nil {
		t.Fatalf("no lisa system user with home /var/lib/lisa and no shell in the root's /etc/passwd:\n%s", passwd)
	}
	uid, _ := strconv.Atoi(user[1])
	if uid == 0 || uid >= 1000 {
		t.Fatalf("lisa has uid %d, want a system uid (1-999)", uid)
	}
	dataDir := filepath.Join(root, "var", "lib", "lisa")
	if owner, mode := fileOwner(t, dataDir); owner != uid || mode != os.ModeDir|0o700 {
		t.Fatalf("/var/lib/lisa is %v owned by %d, want a 0700 directory of lisa (%d)", mode, owner, uid)
	}
	conffiles := runTool(t, nil, "dpkg-query", "--admindir="+filepath.Join(root, "var/lib/dpkg"), "--show", "--showformat=${Conffiles}", "lisa")
	for _, f := range []string{"/etc/lisa/lisa.toml", "/etc/lisa/persona.md"} {
		if !strings.Contains(conffiles, " "+f+" ") {
			t.Errorf("%s is not a conffile: %q", f, conffiles)
		}
	}

	lisa := filepath.Join(root, "usr", "bin", "lisa")
	if v := runTool(t, nil, lisa, "version"); !strings.Contains(v, strings.TrimSpace(string(head))) {
		t.Errorf("the installed lisa says %q, want the revision %s", v, head)
	}
	// The installed configuration as installed; the secrets it names come
	// from the environment, as from /etc/lisa/lisa.env under systemd.
	cfg := filepath.Join(root, "etc", "lisa", "lisa.toml")
	secrets := []string{"LISA_MATRIX_ACCESS_TOKEN=token-of-the-test", "LISA_LLM_API_KEY=key-of-the-test", need.ConverterEnv(t)}
	checked := runTool(t, secrets, lisa, "check-config", "--config", cfg)
	if !strings.Contains(checked, "config OK") || !regexp.MustCompile(`data dir:\s+/var/lib/lisa\n`).MatchString(checked) {
		t.Errorf("check-config of the installed configuration:\n%s", checked)
	}

	// systemd-analyze verify in the root needs systemd's own units there,
	// as on a system where the package's dependency is installed: the
	// host's, beside (never over) the package's.
	units := filepath.Join(root, "usr", "lib", "systemd", "system")
	hostUnits, err := os.ReadDir("/usr/lib/systemd/system")
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range hostUnits {
		if _, err := os.Lstat(filepath.Join(units, u.Name())); err == nil {
			continue
		}
		runTool(t, nil, "cp", "-a", filepath.Join("/usr/lib/systemd/system", u.Name()), units)
	}
	unit := filepath.Join(units, "lisa.service")
	if out, err := exec.Command("systemd-analyze", "--root="+root, "verify", unit).CombinedOutput(); err != nil || len(out) > 0 {
		t.Fatalf("systemd-analyze verify of the installed unit: %v\n%s", err, out)
	}
	// The check sees the root: without the installed binary it fails.
	if err := os.Rename(lisa, lisa+".away"); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("systemd-analyze", "--root="+root, "verify", unit).CombinedOutput(); err == nil || !strings.Contains(string(out), "/usr/bin/lisa") {
		t.Fatalf("systemd-analyze verify did not miss the binary: %v %s", err, out)
	}
	if err := os.Rename(lisa+".away", lisa); err != nil {
		t.Fatal(err)
	}

	// An operator's edit of the configuration and Lisa's data survive a
	// reinstall (an upgrade to the same version takes the same path).
	edited := append(readFile(t, cfg), []byte("# edited by the operator\n")...)
	if err := os.WriteFile(cfg, edited, 0o644); err != nil {
		t.Fatal(err)
	}
	ledger := filepath.Join(dataDir, "MANIFEST")
	if err := os.WriteFile(ledger, []byte("data"), 0o600); err != nil {
		t.Fatal(err)
	}
	dpkgIn(t, root, "--force-confold", "--install", deb)
	if !bytes.Equal(readFile(t, cfg), edited) {
		t.Error("the reinstall replaced the edited /etc/lisa/lisa.toml")
	}
	if string(readFile(t, ledger)) != "data" {
		t.Error("the reinstall lost the data dir's contents")
	}
	if again, err := os.ReadFile(filepath.Join(root, "etc", "passwd")); err != nil || !bytes.Equal(again, passwd) {
		t.Errorf("the reinstall changed /etc/passwd: %v\n%s", err, again)
	}

	dpkgIn(t, root, "--purge", "lisa")
	for _, gone := range []string{cfg, dataDir, lisa} {
		if _, err := os.Lstat(gone); !os.IsNotExist(err) {
			t.Errorf("after a purge %s is still there (%v)", gone, err)
		}
	}
}

// readFile returns the contents of path; it fails t on an error.
func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fileOwner returns the uid and the mode of path.
func fileOwner(t *testing.T, path string) (int, os.FileMode) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		t.Fatalf("%s: no owner", path)
	}
	return int(st.Uid), fi.Mode()
}
