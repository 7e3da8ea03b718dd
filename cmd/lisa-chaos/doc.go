// Command lisa-chaos attacks Lisa: a seeded fault campaign (SIGKILLs,
// failpoint kills, actor panics, homeserver restarts, lost, throttled and
// corrupted HTTP responses) against a local homeserver and a scripted LLM,
// ending with a report of duplicates and losses (both must be 0).
//
//	go run ./cmd/lisa-chaos --seed 42 --duration 10m
//	go run ./cmd/lisa-chaos --seed 42 --duration 10m --homeserver synapse
//
// The homeserver is Dendrite by default (the cached build, or
// $LISA_DENDRITE_BIN) or Synapse 1.67.0 from its source tarball
// ($LISA_SYNAPSE_TARBALL, ../shared/tools/synapse/ or third_party/synapse)
// with its rate limits raised.
//
// It runs Lisa as its own subprocess (`lisa-chaos run --config FILE`), a
// build of the daemon with the failpoints and fault injection of package
// chaos armed; the production binary, cmd/lisa, carries none of them.
package main
