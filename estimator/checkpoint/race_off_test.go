//go:build !race

package checkpoint

// raceEnabled: the race detector slows the tests down, so the big-table
// tests use a smaller table under it.
const raceEnabled = false
