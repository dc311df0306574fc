// Package testbed starts real backing services for tests. Storage-path tests
// run against a real redis-server rather than a fake, so protocol and
// persistence behaviour is Redis's own.
package testbed

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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

// Redis is a redis-server child process owned by one test.
type Redis struct {
	Addr string // 127.0.0.1:PORT
	URL  string // redis://127.0.0.1:PORT/0
	Dir  string // working dir: AOF files, redis.log
	Port int

	tb       testing.TB
	bin      string
	args     []string
	password string // from --requirepass, so the readiness probe can AUTH
	logPath  string

	mu   sync.Mutex
	proc *process // nil while stopped
}

// process is one run of redis-server; done closes when it has exited.

// StartRedis starts redis-server on a free 127.0.0.1 port in a fresh temp dir
// and kills it when the test ends. extraArgs are appended to the command
// line (e.g. "--requirepass", "secret").
func StartRedis(tb testing.TB, extraArgs ...string) *Redis {
	tb.Helper()
	bin, err := lookRedis()
	if err != nil {
		tb.Fatal(err)
	}
	dir := tb.TempDir()
	port := FreePort(tb)
	r := &Redis{
		Addr:    net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		URL:     fmt.Sprintf("redis://127.0.0.1:%d/0", port),
		Dir:     dir,
		Port:    port,
		tb:      tb,
		bin:     bin,
		logPath: filepath.Join(dir, "redis.log"),
	}
	r.args = append([]string{
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "yes",
		"--appendfsync", "everysec",
		"--dir", dir,
		"--daemonize", "no",
	}, extraArgs...)
	for i := 0; i+1 < len(extraArgs); i++ {
		if extraArgs[i] == "--requirepass" {
			r.password = extraArgs[i+1]
		}
	}
	// Registered after TempDir, so it runs before the dir is removed.
	tb.Cleanup(r.Kill)
	if err := r.start(); err != nil {
		tb.Fatalf("testbed: %v", err)
	}
	return r
}

func lookRedis() (string, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return "", fmt.Errorf("redis-server not found: install it with apt-get install -y redis-server (scripts/test.sh does): %w", err)
	}
	return bin, nil
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort(tb testing.TB) int {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("testbed: find a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Stop shuts the server down with SIGTERM (Redis flushes the AOF on the way
// out) and waits for it to exit.
func (r *Redis) Stop() {
	r.halt(syscall.SIGTERM)
}

// Kill ends the server with SIGKILL, as a crash would. Data Redis had
// already written to the AOF survives, since the page cache outlives it.
func (r *Redis) Kill() {
	r.halt(syscall.SIGKILL)
}

// Restart starts the server again on the same port and dir, stopping it
// first if it still runs; the AOF brings the data back.
func (r *Redis) Restart(tb testing.TB) {
	tb.Helper()
	r.Stop()
	if err := r.start(); err != nil {
		tb.Fatalf("testbed: restart: %v", err)
	}
}

func (r *Redis) halt(sig syscall.Signal) {
	r.mu.Lock()
	p := r.proc
	r.proc = nil
	r.mu.Unlock()
	if p != nil {
		p.halt(r.tb, "redis-server", sig)
	}
}

func (r *Redis) start() error {
	p, err := spawn(r.bin, r.args, r.Dir, r.logPath)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.proc = p
	r.mu.Unlock()
	if err := r.waitReady(p); err != nil {
		r.Kill()
		return fmt.Errorf("redis-server on %s: %w\n--- tail of %s ---\n%s", r.Addr, err, r.logPath, r.logTail())
	}
	return nil
}

// waitReady polls until the server answers PING with PONG: LOADING (AOF
// replay after a restart) does not count as ready.
func (r *Redis) waitReady(p *process) error {
	deadline := time.Now().Add(readyTimeout)
	var last error
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			return fmt.Errorf("exited during startup: %v", p.waitErr)
		default:
		}
		if last = r.probe(); last == nil {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("not ready after %v: %w", readyTimeout, last)
}

func (r *Redis) probe() error {
	c, err := net.DialTimeout("tcp", r.Addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(time.Second)); err != nil {
		return err
	}
	var req bytes.Buffer
	if r.password != "" {
		fmt.Fprintf(&req, "*2\r\n$4\r\nAUTH\r\n$%d\r\n%s\r\n", len(r.password), r.password)
	}
	req.WriteString("*1\r\n$4\r\nPING\r\n")
	if _, err := c.Write(req.Bytes()); err != nil {
		return err
	}
	br := bufio.NewReader(c)
	if r.password != "" {
		if line, err := br.ReadString('\n'); err != nil {
			return err
		} else if !strings.HasPrefix(line, "+OK") {
			return fmt.Errorf("AUTH: %s", strings.TrimSpace(line))
		}
	}
	line, err := br.ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "+PONG") {
		return fmt.Errorf("PING: %s", strings.TrimSpace(line))
	}
	return nil
}

func (r *Redis) logTail() string {
	b, err := os.ReadFile(r.logPath)
	if err != nil {
		return fmt.Sprintf("(cannot read log: %v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > logTailLines {
		lines = lines[len(lines)-logTailLines:]
	}
	return strings.Join(lines, "\n")
}
