// Package demo is `lisa demo`: Lisa's main job shown on this machine with
// nothing but Go. It builds the demo's world — a real Dendrite on
// 127.0.0.1 (package [github.com/lisabot/lisa/devkit/dendrite]), or a
// real Synapse where [Options.Homeserver] says so (both through package
// [github.com/lisabot/lisa/devkit/homeserver]), a room
// where Bob and Alice talk, a local SearXNG and web site standing in for
// the internet, and the scripted model of this package (or a real
// OpenAI-compatible one) — runs Lisa's actor tree against it through
// package daemon, plays a short conversation and prints it as the
// homeserver stores it, with one line per answer from Lisa's own logs and
// counters.
//
// The scripted model plays three believable turns from what Lisa sends
// it: an answer from an earlier message of the room, a researched answer
// (search, fetch, convert, cite) and a follow-up to that answer.
//
// Like all of devkit this is product code linked into the daemon binary:
// it never imports testing or testkit. The command in cmd/lisa only
// parses flags and maps the result to an exit code.
package demo
