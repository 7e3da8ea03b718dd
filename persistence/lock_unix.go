//go:build unix

package persistence

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// badgerLockFile is the file in which an open Badger store notes its
// process ID (badger's lockFile); the lock itself is a flock on the
// directory.
const badgerLockFile = "LOCK"

// LockState is what [ProbeLock] found.
type LockState struct {
	// Held: another process (or another open of the store in this one)
	// holds the store's lock, so the store cannot be opened now.
	Held bool
	// PID is the holder's process ID as its LOCK file gives it; 0 when
	// it is not known.
	PID int
}

// ProbeLock reports whether the Badger store in dir is open somewhere.
// An open store holds an exclusive flock on its directory; ProbeLock asks
// for a shared one without waiting and, if it gets it, releases it at
// once. It never opens the store and writes nothing. A store being opened
// at that very instant fails its open (as it would beside a running Lisa).
//
// An error means the lock could not be tried: dir cannot be opened, or the
// filesystem does not support flock (ENOLCK, EOPNOTSUPP), in which case
// Badger cannot open a store there either.
func ProbeLock(dir string) (LockState, error) {
	f, err := os.Open(dir)
	if err != nil {
		return LockState{}, err
	}
	defer f.Close()
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	switch {
	case err == nil:
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		return LockState{}, nil
	case errors.Is(err, syscall.EWOULDBLOCK):
		return LockState{Held: true, PID: lockPID(dir)}, nil
	}
	return LockState{}, fmt.Errorf("flock %s: %w", dir, err)
}

// lockPID reads the process ID an open store wrote to its LOCK file; 0
// when there is none.
func lockPID(dir string) int {
	b, err := os.ReadFile(filepath.Join(dir, badgerLockFile))
	if err != nil || len(b) > 32 {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}
