// Package dendrite is the test kit's face of the real Dendrite homeserver
// launcher in devkit/dendrite.
//
// Building, launching, restarting and stopping Dendrite and registering
// users live in [github.com/lisabot/lisa/devkit/dendrite], which `lisa demo`
// links and which therefore never imports testing; read its documentation
// for the binary cache (LISA_DENDRITE_BIN, LISA_CACHE_DIR), the server and
// the Dendrite behaviour tests rely on (transaction IDs are forgotten on
// [Server.Restart]). This package re-exports what tests use (type aliases,
// so values are interchangeable) and adds [Start], which builds or finds the
// binary, launches the server, fails the test on error and stops the server
// in t.Cleanup. Test code keeps importing this package; non-test code
// imports devkit/dendrite.
package dendrite
