// Package synapse runs a real Synapse homeserver (version [Version], the
// last release without a Rust extension) on 127.0.0.1, from its source
// tarball, on Debian's Python. Like devkit/dendrite it never imports testing:
// tests use the thin wrapper testkit/synapse, whose Start ties a server to a
// test's lifetime and skips where Synapse cannot run; `lisa-chaos` can link
// this package.
//
// # Prerequisites
//
// The package installs nothing. It needs the source tarball (a `git
// archive` of v1.67.0 with synapse/ and LICENSE), found by [FindTarball]:
// the file LISA_SYNAPSE_TARBALL ([TarballEnv]) names, else
// ../shared/tools/synapse/synapse-1.67.0.tar.gz beside Lisa's module root.
// It needs Debian's /usr/bin/python3 ([DefaultPython]) with the python3-*
// packages [DebianPackages] lists (bookworm's versions work). [Prerequisites]
// reports, in one *[MissingError], everything that is missing.
//
// [EnsureSource] unpacks the tarball once per content into
// $LISA_CACHE_DIR/synapse-1.67.0/<hash> (LISA_CACHE_DIR, [CacheDirEnv],
// defaults to [os.UserCacheDir]/lisa) under a cross-process lock, and adds
// the minimal matrix_synapse-1.67.0.dist-info/METADATA without which
// Synapse does not import (it reads its version and dependencies from
// installed package metadata).
//
// # Server
//
// [Launch] writes homeserver.yaml (server name "localhost", one plain HTTP
// client listener on 127.0.0.1 and a free port, SQLite, a random
// registration shared secret, no trusted key servers, presence and
// statistics off, bcrypt rounds 4, and rate limits raised beyond what tests
// reach unless [Options.DefaultRateLimits] keeps Synapse's), writes an
// ed25519 signing key in Synapse's format on the first launch on a data
// directory (what --generate-keys would write, without its Python
// start-up), starts
// `python3 -m synapse.app.homeserver` in its own process group and waits
// until GET /_matrix/client/versions answers. A [Server] registers users
// with shared-secret registration (/_synapse/admin/v1/register, HMAC-SHA1)
// and logs them in with a device ID of the caller's choice
// ([Server.RegisterUser], [Server.RegisterAdmin], [Server.Login]), restarts
// Synapse on the same port and database ([Server.Restart]), kills it as a
// crash would ([Server.Kill]) and stops it ([Server.Stop]: SIGTERM, then
// SIGKILL after a grace). The caller must call [Server.Stop].
//
// # Synapse behaviour tests rely on
//
// Synapse 1.67 keeps a send's transaction ID in its database (table
// event_txn_id, keyed by room, user, access token and txn ID; rows older than
// 24 h are deleted), so after [Server.Restart] the same access token and
// txnId return the original event ID instead of creating a duplicate; an
// in-memory cache (synapse/rest/client/transactions.py) answers repeats
// within 30 to 60 minutes without touching the database. Access tokens
// survive restarts. Server admins are not exempt from
// rc_message (0.2 messages/s, burst 10): beyond it a send gets HTTP 429
// M_LIMIT_EXCEEDED with retry_after_ms.
//
// Secrets (the shared secret, the macaroon key, passwords, access tokens)
// never appear in logs or errors produced by this package; [Account] redacts
// its access token when formatted or logged, and the output tail in errors
// has the secrets and every access token [Server.Login] returned masked.
package synapse
