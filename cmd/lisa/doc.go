// Command lisa is the Lisa Matrix chat bot and its operator tools.
//
// Usage:
//
//	lisa <command> [flags]
//
// Commands:
//
//	check-config --config FILE   validate a configuration file, its
//	                             env: secrets and its persona file
//
// Exit codes: 0 success, 1 runtime failure, 2 usage or configuration
// problem. Run "lisa help" for the current list of commands.
//
// main is a thin shell around run, which takes its arguments, standard
// streams and environment lookup as parameters so tests can drive every
// command without touching the process state.
package main
