package testbed

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// cmd sends one inline command and returns the first reply line.
func cmd(t *testing.T, addr, line string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := fmt.Fprintf(c, "%s\r\n", line); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	reply, err := br.ReadString('\n')
	if err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	if strings.HasPrefix(reply, "$") && reply != "$-1\r\n" {
		if reply, err = br.ReadString('\n'); err != nil {
			t.Fatal(err)
		}
	}
	return strings.TrimSpace(reply)
}

func TestStartStopRestart(t *testing.T) {
	r := StartRedis(t)
	if !strings.HasPrefix(r.URL, "redis://127.0.0.1:") || !strings.HasSuffix(r.URL, "/0") ||
		r.Addr != fmt.Sprintf("127.0.0.1:%d", r.Port) {
		t.Fatalf("Redis %+v", r)
	}
	if got := cmd(t, r.Addr, "CONFIG GET appendonly"); got != "*2" {
		t.Fatalf("CONFIG GET: %q", got)
	}
	if got := cmd(t, r.Addr, "SET k v1"); got != "+OK" {
		t.Fatalf("SET: %q", got)
	}
	r.Stop()
	if _, err := net.DialTimeout("tcp", r.Addr, time.Second); err == nil {
		t.Fatal("server still listening after Stop")
	}
	r.Restart(t)
	if got := cmd(t, r.Addr, "GET k"); got != "v1" {
		t.Fatalf("after Stop+Restart GET k = %q", got)
	}

	// SIGKILL loses nothing Redis already wrote to the AOF.
	if got := cmd(t, r.Addr, "SET k v2"); got != "+OK" {
		t.Fatalf("SET: %q", got)
	}
	r.Kill()
	r.Kill() // idempotent
	r.Restart(t)
	if got := cmd(t, r.Addr, "GET k"); got != "v2" {
		t.Fatalf("after Kill+Restart GET k = %q", got)
	}
	// Restart of a running server stops it first.
	r.Restart(t)
	if got := cmd(t, r.Addr, "PING"); got != "+PONG" {
		t.Fatalf("PING: %q", got)
	}
	if _, err := os.Stat(filepath.Join(r.Dir, "redis.log")); err != nil {
		t.Fatal(err)
	}
}

func TestRequirepassProbe(t *testing.T) {
	r := StartRedis(t, "--requirepass", "pw")
	if got := cmd(t, r.Addr, "PING"); !strings.HasPrefix(got, "-NOAUTH") {
		t.Fatalf("PING without AUTH: %q", got)
	}
}

func TestStartFailureShowsLog(t *testing.T) {
	dir := t.TempDir()
	r := &Redis{Addr: "127.0.0.1:1", Dir: dir}
	r.server = server{name: "redis-server", addr: r.Addr, tb: t, dir: dir, probe: r.probe,
		args:    []string{"--port", "0", "--no-such-option", "1", "--dir", dir},
		logPath: filepath.Join(dir, "redis.log"),
	}
	var err error
	if r.bin, err = lookRedis(); err != nil {
		t.Skip(err)
	}
	err = r.start()
	if err == nil {
		r.Kill()
		t.Fatal("start succeeded with a bad option")
	}
	t.Log(err)
	if !strings.Contains(err.Error(), "exited during startup") || !strings.Contains(err.Error(), "no-such-option") {
		t.Fatalf("error does not show the log tail: %v", err)
	}
}

func TestFreePort(t *testing.T) {
	p := FreePort(t)
	if p <= 0 || p > 65535 {
		t.Fatalf("port %d", p)
	}
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
	if err != nil {
		t.Fatalf("port %d not free: %v", p, err)
	}
	l.Close()
}
