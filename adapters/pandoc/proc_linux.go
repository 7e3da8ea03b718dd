//go:build linux

package pandoc

import (
	"os/exec"
	"runtime"
	"syscall"
)

// runChild runs cmd with SIGKILL as its parent-death signal
// (prctl(PR_SET_PDEATHSIG)), so the kernel kills the converter when the
// daemon dies without cleaning up: SIGKILL, the OOM killer, a crash. The
// process-group handling of isolate is kept; the death signal reaches the
// direct child only, which with --sandbox is the only process.
//
// The kernel ties that signal to the OS thread that forked the child, not
// to the process (prctl(2); golang/go#27505), and the Go runtime ends a
// thread whenever a goroutine returns while locked to it. Were the forking
// thread to go back to the scheduler's pool, any goroutine that locks a
// thread and returns, in this program or a library, could kill a
// conversion in flight. runChild therefore locks the calling goroutine to
// its thread from before the fork until Wait has reaped the child: while
// the child lives no other goroutine runs on, and so none can end, that
// thread. The lock nests with any lock the caller holds. A blocked
// conversion already occupied its thread in the wait system call, so this
// costs no extra threads.
//
// The death signal is cleared by the kernel when a set-user-ID or
// set-group-ID program is executed; pandoc is not one.
func runChild(cmd *exec.Cmd) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return cmd.Run()
}
