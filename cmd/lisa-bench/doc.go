// Command lisa-bench measures Lisa against the physical floor of this
// machine: latency through a fake homeserver (run with the fake LLM in a
// child process of the bench, so that their CPU is not counted as
// Lisa's) and through Dendrite, Lisa's CPU per invocation, throughput
// across many rooms, memory per idle room and start-up time with a large
// journal. docs/performance.md explains the figures.
//
//	go run ./cmd/lisa-bench            # a few minutes; -json FILE keeps the report
//
// It is a command of its own so that the production binary, cmd/lisa,
// links none of its fakes.
package main
