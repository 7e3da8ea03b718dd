// Command lisa-chaos attacks Lisa: a seeded fault campaign (SIGKILLs,
// failpoint kills, actor panics, homeserver restarts, lost, throttled and
// corrupted HTTP responses) against a local Dendrite and a scripted LLM,
// ending with a report of duplicates and losses (both must be 0).
//
//	go run ./cmd/lisa-chaos --seed 42 --duration 10m
//
// It runs Lisa as its own subprocess (`lisa-chaos run --config FILE`), a
// build of the daemon with the failpoints and fault injection of package
// chaos armed; the production binary, cmd/lisa, carries none of them.
package main
