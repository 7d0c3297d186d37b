//go:build race

package numeric

const raceEnabled = true
