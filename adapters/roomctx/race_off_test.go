//go:build !race

package roomctx

// raceEnabled reports whether the race detector is on; it slows code
// down about tenfold, so CPU bounds in tests scale with it.
const raceEnabled = false
