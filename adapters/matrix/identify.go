package matrix

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// ServerIdentity is what a homeserver says it is: the software's name and
// version, and where it said so. Both requests it comes from need no
// access token and are sent without one.
type ServerIdentity struct {
	// Name is the software ("Synapse", "Dendrite", "continuwuity"); ""
	// when the server did not say.
	Name string
	// Version is its version as given ("1.67.0"); may be "".
	Version string
	// From is where it came from: "server header" (the HTTP Server header
	// of GET /_matrix/client/versions), "federation version" (GET
	// /_matrix/federation/v1/version), "server_version" (the Conduit
	// family's /_<name>/server_version) or "" (none said).
	From string
}

// maxIdentityBody bounds the federation version answer read.
const maxIdentityBody = 64 << 10

// Identify asks the homeserver what it is: the Server header of its
// client API first (Synapse sets "Synapse/<version>" on every response:
// synapse/app/homeserver.py passes version_string=f"Synapse/{VERSION}",
// which synapse/http/site.py's SynapseRequest sets as the Server header,
// v1.67.0), else the federation version endpoint ({"server": {"name":
// "Synapse", "version": "1.67.0"}}, FederationVersionServlet in
// synapse/federation/transport/server/federation.py; Dendrite answers it
// as well), else the Conduit family's server_version endpoint. A reverse
// proxy may replace the header (nginx hides the
// upstream's Server header by default) or not route /_matrix/federation:
// then the identity is what is left, possibly nothing. Failures give an
// empty identity, never an error: not knowing is an answer.
func (c *Client) Identify(ctx context.Context, timeout time.Duration) ServerIdentity {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	base := strings.TrimRight(c.cli.HomeserverURL.String(), "/")
	var header ServerIdentity
	if resp, err := c.getNoAuth(ctx, base+"/_matrix/client/versions"); err == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxIdentityBody))
		resp.Body.Close()
		if name, version := parseServerHeader(resp.Header.Get("Server")); resp.StatusCode == http.StatusOK && name != "" {
			header = ServerIdentity{Name: name, Version: version, From: "server header"}
		}
	}
	if header.Name == "Synapse" {
		return header
	}
	// No header, or a proxy's own ("nginx"): the server may still say.
	if fed := c.federationVersion(ctx, base); fed.Name != "" {
		return fed
	}
	// The Conduit family answers its own endpoint, unauthenticated and
	// routed even without federation (continuwuity_server_version,
	// src/api/client/unversioned.rs, routed in src/api/router.rs outside
	// the allow_federation block; docs/homeservers.md).
	for _, p := range conduitVersionPaths {
		if sv := c.serverVersion(ctx, base+p); sv.Name != "" {
			return sv
		}
	}
	return header
}

// conduitVersionPaths are the Conduit family's server_version endpoints
// (Continuwuity, conduwuit, Tuwunel), each {"name":…,"version":…}.
var conduitVersionPaths = []string{"/_continuwuity/server_version", "/_conduwuit/server_version", "/_tuwunel/server_version"}

// serverVersion is the answer of a Conduit-family server_version endpoint.
func (c *Client) serverVersion(ctx context.Context, url string) ServerIdentity {
	resp, err := c.getNoAuth(ctx, url)
	if err != nil {
		return ServerIdentity{}
	}
	defer resp.Body.Close()
	var v struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(io.LimitReader(resp.Body, maxIdentityBody)).Decode(&v) != nil || v.Name == "" {
		return ServerIdentity{}
	}
	return ServerIdentity{Name: clip(v.Name), Version: clip(v.Version), From: "server_version"}
}

