//go:build !unix

package persistence

import "errors"

// LockState is what [ProbeLock] found.
type LockState struct {
	// Held: another process holds the store's lock.
	Held bool
	// PID is the holder's process ID; 0 when it is not known.
	PID int
}

// ProbeLock cannot look at Badger's lock on this system.
func ProbeLock(dir string) (LockState, error) {
	return LockState{}, errors.New("checking the store's lock is not supported on this system")
}
