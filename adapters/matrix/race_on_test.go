//go:build race

package matrix

// cpuBoundScale multiplies the CPU bounds of cost tests: the race
// detector slows code down by up to an order of magnitude. Allocation
// bounds are not scaled.
const cpuBoundScale = 10
