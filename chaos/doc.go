// Package chaos proves, with numbers, that Lisa loses nothing and
// duplicates nothing under faults.
//
// It has three parts:
//
//   - actor faults: a seeded [ActorPlan] injected through protoactor spawn,
//     sender and receiver middleware into every actor of a running Lisa
//     (panic before or after a send, stop after a send, panic on receive),
//     and failpoint kills at the fragile points of the reply protocol;
//   - network faults: [Proxy], a seeded HTTP fault proxy that sits between
//     Lisa and the homeserver or the LLM and drops responses after the
//     upstream succeeded, resets connections, answers 429 and 5xx, adds
//     latency and truncates or corrupts JSON bodies;
//   - the campaign runner, [Run]: a real homeserver (Dendrite or Synapse,
//     through devkit/homeserver), a scripted LLM and Lisa
//     as a subprocess under all of the above plus SIGKILLs and homeserver
//     restarts, with human traffic in several rooms, followed by the
//     invariant checks of [Report] (every invocation answered exactly once
//     as counted on the homeserver, nothing else answered, journals replay
//     to the live state, no leaked actors or goroutines, typing cleared).
//
// `go test ./chaos` runs a short seeded campaign; `lisa-chaos --seed S
// --duration D` runs a long one and prints the report.
package chaos
