package testbed

import (
	"os/exec"
	"syscall"
)

// setDeathSignal makes the kernel kill redis-server if the test binary dies
// without running cleanups (e.g. a go test timeout panic).
func setDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
