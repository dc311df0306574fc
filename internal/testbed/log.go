package testbed

import (
	"log/slog"
	"os"
)

// Logger is the logger to give code under test: silent, or debug output
// on stderr when KORVET_TEST_LOG is set.
func Logger() *slog.Logger {
	if os.Getenv("KORVET_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}
