// Package actors is the root of Lisa's actor tree (see docs/architecture.md):
//
//	app        root supervisor (package app)
//	├── rooms  room supervisor and concurrency limiter (package rooms)
//	│   └── <room ID>  persistent room actor (package room)
//	│       └── inv-N  invocation child: the whole answer (package invocation)
//	├── tools  tool pool of typed tool calls (package tools)
//	└── sync   Matrix intake (package syncer)
//
// Packages under actors/ never import adapters, Badger, mautrix, go-openai
// or net/http; they declare the small interfaces (ports) they need and
// package daemon wires the implementations. An architecture test enforces
// this.
package actors
