package main

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"maunium.net/go/mautrix/id"

	"github.com/lisabot/lisa/testkit/need"
)

// podman runs podman with the runc runtime (crun fails on these
// machines) and returns its standard output; it fails t on an error.
func podman(t *testing.T, args ...string) string {
	t.Helper()
	out, err := podmanErr(args...)
	if err != nil {
		t.Fatalf("podman %s: %v", strings.Join(args, " "), err)
	}
	return out
}

// podmanErr is podman without failing: the error carries its stderr.
func podmanErr(args ...string) (string, error) {
	cmd := exec.Command("podman", append([]string{"--runtime", "runc"}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// buildImage builds Lisa's image with the documented command
// (deploy/build-image.sh TAG) under a tag of its own, removed when the
// test ends.
func buildImage(t *testing.T) string {
	t.Helper()
	tag := fmt.Sprintf("localhost/lisa-test:%d", time.Now().UnixNano())
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	cmd := exec.Command(filepath.Join(root, "deploy", "build-image.sh"), tag)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("deploy/build-image.sh: %v\n%s", err, out)
	}
	t.Cleanup(func() { _, _ = podmanErr("rmi", "-f", tag) })
	t.Logf("image %s built in %s", tag, time.Since(start).Round(time.Millisecond))
	return tag
}

// imageFiles lists the image's file system as a container made from it
// holds it before it runs: path → tar header.
func imageFiles(t *testing.T, tag string) map[string]*tar.Header {
	t.Helper()
	id := strings.TrimSpace(podman(t, "create", tag))
	defer func() { _, _ = podmanErr("rm", "-f", id) }()
	cmd := exec.Command("podman", "--runtime", "runc", "export", id)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	files := map[string]*tar.Header{}
	tr := tar.NewReader(out)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		files[strings.TrimPrefix(h.Name, "./")] = h
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	return files
}

// container is one run of the image.
type container struct {
	t    *testing.T
	name string
}

// runContainer starts the image as name on the host network (Dendrite
// and the model listen on loopback), with the configuration directory
// mounted read-only at /etc/lisa, the volume at /data and the access
// token from the environment; removed when the test ends.
func runContainer(t *testing.T, tag, name, cfgDir, volume, token string, readOnly bool) *container {
	t.Helper()
	args := []string{"run", "--detach", "--name", name, "--network", "host",
		"--volume", cfgDir + ":/etc/lisa:ro", "--volume", volume + ":/data",
		"--env", "LISA_MATRIX_ACCESS_TOKEN=" + token}
	if readOnly {
		args = append(args, "--read-only")
	}
	podman(t, append(args, tag)...)
	t.Cleanup(func() { _, _ = podmanErr("rm", "--force", "--time", "0", name) })
	return &container{t: t, name: name}
}

// logs returns what Lisa logged in the container so far. podman logs
// replays the container's standard error (where Lisa logs) on its own.
func (c *container) logs() string {
	out, err := exec.Command("podman", "--runtime", "runc", "logs", c.name).CombinedOutput()
	if err != nil {
		return fmt.Sprintf("podman logs: %v: %s", err, out)
	}
	return string(out)
}

// awaitLog waits until Lisa in the container logged s.
func (c *container) awaitLog(s string) {
	c.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(c.logs(), s) {
		if time.Now().After(deadline) {
			c.t.Fatalf("container %s: no log %q within 60 s; logs:\n%s", c.name, s, c.logs())
		}
		time.Sleep(100 * time.Millisecond) // polling podman logs: no event to wait on
	}
}

// stop stops the container with podman stop (SIGTERM) and returns how
// long it took and the exit code.
func (c *container) stop() (time.Duration, int) {
	c.t.Helper()
	start := time.Now()
	podman(c.t, "stop", "--time", "30", c.name)
	took := time.Since(start)
	code := strings.TrimSpace(podman(c.t, "inspect", "--format", "{{.State.ExitCode}}", c.name))
	var n int
	if _, err := fmt.Sscan(code, &n); err != nil {
		c.t.Fatalf("exit code %q: %v", code, err)
	}
	return took, n
}

// TestContainerImage builds the image with deploy/build-image.sh and runs
// it against each homeserver on loopback: the image holds the binary, the CA
// certificates and the data dir only; a mention gets one reply; the
// health check says healthy; podman stop ends Lisa within
// runtime.shutdown_grace_seconds with exit 0; a new container on the same
// volume, with a read-only root file system, answers nothing old and the
// question asked meanwhile once.
func TestContainerImage(t *testing.T) {
	need.Podman(t)
	tag := buildImage(t) // once: the image does not depend on the homeserver
	onEachHomeserver(t, func(t *testing.T, hs string) {

		files := imageFiles(t, tag)
		var names []string
		for name := range files {
			names = append(names, strings.TrimSuffix(name, "/"))
		}
		slices.Sort(names)
		want := []string{"data", "etc", "etc/ssl", "etc/ssl/certs", "etc/ssl/certs/ca-certificates.crt", "usr", "usr/bin", "usr/bin/lisa"}
		if !slices.Equal(names, want) {
			t.Fatalf("the image holds %q, want only %q", names, want)
		}
		if d := files["data/"]; d == nil || d.Uid != 10001 || d.Gid != 10001 || d.FileInfo().Mode().Perm() != 0o700 {
			t.Fatalf("/data is %+v, want a 0700 directory of 10001:10001", d)
		}
		var cfg []struct {
			Config struct {
				User       string
				StopSignal string
				Volumes    map[string]any
			}
			Healthcheck struct{ Test []string }
		}
		if err := json.Unmarshal([]byte(podman(t, "image", "inspect", tag)), &cfg); err != nil || len(cfg) != 1 {
			t.Fatalf("podman image inspect: %v", err)
		}
		c := cfg[0].Config
		if c.User != "10001:10001" || c.StopSignal != "SIGTERM" || !strings.Contains(strings.Join(cfg[0].Healthcheck.Test, " "), "/usr/bin/lisa health") || c.Volumes["/data"] == nil {
			t.Fatalf("image config %+v: want user 10001:10001, SIGTERM, a lisa health check and the /data volume", cfg[0])
		}

		e := newE2E(t, hs, 1)
		room := e.allowed[0]
		// The configuration as an operator mounts it: readable by the
		// image's user, secrets only in the environment.
		cfgDir := t.TempDir()
		src := filepath.Dir(e.writeConfig())
		for _, f := range []string{"lisa.toml", "persona.md"} {
			b, err := os.ReadFile(filepath.Join(src, f))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(cfgDir, f), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chmod(cfgDir, 0o755); err != nil {
			t.Fatal(err)
		}
		volume := fmt.Sprintf("lisa-test-%d", time.Now().UnixNano())
		podman(t, "volume", "create", volume)
		t.Cleanup(func() { _, _ = podmanErr("volume", "rm", "--force", volume) })

		first := runContainer(t, tag, volume+"-1", cfgDir, volume, e.bot.AccessToken, false)
		first.awaitLog("sync baseline recorded")
		q1 := e.mention(room, "a question for the container")
		e.awaitReply(room, q1)
		// The image's HEALTHCHECK (lisa health) run now: exit 0, and podman
		// records the container as healthy. (podman 4.3 prints "unhealthy"
		// on a failed check and nothing on a good one.)
		if out, err := podmanErr("healthcheck", "run", first.name); err != nil {
			t.Fatalf("podman healthcheck run: %q %v; logs:\n%s", out, err, first.logs())
		}
		if status := strings.TrimSpace(podman(t, "inspect", "--format", "{{.State.Health.Status}}", first.name)); status != "healthy" {
			t.Fatalf("health after a good check is %q, want healthy", status)
		}
		took, code := first.stop()
		const grace = 5 * time.Second // runtime.shutdown_grace_seconds of writeConfig
		if code != 0 || took > grace || !strings.Contains(first.logs(), `"clean":true`) {
			t.Fatalf("podman stop took %s (grace %s), exit %d; logs:\n%s", took, grace, code, first.logs())
		}
		t.Logf("podman stop: %s, exit 0", took.Round(time.Millisecond))
		if logs := first.logs(); strings.Contains(logs, e.bot.AccessToken) {
			t.Fatal("the access token is in the container's log")
		}

		q2 := e.mention(room, "asked while no container runs")
		second := runContainer(t, tag, volume+"-2", cfgDir, volume, e.bot.AccessToken, true)
		e.awaitReply(room, q2)
		sentinel := e.settle(room)
		if strings.Contains(second.logs(), "sync baseline recorded") {
			t.Fatalf("the new container took a new baseline: the volume's cursor was lost; logs:\n%s", second.logs())
		}
		got := e.replies(room)
		wantReplies := map[id.EventID]int{q1: 1, q2: 1, sentinel: 1}
		if len(got) != len(wantReplies) || got[q1] != 1 || got[q2] != 1 || got[sentinel] != 1 {
			t.Fatalf("replies %v, want one each to %v; logs:\n%s", got, wantReplies, second.logs())
		}
		if _, code := second.stop(); code != 0 {
			t.Fatalf("the read-only container exited %d; logs:\n%s", code, second.logs())
		}
	})
}
