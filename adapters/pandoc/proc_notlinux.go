//go:build !linux

package pandoc

import "os/exec"

// runChild runs cmd. Only Linux offers a parent-death signal; elsewhere a
// converter outlives a daemon that is killed without cleaning up, until
// its own input ends.
func runChild(cmd *exec.Cmd) error { return cmd.Run() }
