package dendrite_test

import (
	"errors"
	"os"
	"syscall"
	"testing"

	devdendrite "github.com/lisabot/lisa/devkit/dendrite"
	"github.com/lisabot/lisa/testkit/dendrite"
)

// TestStart checks the wrapper: Start launches a devkit server that works
// and stops it, removing its temporary data, when the test ends. The
// launcher itself is tested in devkit/dendrite.
func TestStart(t *testing.T) {
	t.Parallel()
	var (
		s   *devdendrite.Server // dendrite.Server is an alias
		pid int
	)
	if !t.Run("serve", func(t *testing.T) {
		s = dendrite.Start(t, dendrite.Options{})
		acct, err := s.RegisterUser(t.Context(), "wrapped", "wrapped-password-1", "WRAPDEV")
		if err != nil {
			t.Fatal(err)
		}
		var _ dendrite.Account = acct
		if acct.UserID != "@wrapped:localhost" {
			t.Errorf("user ID = %s, want @wrapped:localhost", acct.UserID)
		}
		pid = s.PID()
	}) {
		return
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("kill(%d, 0) after the test ended = %v, want ESRCH", pid, err)
	}
	if _, err := os.Stat(s.DataDir()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("data dir after the test ended: %v, want it removed", err)
	}
	if err := s.Restart(t.Context()); !errors.Is(err, dendrite.ErrStopped) {
		t.Errorf("Restart after the test ended = %v, want ErrStopped", err)
	}
}
