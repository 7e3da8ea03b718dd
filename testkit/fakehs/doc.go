// Package fakehs is an in-process fake Matrix homeserver for benchmarks
// and tests. It speaks the client-server wire format for exactly what Lisa
// uses — whoami, /sync (since, long-poll timeout, timeline limit,
// limited/prev_batch), PUT send with transaction IDs (idempotent per
// access token), GET /event, /context, /messages, /joined_members and
// typing — on a loopback address, with no federation, state resolution or
// persistence. It exists to isolate Lisa's own cost from a real
// homeserver's: the bench command measures Lisa's added latency between
// the moment the fake can deliver a message and the moment Lisa's reply
// PUT arrives.
//
// Rooms are created by the test ([Server.CreateRoom]); messages are
// injected with [Server.Post], which returns the instant the event became
// deliverable. Every reply Lisa sends is reported on [Server.Sends].
package fakehs
