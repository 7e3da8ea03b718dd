// Package hsproc holds the pieces of process handling the test
// homeservers' launchers (devkit/dendrite, devkit/synapse) share: the
// bounded tail of a server's output, the text of its exit, and the
// readiness probe of its client API.
package hsproc
