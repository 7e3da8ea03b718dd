//go:build unix

package pandoc

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
)

// isolate puts the child in its own process group and makes cancellation
// kill that whole group, so helpers it may spawn die with it.
func isolate(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil {
			if errors.Is(err, syscall.ESRCH) {
				return os.ErrProcessDone
			}
			return err
		}
		return nil
	}
}
