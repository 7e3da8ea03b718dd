// Package messages is Lisa's leaf vocabulary: typed identifiers, the error
// codes that travel between actors and into logs, and the commands the
// actors exchange. The persisted events and snapshots live in the roompb
// subpackage as protobuf.
//
// The package imports nothing of Lisa's and no outside library except the
// generated protobuf code, so every other package may depend on it.
package messages
