// Package buildinfo reads what the Go toolchain recorded about the running
// binary: the module version, the VCS revision and time, whether the work
// tree had changes, and the Go version. `lisa version`, the start-up log
// line, `lisa health`, the status page and the lisa_build_info metric all
// show the same [Info].
//
// It is a leaf package: it imports only the standard library.
package buildinfo
