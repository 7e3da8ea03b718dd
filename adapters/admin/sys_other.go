//go:build !unix

package admin

import (
	"net"
	"os"
)

// fileOwner cannot tell the owner of a file on this system, so every
// socket directory is refused.
func fileOwner(os.FileInfo) (int, bool) { return 0, false }

// connState is what a connection holds for reading right now.
type connState int

const (
	connIdle    connState = iota // open, nothing to read
	connClosed                   // closed by the peer (or broken)
	connPending                  // data waiting
)

// pendingData cannot look ahead on this system: it assumes the
// connection is open and idle.
func pendingData(net.Conn) connState { return connIdle }
