package testbed

import (
	"testing"
	"time"
)

// WaitFor polls cond until it holds, failing the test when within has
// passed first: tests wait for a state, never for a fixed time.
func WaitFor(tb testing.TB, within time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
