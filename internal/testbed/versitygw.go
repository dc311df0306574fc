package testbed

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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

	server
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
	}
	s.server = server{name: "versitygw", tb: tb, bin: bin, dir: root, logPath: filepath.Join(root, "versitygw.log"), probe: s.probe}
	if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Kill)
	// A port can be taken between FreePort and the bind: try a few.
	for try := 0; ; try++ {
		s.Port = FreePort(tb)
		s.Endpoint = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port))
		s.addr = s.Endpoint
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

// probe passes when the server answers HTTP (any status: an unsigned
// request is refused, which still shows it serves S3).
func (s *S3) probe() error {
	cl := &http.Client{Timeout: time.Second}
	resp, err := cl.Get("http://" + s.Endpoint + "/")
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}
