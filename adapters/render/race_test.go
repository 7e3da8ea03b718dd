//go:build race

package render

// costScale multiplies the CPU bounds of the cost tests: the race
// detector makes the renderer up to ten times slower.
const costScale = 10
