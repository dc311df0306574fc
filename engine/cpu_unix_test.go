//go:build unix

package engine

import (
	"syscall"
	"time"
)

// processCPU is the user+system CPU time this process has used (the
// benchmark's korvet side; Redis runs in its own process).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
