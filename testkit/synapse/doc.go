// Package synapse is the test kit's face of the real Synapse homeserver
// launcher in devkit/synapse.
//
// Unpacking, launching, restarting, killing and stopping Synapse and
// registering users live in [github.com/lisabot/lisa/devkit/synapse], which
// never imports testing; read its documentation for the prerequisites (the
// source tarball named by LISA_SYNAPSE_TARBALL, Debian's python3 packages),
// the cache (LISA_CACHE_DIR) and the Synapse behaviour tests rely on
// (transaction IDs survive [Server.Restart]; default rate limits). This
// package re-exports what tests use (type aliases, so values are
// interchangeable) and adds [Start], which skips the test in one line where
// Synapse cannot run (or fails it with LISA_REQUIRE_SYNAPSE=1), launches the
// server, fails the test on error and stops the server in t.Cleanup.
package synapse
