//go:build !linux

package doctor

import "errors"

// filesystemOf cannot tell filesystems apart on this system.
func filesystemOf(string) (filesystem, error) {
	return filesystem{}, errors.New("not supported on this system")
}
