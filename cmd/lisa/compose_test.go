package main

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/lisabot/lisa/config"
)

// composeFile is the part of the Compose specification deploy/compose.yaml
// may use. Decoding is strict, so a misspelt Compose key (healtcheck,
// env-file) fails the test instead of being ignored by the engine.
type composeFile struct {
	Name     string                    `yaml:"name"`
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]any            `yaml:"volumes"`
}

// composeService is one service of composeFile.
type composeService struct {
	Image           string            `yaml:"image"`
	Restart         string            `yaml:"restart"`
	ReadOnly        bool              `yaml:"read_only"`
	Volumes         []string          `yaml:"volumes"`
	EnvFile         []string          `yaml:"env_file"`
	Environment     map[string]string `yaml:"environment"`
	DependsOn       []string          `yaml:"depends_on"`
	StopSignal      string            `yaml:"stop_signal"`
	StopGracePeriod string            `yaml:"stop_grace_period"`
	Healthcheck     *struct {
		Test        []string `yaml:"test"`
		Interval    string   `yaml:"interval"`
		Timeout     string   `yaml:"timeout"`
		StartPeriod string   `yaml:"start_period"`
		Retries     int      `yaml:"retries"`
	} `yaml:"healthcheck"`
}

// optionalLine marks a line of deploy/compose.yaml that belongs to the
// optional SearXNG service.
const optionalLine = "#~ "

// parseCompose decodes compose strictly; with optional, the lines marked
// optionalLine are uncommented first.
func parseCompose(t *testing.T, src []byte, optional bool) composeFile {
	t.Helper()
	if optional {
		var b bytes.Buffer
		sc := bufio.NewScanner(bytes.NewReader(src))
		for sc.Scan() {
			b.WriteString(strings.TrimPrefix(sc.Text(), optionalLine) + "\n")
		}
		src = b.Bytes()
	}
	dec := yaml.NewDecoder(bytes.NewReader(src))
	dec.KnownFields(true)
	var f composeFile
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("deploy/compose.yaml (optional lines on: %v): %v", optional, err)
	}
	return f
}

// secretRef finds the "env:NAME" references of a configuration file.
var secretRef = regexp.MustCompile(`"env:([A-Z0-9_]+)"`)

