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

// Per-page bounds on the built-in HTML-to-Markdown converter (issue #33),
// which runs inside Lisa: one conversion may cost at most a base amount
// plus an amount per MiB of HTML. (Pandoc runs as a child process with its
// own heap limit; its bound is its timeout.)
const (
	// ConvertBaseCPU and ConvertCPUPerMiB bound one conversion's CPU time
	// (scaled under the race detector; see ConvertCPUBound).
	ConvertBaseCPU   = 100 * time.Millisecond
	ConvertCPUPerMiB = time.Second
	// ConvertBaseAlloc and ConvertAllocPerMiB bound the bytes one
	// conversion allocates on the heap.
	ConvertBaseAlloc   = 32 << 20
	ConvertAllocPerMiB = 192 << 20
)

// ConvertCPUBound is the CPU time a conversion of n bytes of HTML may
// cost, scaled when the race detector is on.
func ConvertCPUBound(n int) time.Duration {
	d := ConvertBaseCPU + time.Duration(float64(ConvertCPUPerMiB)*float64(n)/(1<<20))
	if RaceEnabled {
		return d * raceSlowdown
	}
	return d
}

// ConvertAllocBound is the heap a conversion of n bytes of HTML may
// allocate.
func ConvertAllocBound(n int) uint64 {
	return ConvertBaseAlloc + uint64(float64(ConvertAllocPerMiB)*float64(n)/(1<<20))
}

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
	// ChildCPU is the CPU time of the child processes that ended and were
	// waited for during the call (pandoc's).
	ChildCPU time.Duration
	// Alloc is the bytes allocated on the heap during the call.
	Alloc uint64
}

// Measure runs f once and reports its cost. It collects garbage first so
// an earlier call's debt is not charged to f.
func Measure(f func()) Cost {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	cpu0, child0 := cpuTime(syscall.RUSAGE_SELF), cpuTime(syscall.RUSAGE_CHILDREN)
	f()
	cpu1, child1 := cpuTime(syscall.RUSAGE_SELF), cpuTime(syscall.RUSAGE_CHILDREN)
	runtime.ReadMemStats(&after)
	return Cost{CPU: cpu1 - cpu0, ChildCPU: child1 - child0, Alloc: after.TotalAlloc - before.TotalAlloc}
}

func cpuTime(who int) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(who, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
