// Package adapters groups Lisa's adapters: one package per outside library
// or service (logging, and with later issues matrix, llm, search, web,
// pandoc, render). Adapters implement the small interfaces the actors
// declare; cmd/lisa wires them together.
package adapters
