package testbed

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// process is a server the testbed started.
type process struct {
	cmd     *exec.Cmd
	done    chan struct{}
	waitErr error
}

// spawn starts bin in dir with its output appended to logPath; it dies
// with the test binary.
func spawn(bin string, args []string, dir, logPath string) (*process, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open log %s: %w", logPath, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Stdout = logf
	cmd.Stderr = logf
	setDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	return p, nil
}

// halt sends sig and waits for the exit, killing the process if it takes
// longer than within.
func (p *process) halt(tb testing.TB, name string, sig syscall.Signal, within time.Duration) {
	if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		tb.Logf("testbed: signal %s: %v", name, err)
	}
	select {
	case <-p.done:
	case <-time.After(within):
		tb.Errorf("testbed: %s did not exit %v after %v; killing it", name, within, sig)
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}
