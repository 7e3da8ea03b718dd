//go:build race

package chaos

// raceEnabled: the Lisa under test is built with the race detector too.
const raceEnabled = true
