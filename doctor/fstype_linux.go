//go:build linux

package doctor

import "syscall"

// filesystemOf returns the filesystem dir is on.
func filesystemOf(dir string) (filesystem, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return filesystem{}, err
	}
	return classifyFS(uint32(st.Type)), nil
}
