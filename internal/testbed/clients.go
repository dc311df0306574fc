package testbed

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// NeedClient skips tb when a client program (kcat, a python module) is
// missing, but fails it in CI, where scripts/test.sh installs them. cmd is
// a command that succeeds only when the client is there.
func NeedClient(tb testing.TB, what string, cmd ...string) {
	tb.Helper()
	if err := exec.Command(cmd[0], cmd[1:]...).Run(); err != nil {
		if os.Getenv("CI") != "" {
			tb.Fatalf("%s is missing in CI: %v", what, err)
		}
		tb.Skipf("%s is not installed: %v", what, err)
	}
}

// RunCmd runs a client program with a deadline, stdin as its input, and
// returns its stdout; it fails the test, with the client's stderr, if the
// client fails or overruns.
func RunCmd(tb testing.TB, within time.Duration, stdin []byte, name string, args ...string) string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	var out, errOut bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(stdin), &out, &errOut
	if err := cmd.Run(); err != nil {
		tb.Fatalf("%s %s: %v (deadline %v)\nstderr:\n%s", name, strings.Join(args, " "), err, within, errOut.String())
	}
	return out.String()
}
