//go:build !race

package hostile

// RaceEnabled reports whether the race detector is compiled in.
const RaceEnabled = false
