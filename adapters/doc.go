// Package adapters groups Lisa's adapters: one package per outside library
// or service (admin socket, llm, logging, matrix, metrics, pandoc, render,
// research, roomctx, search, web). Adapters implement the small interfaces
// the actors declare; no adapter imports an actor or another adapter, and
// package daemon wires them together.
package adapters
