// Command lisa is the Lisa Matrix chat bot and its operator tools.
//
// Usage:
//
//	lisa <command> [flags]
//
// Commands:
//
//	run --config FILE            run Lisa until SIGTERM or SIGINT
//	check-config --config FILE   validate a configuration file, its env:
//	                             secrets and its persona file
//	doctor --config FILE [--only SECTION,...]
//	                             check online what Lisa needs: homeserver,
//	                             rooms, LLM, SearXNG, converter, data dir;
//	                             exit 0 ok, 1 warnings, 2 cannot work
//	shell (--config FILE | --socket PATH) [--json]
//	                             debug shell of a running Lisa
//	health (--config FILE | --socket PATH)
//	                             exit 0 healthy, 1 degraded, 2 unreachable
//	demo [--homeserver dendrite|synapse] [--exit-after-transcript]
//	                             Lisa on this machine: local Dendrite, a
//	                             room, a scripted (or real) LLM
//
// Exit codes: 0 success, 1 runtime failure, 2 usage or configuration
// problem. Run "lisa help" for the current list of commands.
//
// The command is thin: package daemon wires and runs Lisa, and package
// devkit/demo is the demo. main is a shell
// around run, which takes its arguments, standard streams and environment
// lookup as parameters so tests can drive every command without touching
// the process state. This binary links no test code, fakes or failpoints;
// the benchmark and the fault campaign are cmd/lisa-bench and
// cmd/lisa-chaos.
package main
