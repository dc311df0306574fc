package testbed

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"
)

// PID is the process id of the running server (a broker, redis-server,
// versitygw); 0 while it is stopped.
func (s *server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return 0
	}
	return s.proc.cmd.Process.Pid
}

// CPUTime is the CPU time (user and system) the server's process has used
// since it started, from /proc/PID/stat, so that benchmarks can say how
// much CPU each process spent per record. It fails where there is no /proc
// or while the server is stopped.
func (s *server) CPUTime() (time.Duration, error) {
	pid := s.PID()
	if pid == 0 {
		return 0, fmt.Errorf("testbed: %s is not running", s.name)
	}
	return processCPU(pid)
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times: 100 on every
// Linux korvet runs on.
const clockTicks = 100

// processCPU is utime+stime of pid.
func processCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("testbed: cpu time of pid %d: %w", pid, err)
	}
	// pid (comm) state ppid ...: comm may hold spaces and parentheses;
	// utime and stime are the 12th and 13th fields after it.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("testbed: cpu time of pid %d: malformed stat", pid)
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 13 {
		return 0, errors.New("testbed: cpu time: short stat")
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(string(s), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("testbed: cpu time of pid %d: %w", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}
