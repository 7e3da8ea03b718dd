// Package homeserver runs a test against each real homeserver in a list.
//
// The interface ([Server]), the adapters and the launcher by name live in
// [github.com/lisabot/lisa/devkit/homeserver]; this package re-exports them
// (type aliases) and adds what tests need: [Start] launches one server by
// name for a test (through testkit/dendrite or testkit/synapse, so a missing
// Synapse skips in one line, or fails with LISA_REQUIRE_SYNAPSE=1) and stops
// it in t.Cleanup; [List] says which servers a test runs against; [Each]
// runs a subtest per server, named by the server.
//
// The list comes from LISA_HOMESERVERS ([Env]), e.g. "dendrite,synapse";
// a server it names that cannot run here fails the test. Unset, it is
// Dendrite (which the test kit builds wherever Go is) plus Synapse where it
// can run or LISA_REQUIRE_SYNAPSE=1 requires it; where Synapse is left out,
// [List] logs one line saying what is missing.
package homeserver
