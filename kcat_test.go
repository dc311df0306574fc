package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// inCI tells whether the CI environment variable is set (CI=true in CI).
func inCI() bool {
	v := os.Getenv("CI")
	return v != "" && v != "0" && v != "false"
}

// TestKcatSmoke runs scripts/kcat-smoke.sh with the binary the other
// process tests use: kcat (librdkafka) produces and consumes through a real
// korvet on a real redis-server, with every compression codec. Without kcat
// it skips, except in CI, where scripts/test.sh installs kcat.
func TestKcatSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("runs kcat against the binary")
	}
	for _, c := range []string{"kcat", "redis-server", "bash"} {
		if _, err := exec.LookPath(c); err != nil {
			if inCI() {
				t.Fatalf("%s is missing in CI (scripts/test.sh installs it): %v", c, err)
			}
			t.Skipf("%s is not installed (apt-get install kcat redis-server; scripts/test.sh does)", c)
		}
	}
	bin := korvetBinary(t)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "scripts/kcat-smoke.sh")
	cmd.Env = append(os.Environ(), "KORVET_BIN="+bin)
	// On timeout, SIGTERM lets the script's trap stop redis and korvet.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 30 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	t.Logf("scripts/kcat-smoke.sh (%v):\n%s", time.Since(start).Round(time.Millisecond), out.String())
	switch {
	case err == nil:
	case ctx.Err() != nil:
		t.Fatalf("kcat smoke test did not finish within 5 minutes")
	default:
		t.Fatalf("kcat smoke test failed: %v", err)
	}
}
