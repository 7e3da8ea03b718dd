// Package dendrite runs a real Dendrite homeserver (version [Version]) on
// 127.0.0.1. It is part of the local development stack used by `lisa demo`
// and by the test kit; it never imports testing (tests use the thin wrapper
// testkit/dendrite, whose Start ties a server to a test's lifetime).
//
// # Binary
//
// [EnsureBinary] returns the path of a dendrite executable. The environment
// variable LISA_DENDRITE_BIN ([BinaryEnv]) names a prebuilt binary and wins
// outright. Otherwise the binary lives at
// $LISA_CACHE_DIR/dendrite-v0.13.8/dendrite, where LISA_CACHE_DIR
// ([CacheDirEnv]) defaults to [os.UserCacheDir]/lisa. When it is missing it is
// built with the go command from a separate, embedded build module (the files
// dendrite.gomod and dendrite.gosum in this directory, written out as
// go.mod/go.sum under the cache), so Dendrite's dependencies never enter
// Lisa's own module and the build works without Lisa's source tree. A
// file lock in the cache directory serializes builds across processes, so
// parallel test packages build at most once.
//
// To move to another Dendrite release: copy dendrite.gomod and dendrite.gosum
// into an empty directory as go.mod and go.sum, run
// `go get -tool github.com/matrix-org/dendrite/cmd/dendrite@vX.Y.Z`, copy them
// back, and update [Version].
//
// # Server
//
// [Launch] writes a fresh ed25519 signing key (kept if the data directory
// already has one) and a minimal SQLite configuration (server name
// "localhost", federation disabled, no key perspectives, a random
// registration shared secret, rate limiting off unless asked for, bcrypt cost
// 4, log level warn), starts Dendrite on a free loopback port in its own
// process group, and waits until GET /_matrix/client/versions answers. A
// [Server] registers users through shared-secret registration and logs them
// in with a device ID of the caller's choice ([Server.RegisterUser],
// [Server.RegisterAdmin], [Server.Login]), restarts Dendrite on the same port
// and data ([Server.Restart]) and stops it ([Server.Stop]). The caller must
// call [Server.Stop].
//
// # Dendrite behaviour tests rely on
//
// Dendrite remembers client transaction IDs (PUT .../send/{type}/{txnId}) in
// memory only: the same access token and txnId return the original event ID
// for 30 to 60 minutes, but after [Server.Restart] the same txnId creates a
// new, duplicate event. Logging in again with the same device ID revokes that
// device's previous access token. Admin accounts are exempt from rate
// limiting.
//
// Secrets (the shared secret, passwords, access tokens) never appear in logs
// or errors produced by this package; [Account] redacts its access token when
// formatted or logged.
package dendrite
