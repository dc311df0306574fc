//go:build !race

package cold

const raceEnabled = false
