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

// Eventually polls cond until it holds, failing the test with cond's last
// word on the state (its second result) when within passes first.
func Eventually(tb testing.TB, within time.Duration, what string, cond func() (bool, string)) {
	tb.Helper()
	deadline := time.Now().Add(within)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%s: not within %v (last: %s)", what, within, state)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
