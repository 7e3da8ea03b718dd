package hostile

import (
	"runtime"
	"syscall"
	"time"
)

// Per-event bounds on this project's 2-core CI machine (issue #15): one
// hostile event may cost at most this much CPU and memory on its way
// through classification, context building and rendering.
const (
	// MaxCPU is the CPU time one event may cost. Under the race
	// detector, code runs several times slower; see CPUBound.
	MaxCPU = 50 * time.Millisecond
	// MaxAlloc is the heap one event may allocate, in bytes.
	MaxAlloc = 16 << 20
	// raceSlowdown is how much slower the race detector makes this code.
	raceSlowdown = 10
)

// CPUBound is MaxCPU, scaled when the race detector is on.
func CPUBound() time.Duration {
	if RaceEnabled {
		return MaxCPU * raceSlowdown
	}
	return MaxCPU
}

// Cost is what one call cost.
type Cost struct {
	// CPU is the process's user plus system time during the call. Run
	// measured calls one at a time: other goroutines count too.
	CPU time.Duration
	// Alloc is the bytes allocated on the heap during the call.
	Alloc uint64
}

// Measure runs f once and reports its cost. It collects garbage first so
// an earlier call's debt is not charged to f.
func Measure(f func()) Cost {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	cpu0 := cpuTime()
	f()
	cpu1 := cpuTime()
	runtime.ReadMemStats(&after)
	return Cost{CPU: cpu1 - cpu0, Alloc: after.TotalAlloc - before.TotalAlloc}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
