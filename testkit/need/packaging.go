package need

import (
	"os"
	"os/exec"
	"testing"
)

// RequirePodmanEnv, set to 1, turns a missing podman (or runc) into a test
// failure.
const RequirePodmanEnv = "LISA_REQUIRE_PODMAN"

// RequireLintianEnv, set to 1, turns a missing lintian (or dpkg) into a
// test failure.
const RequireLintianEnv = "LISA_REQUIRE_LINTIAN"

// onPath returns "" when every name is on PATH, else which is not.
func onPath(names ...string) string {
	for _, n := range names {
		if _, err := exec.LookPath(n); err != nil {
			return n + " not found on PATH"
		}
	}
	return ""
}

// podmanTool is podman with the runc runtime (crun does not work on these
// machines), on PATH.
var podmanTool = Tool{Name: "podman", Package: "podman runc", RequireEnv: RequirePodmanEnv, Check: func() string {
	return onPath("podman", "runc")
}}

// lintianTool is lintian with dpkg and dpkg-deb, on PATH.
var lintianTool = Tool{Name: "lintian", Package: "lintian", RequireEnv: RequireLintianEnv, Check: func() string {
	return onPath("lintian", "dpkg-deb", "dpkg")
}}

// Podman skips t with one line naming the Debian packages unless podman
// and runc are on PATH; with LISA_REQUIRE_PODMAN=1 it fails t instead.
func Podman(t testing.TB) {
	t.Helper()
	podmanTool.Need(t)
}

// Lintian skips t with one line naming the Debian package unless lintian,
// dpkg and dpkg-deb are on PATH; with LISA_REQUIRE_LINTIAN=1 it fails t
// instead.
func Lintian(t testing.TB) {
	t.Helper()
	lintianTool.Need(t)
}

// debianTool is what building and installing Lisa's Debian package into
// a throw-away root takes: dpkg, dpkg-deb and lintian, systemd's
// sysusers, tmpfiles and analyze (the package's scripts and the unit
// check), and root (dpkg --root writes files owned by root and the lisa
// user).
var debianTool = Tool{Name: "Debian packaging (lintian, dpkg, systemd)", Package: "lintian systemd", RequireEnv: RequireLintianEnv, Check: func() string {
	if why := onPath("lintian", "dpkg-deb", "dpkg", "dpkg-query", "systemd-sysusers", "systemd-tmpfiles", "systemd-analyze"); why != "" {
		return why
	}
	if os.Geteuid() != 0 {
		return "not root (dpkg --root installs files owned by root and the lisa user)"
	}
	return ""
}}

// DebianPackaging skips t with one line naming what is missing unless
// lintian, dpkg and systemd's tools are on PATH and the test runs as
// root; with LISA_REQUIRE_LINTIAN=1 it fails t instead.
func DebianPackaging(t testing.TB) {
	t.Helper()
	debianTool.Need(t)
}
