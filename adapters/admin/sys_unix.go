//go:build unix

package admin

import (
	"errors"
	"net"
	"os"
	"syscall"
)

// fileOwner is the user ID owning a file.
func fileOwner(fi os.FileInfo) (int, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), true
}

// connState is what a connection holds for reading right now.
type connState int

const (
	connIdle    connState = iota // open, nothing to read
	connClosed                   // closed by the peer (or broken)
	connPending                  // data waiting
)

// pendingData looks, without blocking or consuming anything, whether the
// peer has sent data or closed the connection.
func pendingData(conn net.Conn) connState {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return connIdle
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return connClosed
	}
	state := connIdle
	err = raw.Read(func(fd uintptr) bool {
		var b [1]byte
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case err == nil && n > 0:
			state = connPending
		case err == nil: // end of stream
			state = connClosed
		case errors.Is(err, syscall.EAGAIN), errors.Is(err, syscall.EINTR):
			state = connIdle
		default: // reset, say
			state = connClosed
		}
		return true
	})
	if err != nil {
		return connClosed
	}
	return state
}
