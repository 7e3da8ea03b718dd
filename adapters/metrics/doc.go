// Package metrics exposes Lisa's Prometheus metrics on an optional
// loopback-only listener (runtime.metrics_listen): sync outcomes and lag,
// invocations by outcome, per-phase latency histograms, LLM requests,
// retries and errors, tool calls, failures and bytes, mailbox lengths and
// actor restarts, and the database size. It uses its own registry (no
// global state) and the Prometheus Go client for the exposition format.
package metrics
