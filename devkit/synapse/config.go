package synapse

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"text/template"
)

const (
	// serverName is the Matrix server name of every launched server.
	serverName = "localhost"
	// keyFile, configFile and dbFile are the names of the files Launch
	// writes (or has Synapse write) into the data directory.
	keyFile    = "localhost.signing.key"
	configFile = "homeserver.yaml"
	dbFile     = "homeserver.db"
)

// writeSigningKey writes a new ed25519 signing key in Synapse's format (one
// line "ed25519 <key ID> <unpadded base64 of the 32-byte seed>", as
// signedjson's read_signing_keys parses it) to path, unless the file
// already exists: a reused data directory keeps its key.
func writeSigningKey(path string) error {
	if _, err := os.Stat(path); err == nil {
		return nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("synapse: signing key: %w", err)
	}
	seed := make([]byte, ed25519.SeedSize)
	id := make([]byte, 2)
	if _, err := rand.Read(seed); err != nil {
		return fmt.Errorf("synapse: signing key: %w", err)
	}
	if _, err := rand.Read(id); err != nil {
		return fmt.Errorf("synapse: signing key: %w", err)
	}
	line := "ed25519 a_" + hex.EncodeToString(id) + " " + base64.RawStdEncoding.EncodeToString(seed) + "\n"
	if err := os.WriteFile(path, []byte(line), 0o600); err != nil {
		return fmt.Errorf("synapse: signing key: %w", err)
	}
	return nil
}

// randomSecret returns 32 random bytes, hex encoded.
func randomSecret() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("synapse: secret: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// configParams are the values substituted into configText.
type configParams struct {
	Dir        string // absolute data directory
	ServerName string
	Port       int
	Secret     string // registration shared secret
	// Macaroon is macaroon_secret_key, kept across launches on one data
	// directory (Synapse signs login and other short-lived tokens with it).
	Macaroon string
	// RaiseRateLimits replaces Synapse's default rate limits by ones no
	// test reaches.
	RaiseRateLimits bool
}

// configText is a minimal loopback configuration; Synapse fills in defaults
// for every key not given. Strings go through the q function (JSON quoting,
// which is valid YAML).
const configText = `# Written by github.com/lisabot/lisa/devkit/synapse on every launch.
server_name: {{q .ServerName}}
pid_file: {{q (path .Dir "homeserver.pid")}}
public_baseurl: {{q (print "http://127.0.0.1:" .Port "/")}}
listeners:
  - port: {{.Port}}
    type: http
    tls: false
    bind_addresses: ["127.0.0.1"]
    x_forwarded: false
    resources:
      - names: [client]
        compress: false
database:
  name: sqlite3
  args:
    database: {{q (path .Dir "` + dbFile + `")}}
media_store_path: {{q (path .Dir "media_store")}}
signing_key_path: {{q (path .Dir "` + keyFile + `")}}
registration_shared_secret: {{q .Secret}}
macaroon_secret_key: {{q .Macaroon}}
enable_registration: false
trusted_key_servers: []
suppress_key_server_warning: true
report_stats: false
enable_metrics: false
presence:
  enabled: false
bcrypt_rounds: 4
url_preview_enabled: false
{{- if .RaiseRateLimits}}
rc_message:
  per_second: 10000
  burst_count: 100000
rc_registration:
  per_second: 10000
  burst_count: 100000
rc_login:
  address:
    per_second: 10000
    burst_count: 100000
  account:
    per_second: 10000
    burst_count: 100000
  failed_attempts:
    per_second: 10000
    burst_count: 100000
rc_joins:
  local:
    per_second: 10000
    burst_count: 100000
  remote:
    per_second: 10000
    burst_count: 100000
rc_joins_per_room:
  per_second: 10000
  burst_count: 100000
rc_invites:
  per_room:
    per_second: 10000
    burst_count: 100000
  per_user:
    per_second: 10000
    burst_count: 100000
  per_issuer:
    per_second: 10000
    burst_count: 100000
rc_admin_redaction:
  per_second: 10000
  burst_count: 100000
{{- end}}
`

// writeConfig renders the configuration to path, readable only by the owner
// because it contains the shared secret.
func writeConfig(path string, p configParams) error {
	tmpl, err := template.New(configFile).Funcs(template.FuncMap{
		"q": func(s string) (string, error) {
			b, err := json.Marshal(s)
			return string(b), err
		},
		"path": filepath.Join,
	}).Parse(configText)
	if err != nil {
		return fmt.Errorf("synapse: config template: %w", err)
	}
	var buf bytes.Buffer
	if err := tmpl.Execute(&buf, p); err != nil {
		return fmt.Errorf("synapse: render config: %w", err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		return fmt.Errorf("synapse: write config: %w", err)
	}
	return nil
}

// macaroonFile keeps macaroon_secret_key in the data directory.
const macaroonFile = "macaroon.secret"

// loadOrCreateSecret returns the secret stored at path, creating it first
// if the file does not exist.
func loadOrCreateSecret(path string) (string, error) {
	if b, err := os.ReadFile(path); err == nil && len(bytes.TrimSpace(b)) > 0 {
		return string(bytes.TrimSpace(b)), nil
	} else if err != nil && !os.IsNotExist(err) {
		return "", fmt.Errorf("synapse: %s: %w", filepath.Base(path), err)
	}
	s, err := randomSecret()
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(path, []byte(s+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("synapse: %s: %w", filepath.Base(path), err)
	}
	return s, nil
}