// configContractEnv returns every environment variable Lisa reads: the
// override of each configuration key, and the secrets
// config.example.toml refers to (including the one named in a comment,
// the optional search key).
func configContractEnv(t *testing.T) map[string]string {
	t.Helper()
	names := map[string]string{}
	for _, k := range config.Keys() {
		names[config.EnvOverrideName(k)] = "the override of " + k
	}
	example, err := os.ReadFile(filepath.Join("..", "..", "config.example.toml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range secretRef.FindAllSubmatch(example, -1) {
		names[string(m[1])] = "a secret of config.example.toml"
	}
	return names
}

// TestComposeFile parses deploy/compose.yaml, as shipped and with its
// optional SearXNG lines uncommented, and checks it against Lisa's
// contract: every environment variable it or deploy/lisa.env.example
// sets is a configuration override or a secret the configuration names;
// the health check runs a lisa command that exists on the mounted
// configuration; the data dir is a named volume at the image's /data;
// secrets come from an env file; the stop grace outlasts Lisa's own.
func TestComposeFile(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "..", "deploy", "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(src, []byte(optionalLine)) {
		t.Fatal("deploy/compose.yaml has no optional SearXNG lines")
	}
	contract := configContractEnv(t)
	var cmds []string
	for _, c := range commands() {
		cmds = append(cmds, c.name)
	}
	grace := config.Default().Runtime.ShutdownGrace()

	for _, optional := range []bool{false, true} {
		f := parseCompose(t, src, optional)
		lisa, ok := f.Services["lisa"]
		if !ok {
			t.Fatalf("no lisa service in %v", f.Services)
		}
		_, search := f.Services["searxng"]
		if search != optional {
			t.Errorf("optional lines on: %v, searxng service present: %v", optional, search)
		}
		for name, v := range lisa.Environment {
			if _, ok := contract[name]; !ok {
				t.Errorf("compose.yaml sets %s=%q, which Lisa never reads (not an override of a config key, not a secret of config.example.toml)", name, v)
			}
			if strings.HasPrefix(v, "env:") || strings.Contains(strings.ToLower(name), "token") || strings.Contains(strings.ToLower(name), "key") {
				t.Errorf("compose.yaml sets %s inline: secrets belong in the env file", name)
			}
		}
		if optional && lisa.Environment[config.EnvOverrideName("search.endpoint")] == "" {
			t.Error("with SearXNG on, Lisa is not pointed at it (search.endpoint)")
		}
		if hc := lisa.Healthcheck; hc == nil || len(hc.Test) < 3 || hc.Test[0] != "CMD" || hc.Test[1] != "/usr/bin/lisa" ||
			!slices.Contains(cmds, hc.Test[2]) || !slices.Contains(hc.Test, "/etc/lisa/lisa.toml") {
			t.Errorf("health check %+v: want [CMD /usr/bin/lisa <command> ... /etc/lisa/lisa.toml] with a command of %v", hc, cmds)
		}
		if !slices.Contains(lisa.Volumes, "lisa-data:/data") || f.Volumes == nil {
			t.Errorf("volumes %v: the data dir must be the named volume lisa-data at /data", lisa.Volumes)
		} else if _, ok := f.Volumes["lisa-data"]; !ok {
			t.Errorf("top-level volumes %v lack lisa-data", f.Volumes)
		}
		if got := lisa.Environment[config.EnvOverrideName("runtime.data_dir")]; got != "/data" {
			t.Errorf("runtime.data_dir override is %q, want /data (the volume)", got)
		}
		if !lisa.ReadOnly || lisa.Restart == "" || lisa.Restart == "no" || lisa.StopSignal != "SIGTERM" {
			t.Errorf("lisa service: read_only %v, restart %q, stop_signal %q: want a read-only root, a restart policy and SIGTERM", lisa.ReadOnly, lisa.Restart, lisa.StopSignal)
		}
		if d, err := time.ParseDuration(lisa.StopGracePeriod); err != nil || d <= grace {
			t.Errorf("stop_grace_period %q (%v): must outlast runtime.shutdown_grace_seconds (%s)", lisa.StopGracePeriod, err, grace)
		}
		if len(lisa.EnvFile) != 1 {
			t.Fatalf("env_file %v: want one file with the secrets", lisa.EnvFile)
		}
		envExample, err := os.ReadFile(filepath.Join("..", "..", "deploy", lisa.EnvFile[0]+".example"))
		if err != nil {
			t.Fatalf("the env file has no example beside compose.yaml: %v", err)
		}
		var secrets int
		for _, line := range strings.Split(string(envExample), "\n") {
			name, _, ok := strings.Cut(strings.TrimSpace(line), "=")
			if !ok || strings.HasPrefix(name, "#") {
				continue
			}
			secrets++
			if _, ok := contract[name]; !ok {
				t.Errorf("%s.example sets %s, which Lisa never reads", lisa.EnvFile[0], name)
			}
		}
		if secrets == 0 {
			t.Errorf("%s.example names no secret", lisa.EnvFile[0])
		}
	}
}

// TestContainerfileEnvironment checks that each environment variable
// deploy/Containerfile sets is one Lisa reads (or SSL_CERT_FILE, read by
// Go's crypto/x509).
func TestContainerfileEnvironment(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "..", "deploy", "Containerfile"))
	if err != nil {
		t.Fatal(err)
	}
	contract := configContractEnv(t)
	contract["SSL_CERT_FILE"] = "Go's crypto/x509"
	names := regexp.MustCompile(`(?m)(?:^ENV |^\s+)([A-Z][A-Z0-9_]*)=`).FindAllSubmatch(src, -1)
	if len(names) < 2 {
		t.Fatalf("found %d ENV names in the Containerfile", len(names))
	}
	for _, m := range names {
		if _, ok := contract[string(m[1])]; !ok {
			t.Errorf("the Containerfile sets %s, which Lisa never reads", m[1])
		}
	}
}
