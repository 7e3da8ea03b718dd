//go:build race

package render

// costScale multiplies the CPU bounds of the cost tests: the race
// detector makes the renderer up to ten times slower.
const costScale = 10

// allocScale multiplies the allocation bound of TestHostileMarkdownCost:
// under the race detector sync.Pool drops a quarter of what is put back,
// so the regular expressions of goldmark's linkify and raw HTML parsers
// allocate a fresh machine for many of their matches.
const allocScale = 8
