package chaos

import (
	"os"
	"strings"
	"time"

	"github.com/lisabot/lisa/daemon"
)

// ClockShiftEnv names a file whose content, a Go duration ("25h"), a test
// build of Lisa adds to the clock its token budgets read the day from
// (daemon.Deps.Clock), read afresh at every use: a test moves Lisa past
// midnight by writing the file. A missing or empty file is no shift. The
// production binary does not read it.
const ClockShiftEnv = "LISA_TEST_CLOCK_SHIFT_FILE"

// armClock sets deps.Clock when ClockShiftEnv names a file.
func armClock(getenv func(string) (string, bool), deps *daemon.Deps) {
	path, _ := getenv(ClockShiftEnv)
	if path == "" {
		return
	}
	deps.Clock = func() time.Time {
		now := time.Now()
		b, err := os.ReadFile(path)
		if err != nil {
			return now
		}
		d, err := time.ParseDuration(strings.TrimSpace(string(b)))
		if err != nil {
			return now
		}
		return now.Add(d)
	}
}
