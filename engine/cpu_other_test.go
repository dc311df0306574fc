//go:build !unix

package engine

import "time"

// processCPU is not measured here.
func processCPU() time.Duration { return 0 }
