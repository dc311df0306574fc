// Package testbed starts real backing services for tests. Storage-path tests
// run against a real redis-server rather than a fake, so protocol and
// persistence behaviour is Redis's own.
package testbed

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Redis is a redis-server child process owned by one test. Its Stop
// lets Redis flush the AOF on the way out; after Kill, what Redis had
// written to the AOF survives.
type Redis struct {
	Addr string // 127.0.0.1:PORT
	URL  string // redis://127.0.0.1:PORT/0
	Dir  string // working dir: AOF files, redis.log
	Port int

	server
	password string // from --requirepass, so the readiness probe can AUTH
}

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
	// A cluster node's bus gets a free port of its own: the default, port
	// + 10000, is past 65535 for ports over 55535 and can land on a port
	// a client socket holds.
	ports := freePorts(tb, 1)
	if clusterEnabled(extraArgs) {
		ports = freePorts(tb, 2)
		extraArgs = append(slices.Clip(extraArgs), "--cluster-port", strconv.Itoa(ports[1]))
	}
	port := ports[0]
	r := &Redis{
		Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		URL:  fmt.Sprintf("redis://127.0.0.1:%d/0", port),
		Dir:  dir,
		Port: port,
	}
	r.server = server{name: "redis-server", addr: r.Addr, tb: tb, bin: bin, dir: dir, logPath: filepath.Join(dir, "redis.log"), probe: r.probe}
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
	return freePorts(tb, 1)[0]
}

// freePorts returns n distinct ports on 127.0.0.1 that were free a moment
// ago: all are held open together, so none is given twice.
func freePorts(tb testing.TB, n int) []int {
	tb.Helper()
	ports := make([]int, n)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatalf("testbed: find a free port: %v", err)
		}
		defer l.Close()
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports
}

// clusterEnabled reports whether redis-server args turn cluster mode on.
func clusterEnabled(args []string) bool {
	for i := 0; i+1 < len(args); i++ {
		if args[i] == "--cluster-enabled" && args[i+1] == "yes" {
			return true
		}
	}
	return false
}

// probe passes when the server answers PING with PONG: LOADING (AOF
// replay after a restart) does not count as ready.
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
