package testbed

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const (
	readyTimeout = 10 * time.Second
	stopTimeout  = 10 * time.Second
	logTailLines = 40
)

// server is a child process a test owns, on a fixed address: started and
// probed until it serves, stopped or killed, started again on the same
// address and data.
type server struct {
	name    string // the program, for messages
	addr    string // where it serves
	tb      testing.TB
	bin     string
	args    []string
	dir     string // working dir
	logPath string
	probe   func() error // nil once the server answers
	// readyWithin and stopWithin override readyTimeout and stopTimeout
	// when set (korvet may wait a lease time before it serves).
	readyWithin, stopWithin time.Duration

	mu   sync.Mutex
	proc *process // nil while stopped
}

// Stop ends the server with SIGTERM and waits for it.
func (s *server) Stop() { s.halt(syscall.SIGTERM) }

// Kill ends the server with SIGKILL, as a crash would. What it had
// already written to disk survives, as the page cache outlives it.
func (s *server) Kill() { s.halt(syscall.SIGKILL) }

// Restart starts the server again on the same address and data, stopping
// it first if it runs.
func (s *server) Restart(tb testing.TB) {
	tb.Helper()
	s.Stop()
	var err error
	// The old socket may linger for a moment after the process exits.
	for try := 0; try < 5; try++ {
		if err = s.start(); err == nil {
			return
		}
		time.Sleep(200 * time.Millisecond) // between tries: time for the socket to go
	}
	tb.Fatalf("testbed: restart: %v", err)
}

func (s *server) halt(sig syscall.Signal) {
	s.mu.Lock()
	p := s.proc
	s.proc = nil
	s.mu.Unlock()
	if p != nil {
		p.halt(s.tb, s.name, sig, s.stopLimit())
	}
}

func (s *server) start() error {
	p, err := spawn(s.bin, s.args, s.dir, s.logPath)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.proc = p
	s.mu.Unlock()
	if err := s.waitReady(p); err != nil {
		s.Kill()
		return fmt.Errorf("%s on %s: %w\n--- tail of %s ---\n%s", s.name, s.addr, err, s.logPath, logTail(s.logPath))
	}
	return nil
}

// waitReady polls the probe until it passes, the process exits or
// readyTimeout passes.
func (s *server) waitReady(p *process) error {
	within := readyTimeout
	if s.readyWithin > 0 {
		within = s.readyWithin
	}
	deadline := time.Now().Add(within)
	var last error
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			return fmt.Errorf("exited during startup: %v", p.waitErr)
		default:
		}
		if last = s.probe(); last == nil {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("not ready after %v: %w", within, last)
}

func (s *server) stopLimit() time.Duration {
	if s.stopWithin > 0 {
		return s.stopWithin
	}
	return stopTimeout
}

// logTail is the end of a server's log, for a failure message.
func logTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read log: %v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > logTailLines {
		lines = lines[len(lines)-logTailLines:]
	}
	return strings.Join(lines, "\n")
}
