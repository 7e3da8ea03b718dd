// Package daemon is Lisa's composition root: the one package that wires
// adapters (Matrix, LLM, web, pandoc, render, metrics, admin socket,
// Badger) to the actor tree's ports, starts the tree and stops it
// gracefully. `lisa run`, `lisa demo` and the bench and chaos commands
// all start Lisa through it; test and chaos builds arm their failpoints
// and fault injection through [ArmFunc], so the production binary carries
// none of them.
package daemon
