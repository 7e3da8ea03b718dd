// Package roompb holds the protobuf types Lisa persists: room journal
// events, room snapshots and sync ledger records. room.pb.go is generated
// from room.proto by `go generate ./...` and committed.
package roompb
