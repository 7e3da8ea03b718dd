package dendrite

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
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
	// keyFile and configFile are the names of the files Launch writes into
	// the data directory.
	keyFile    = "matrix_key.pem"
	configFile = "dendrite.yaml"
)

// writeSigningKey writes a new ed25519 signing key in Dendrite's PEM format
// ("MATRIX PRIVATE KEY" block whose bytes are the 32-byte seed) to path,
// unless the file already exists: a reused data directory keeps its key.
func writeSigningKey(path string) error {
	if _, err := os.Stat(path); err == nil {
		return nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("dendrite: signing key: %w", err)
	}
	seed := make([]byte, ed25519.SeedSize)
	if _, err := rand.Read(seed); err != nil {
		return fmt.Errorf("dendrite: signing key: %w", err)
	}
	block := &pem.Block{
		Type:    "MATRIX PRIVATE KEY",
		Headers: map[string]string{"Key-ID": "ed25519:lisa"},
		Bytes:   seed,
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
		return fmt.Errorf("dendrite: signing key: %w", err)
	}
	return nil
}

// randomSecret returns 32 random bytes, hex encoded.
func randomSecret() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("dendrite: shared secret: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// configParams are the values substituted into configText.
type configParams struct {
	Dir          string // absolute data directory
	ServerName   string
	Secret       string // registration shared secret
	RateLimiting bool
}

// configText is a minimal SQLite configuration template; Dendrite fills in
// defaults for every key not given. Each component needs its own SQLite file.
// Strings go through the q function (JSON quoting, which is valid YAML).
const configText = `# Written by github.com/lisabot/lisa/devkit/dendrite on every launch.
version: 2
global:
  server_name: {{q .ServerName}}
  private_key: {{q (path .Dir "` + keyFile + `")}}
  disable_federation: true
  trusted_third_party_id_servers: []
  jetstream:
    storage_path: {{q (path .Dir "jetstream")}}
  presence:
    enable_inbound: false
    enable_outbound: false
  server_notices:
    enabled: false
client_api:
  registration_disabled: true
  registration_shared_secret: {{q .Secret}}
  rate_limiting:
    enabled: {{.RateLimiting}}
    threshold: 5
    cooloff_ms: 500
federation_api:
  database:
    connection_string: {{q (print "file:" (path .Dir "federationapi.db"))}}
  key_perspectives: []
key_server:
  database:
    connection_string: {{q (print "file:" (path .Dir "keyserver.db"))}}
media_api:
  database:
    connection_string: {{q (print "file:" (path .Dir "mediaapi.db"))}}
  base_path: {{q (path .Dir "media")}}
room_server:
  database:
    connection_string: {{q (print "file:" (path .Dir "roomserver.db"))}}
sync_api:
  database:
    connection_string: {{q (print "file:" (path .Dir "syncapi.db"))}}
  search:
    enabled: false
user_api:
  account_database:
    connection_string: {{q (print "file:" (path .Dir "userapi.db"))}}
  bcrypt_cost: 4
relay_api:
  database:
    connection_string: {{q (print "file:" (path .Dir "relayapi.db"))}}
mscs:
  database:
    connection_string: {{q (print "file:" (path .Dir "mscs.db"))}}
logging:
  - type: std
    level: warn
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
		return fmt.Errorf("dendrite: config template: %w", err)
	}
	var buf bytes.Buffer
	if err := tmpl.Execute(&buf, p); err != nil {
		return fmt.Errorf("dendrite: render config: %w", err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		return fmt.Errorf("dendrite: write config: %w", err)
	}
	return nil
}