// federationVersion is the answer of GET /_matrix/federation/v1/version,
// if the client API's address routes it.
func (c *Client) federationVersion(ctx context.Context, base string) ServerIdentity {
	resp, err := c.getNoAuth(ctx, base+"/_matrix/federation/v1/version")
	if err != nil {
		return ServerIdentity{}
	}
	defer resp.Body.Close()
	var v struct {
		Server struct {
			Name    string `json:"name"`
			Version string `json:"version"`
		} `json:"server"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(io.LimitReader(resp.Body, maxIdentityBody)).Decode(&v) != nil || v.Server.Name == "" {
		return ServerIdentity{}
	}
	return ServerIdentity{Name: clip(v.Server.Name), Version: clip(v.Server.Version), From: "federation version"}
}

// getNoAuth sends GET url with the session's HTTP client and no
// Authorization header.
func (c *Client) getNoAuth(ctx context.Context, url string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	return c.cli.Client.Do(req)
}

// parseServerHeader splits a Server header's first product token
// ("Synapse/1.67.0" → "Synapse", "1.67.0").
func parseServerHeader(h string) (name, version string) {
	tok, _, _ := strings.Cut(strings.TrimSpace(h), " ")
	name, version, _ = strings.Cut(tok, "/")
	return clip(name), clip(version)
}

// clip bounds a server-supplied string for logs.
func clip(s string) string {
	if len(s) > 64 {
		s = s[:64]
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, s)
}

// TxnIDs is how a homeserver keeps send transaction IDs across its own
// restarts, as Lisa relies on it.
type TxnIDs struct {
	// Retention is how long after a reply is made Lisa counts on the
	// server recognising its transaction ID, across restarts; zero when
	// she does not (the server may forget them).
	Retention time.Duration
	// PerToken says the server scopes transaction IDs to the access token
	// (not the device): a send of an earlier process is recognised only
	// if it used the same token.
	PerToken bool
	// Reason says why, for the start-up log line.
	Reason string
}

// SynapseTxnRetention is how long Synapse keeps a send's transaction ID:
// it deletes mappings older than 24 h every 5 minutes
// (_cleanup_old_transaction_ids in
// synapse/storage/databases/main/events_worker.py, v1.67.0).
const SynapseTxnRetention = 24 * time.Hour

// txnMargin is taken off a retention for clocks that disagree and for the
// time between a reply being made and the server storing it.
const txnMargin = time.Hour

// TxnIDPolicy decides, for matrix.txn_ids_survive_restart = mode ("auto",
// "yes" or "no"), whether Lisa counts on the server recognising her
// transaction IDs after it restarted. "auto" says yes only for Synapse
// from v1.67.0 on (the first version whose source this was read in):
// Synapse stores the transaction ID with the event, in the same database
// transaction (_persist_transaction_ids_txn after _store_event_txn in
// PersistEventsStore._persist_events_txn,
// synapse/storage/databases/main/events.py), looks it up per room, user,
// access token and transaction ID before creating an event
// (get_event_id_from_transaction_id in events_worker.py, called from
// EventCreationHandler in synapse/handlers/message.py) and keeps it 24 h.
// Anything else, an unknown version or no answer is "no": the unsafe
// direction is never guessed. The scope is taken as the access token for
// every Synapse (later versions scope it to the device, which a token
// change keeps; assuming the token is the stricter rule).
func TxnIDPolicy(mode string, id ServerIdentity) TxnIDs {
	keep := TxnIDs{Retention: SynapseTxnRetention - txnMargin, PerToken: true}
	switch mode {
	case "yes":
		keep.Reason = `matrix.txn_ids_survive_restart = "yes"`
		return keep
	case "no":
		return TxnIDs{Reason: `matrix.txn_ids_survive_restart = "no"`}
	}
	switch {
	case id.Name == "":
		return TxnIDs{Reason: "the homeserver did not say what it is (a reverse proxy may hide it): holding replies in doubt, as for a server that forgets transaction IDs"}
	case id.Name != "Synapse":
		return TxnIDs{Reason: id.Name + " is not known to keep transaction IDs across its restarts: holding replies in doubt"}
	case !versionAtLeast(id.Version, 1, 67):
		return TxnIDs{Reason: "Synapse " + id.Version + " is older than 1.67.0, the version whose transaction-ID handling was checked: holding replies in doubt"}
	}
	keep.Reason = "Synapse " + id.Version + " keeps transaction IDs in its database for 24 h (per access token)"
	return keep
}

// versionAtLeast reports whether v ("1.67.0", "1.98.0rc1") is at least
// major.minor; false when it does not parse.
func versionAtLeast(v string, major, minor int) bool {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return false
	}
	ma, err1 := strconv.Atoi(parts[0])
	mi, err2 := strconv.Atoi(leadingDigits(parts[1]))
	if err1 != nil || err2 != nil {
		return false
	}
	return ma > major || ma == major && mi >= minor
}

// leadingDigits is the digits s starts with ("67rc1" → "67").
func leadingDigits(s string) string {
	for i, r := range s {
		if r < '0' || r > '9' {
			return s[:i]
		}
	}
	return s
}
