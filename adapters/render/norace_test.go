//go:build !race

package render

// costScale multiplies the CPU bounds of the cost tests; 1 without the
// race detector.
const costScale = 1

// allocScale multiplies the allocation bound of TestHostileMarkdownCost;
// 1 without the race detector.
const allocScale = 1
