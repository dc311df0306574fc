package testbed

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// VersityGWVersion is the versitygw release tests run against; install it
// with `go install github.com/versity/versitygw/cmd/versitygw@` + this.
const VersityGWVersion = "v1.8.0"

// S3 is a versitygw child process: a real S3 server (Apache-2.0) keeping
// objects as plain files, DIR/bucket/key. It stands in for MinIO, whose
// server is AGPL.
type S3 struct {
	Endpoint  string // 127.0.0.1:PORT, plain HTTP
	AccessKey string
	SecretKey string
	Region    string // us-east-1
	Dir       string // DIR/bucket/key
	Port      int

	tb      testing.TB
	bin     string
	args    []string
	logPath string

	mu   sync.Mutex
	proc *process
}

// StartVersityGW starts versitygw on a free 127.0.0.1 port over a fresh
// temp dir and kills it when the test ends. Clients must use path-style
// addressing and region us-east-1.
func StartVersityGW(tb testing.TB) *S3 {
	tb.Helper()
	bin, err := LookVersityGW()
	if err != nil {
		tb.Fatal(err)
	}
	root := tb.TempDir()
	s := &S3{
		AccessKey: "korvet-test",
		SecretKey: "korvet-test-secret",
		Region:    "us-east-1",
		Dir:       filepath.Join(root, "data"),
		tb:        tb,
		bin:       bin,
		logPath:   filepath.Join(root, "versitygw.log"),
	}
	if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Kill)
	// A port can be taken between FreePort and the bind: try a few.
	for try := 0; ; try++ {
		s.Port = FreePort(tb)
		s.Endpoint = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port))
		s.args = []string{
			"--access", s.AccessKey, "--secret", s.SecretKey,
			"--region", s.Region,
			"--port", s.Endpoint, "--quiet",
			// Without it every request opens a new connection.
			"--keep-alive",
			"posix", s.Dir,
		}
		err := s.start()
		if err == nil {
			return s
		}
		if try == 2 {
			tb.Fatalf("testbed: %v", err)
		}
	}
}

// LookVersityGW finds the versitygw binary on PATH, in $GOBIN or in
// $GOPATH/bin.
func LookVersityGW() (string, error) {
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p, nil
	}
	var dirs []string
	if d := os.Getenv("GOBIN"); d != "" {
		dirs = append(dirs, d)
	}
	if d := os.Getenv("GOPATH"); d != "" {
		dirs = append(dirs, filepath.Join(filepath.SplitList(d)[0], "bin"))
	}
	if home, err := os.UserHomeDir(); err == nil {
		dirs = append(dirs, filepath.Join(home, "go", "bin"))
	}
	for _, d := range dirs {
		p := filepath.Join(d, "versitygw")
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	return "", fmt.Errorf("versitygw not found on PATH, in $GOBIN or in $GOPATH/bin: install it with "+
		"`go install github.com/versity/versitygw/cmd/versitygw@%s` (scripts/test.sh does)", VersityGWVersion)
}

// Stop ends the server with SIGTERM and waits for it.
func (s *S3) Stop() { s.halt(syscall.SIGTERM) }

// Kill ends the server with SIGKILL, as a crash would. Objects already
// written stay in Dir.
func (s *S3) Kill() { s.halt(syscall.SIGKILL) }

// Restart starts the server again on the same port and dir (stopping it
// first if it runs): an outage ends.
func (s *S3) Restart(tb testing.TB) {
	tb.Helper()
	s.Stop()
	var err error
	// The old socket may linger for a moment after the process exits.
	for try := 0; try < 5; try++ {
		if err = s.start(); err == nil {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	tb.Fatalf("testbed: restart versitygw: %v", err)
}

func (s *S3) halt(sig syscall.Signal) {
	s.mu.Lock()
	p := s.proc
	s.proc = nil
	s.mu.Unlock()
	if p != nil {
		p.halt(s.tb, "versitygw", sig)
	}
}

func (s *S3) start() error {
	p, err := spawn(s.bin, s.args, filepath.Dir(s.Dir), s.logPath)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.proc = p
	s.mu.Unlock()
	if err := s.waitReady(p); err != nil {
		s.Kill()
		return fmt.Errorf("versitygw on %s: %w\n--- tail of %s ---\n%s", s.Endpoint, err, s.logPath, tailFile(s.logPath))
	}
	return nil
}

// waitReady polls until the server answers HTTP (any status: an
// unsigned request is refused, which still shows it serves S3).
func (s *S3) waitReady(p *process) error {
	cl := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(readyTimeout)
	var last error
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			return fmt.Errorf("exited during startup: %v", p.waitErr)
		default:
		}
		resp, err := cl.Get("http://" + s.Endpoint + "/")
		if err == nil {
			resp.Body.Close()
			return nil
		}
		last = err
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("not ready after %v: %w", readyTimeout, last)
}

func tailFile(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read log: %v)", err)
	}
	if len(b) > 4096 {
		b = b[len(b)-4096:]
	}
	return string(b)
}
