//go:build unix

package roomctx

import (
	"syscall"
	"testing"
	"time"
)

// processCPU is the CPU time the process has used, user and system, the
// garbage collector's included.
func processCPU(t testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
