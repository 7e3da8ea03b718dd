//go:build !race

package matrix

// cpuBoundScale multiplies the CPU bounds of cost tests; 1 without the
// race detector (see race_on_test.go).
const cpuBoundScale = 1
