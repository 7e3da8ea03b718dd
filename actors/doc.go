// Package actors is the root of Lisa's actor tree (see docs/architecture.md):
//
//	app        root supervisor (package app)
//	├── rooms  room supervisor and concurrency limiter (package rooms)
//	│   └── <room ID>  persistent room actor (package room)
//	│       └── inv-N  invocation child (package invocation)
//	└── ...    sync, tools and admin actors arrive with their issues
//
// Packages under actors/ never import adapters, Badger, mautrix, go-openai
// or net/http; they declare the small interfaces they need and cmd/lisa
// wires the implementations. An architecture test enforces this.
package actors
