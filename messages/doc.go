// Package messages is Lisa's leaf vocabulary: typed identifiers, the error
// codes that travel between actors and into logs, the commands the actors
// exchange, and the data that crosses the answer pipeline's ports: chat
// messages and model tool calls (chat.go), typed tool calls and results
// for the tool pool, search hits and web pages (tool.go), the final answer
// and the reply to render. The persisted events and snapshots live in the roompb
// subpackage as protobuf.
//
// The package imports nothing of Lisa's and no outside library except the
// generated protobuf code, so every other package may depend on it.
package messages
