package testbed

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
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

// KorvetOptions say how StartKorvet configures one broker.
type KorvetOptions struct {
	RedisURL string // required
	NodeID   int32  // kafka.node_id
	Keyspace string // redis.keyspace; "" leaves korvet's default
	// Rack is kafka.rack; "" writes nothing (a checkout without the key
	// still starts).
	Rack string
	// SessionTimeout is kafka.broker_session_timeout (the broker lease);
	// 0 writes nothing. Written only if this checkout's korvet.toml
	// knows the key, so that harness runs work before it exists.
	SessionTimeout time.Duration
	// LogLevel is log_level; default "info".
	LogLevel string
	// ShutdownGrace is shutdown_grace; default 5s.
	ShutdownGrace time.Duration
	// Extra is appended to the config. The harness writes every key as
	// a dotted key at the top level (kafka.listen = ...), so Extra must
	// use dotted keys too (TOML forbids a [kafka] table after them).
	Extra string
	// ReadyWithin bounds the wait for the broker to serve (default 30s:
	// a restarted node id may wait one lease for its old lease to lapse).
	ReadyWithin time.Duration
}

// Korvet is a korvet broker process a test owns, on fixed loopback ports,
// logging to a file that is shown (its tail) when the test fails.
type Korvet struct {
	KafkaAddr string // 127.0.0.1:PORT
	HTTPAddr  string // 127.0.0.1:PORT
	// RegistryAddr is the schema registry listener, 127.0.0.1:PORT; ""
	// with a checkout that has no [schema_registry] yet.
	RegistryAddr string
	NodeID       int32
	Config       string // path of its korvet.toml
	DataDir      string

	server
	paused bool
}

// Log is everything the broker has logged so far, across restarts.
func (k *Korvet) Log() string {
	b, err := os.ReadFile(k.logPath)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", k.logPath, err)
	}
	return string(b)
}

// LogPath is the file the broker logs to.
func (k *Korvet) LogPath() string { return k.logPath }

// Running tells whether the process runs (paused counts as running).
func (k *Korvet) Running() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.proc == nil {
		return false
	}
	select {
	case <-k.proc.done:
		return false
	default:
		return true
	}
}

// Kill ends the broker with SIGKILL, as a crash would.
func (k *Korvet) Kill() {
	k.paused = false
	k.server.Kill()
}

// Stop sends SIGTERM (a paused broker is continued first, or it could
// not act on it) and waits for the exit.
func (k *Korvet) Stop() {
	if k.paused {
		k.Resume()
	}
	k.server.Stop()
}

// Restart starts the broker again with the same ports, data_dir and node
// id, stopping it first (SIGTERM) if it runs.
func (k *Korvet) Restart(tb testing.TB) {
	tb.Helper()
	if k.paused {
		k.Resume()
	}
	k.server.Restart(tb)
}

// Pause stops the process with SIGSTOP: it holds its sockets and state
// but does nothing, as a stalled VM or a long GC pause would. It returns
// once the kernel reports the process stopped.
func (k *Korvet) Pause() {
	k.signal(syscall.SIGSTOP)
	k.paused = true
	pid := k.PID()
	deadline := time.Now().Add(5 * time.Second)
	for processState(pid) != 'T' {
		if time.Now().After(deadline) {
			k.tb.Fatalf("testbed: korvet node %d (pid %d) not stopped 5s after SIGSTOP", k.NodeID, pid)
		}
		time.Sleep(time.Millisecond)
	}
}

// processState is the state letter of /proc/PID/stat (R, S, T, ...);
// 'T' where there is no /proc, so that Pause does not wait there.
func processState(pid int) byte {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 'T'
	}
	// pid (comm) S ...: comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 'T'
	}
	return b[i+2]
}

// Resume continues a paused broker with SIGCONT.
func (k *Korvet) Resume() {
	k.signal(syscall.SIGCONT)
	k.paused = false
}

func (k *Korvet) signal(sig syscall.Signal) {
	k.mu.Lock()
	p := k.proc
	k.mu.Unlock()
	if p == nil {
		k.tb.Fatalf("testbed: korvet node %d is not running; cannot send %v", k.NodeID, sig)
		return
	}
	if err := p.cmd.Process.Signal(sig); err != nil {
		k.tb.Fatalf("testbed: korvet node %d: signal %v: %v", k.NodeID, sig, err)
	}
}

// StartKorvet writes a korvet.toml for o (free 127.0.0.1 ports, data_dir
// in a temp dir), starts `korvet serve` built by BuildKorvet and waits
// until its Kafka port answers ApiVersions and /healthz answers 200. The
// broker is killed when the test ends.
func StartKorvet(tb testing.TB, o KorvetOptions) *Korvet {
	tb.Helper()
	if o.RedisURL == "" {
		tb.Fatal("testbed: StartKorvet needs a RedisURL")
	}
	bin := BuildKorvet(tb)
	dir := tb.TempDir()
	k := &Korvet{NodeID: o.NodeID, Config: filepath.Join(dir, "korvet.toml"), DataDir: filepath.Join(dir, "data")}
	k.server = server{
		name: fmt.Sprintf("korvet node %d", o.NodeID), tb: tb, bin: bin, dir: dir,
		logPath:     filepath.Join(dir, "korvet.log"),
		args:        []string{"serve", "--config", k.Config},
		probe:       k.probe,
		readyWithin: o.ReadyWithin,
		// Controlled shutdown hands partitions over before the
		// listeners drain: more than shutdown_grace.
		stopWithin: 30 * time.Second,
	}
	if k.readyWithin == 0 {
		k.readyWithin = 30 * time.Second
	}
	tb.Cleanup(func() {
		k.Kill()
		if tb.Failed() {
			tb.Logf("testbed: tail of korvet node %d's log %s:\n%s", k.NodeID, k.logPath, logTail(k.logPath))
		}
	})
	// A port can be taken between FreePort and the bind: try a few.
	var err error
	for try := 0; try < 3; try++ {
		k.KafkaAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(FreePort(tb)))
		k.HTTPAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(FreePort(tb)))
		// Never korvet's default 8081: brokers and test packages run
		// side by side.
		if KorvetKnows(tb, "schema_registry", "listen") {
			k.RegistryAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(FreePort(tb)))
		}
		k.addr = k.KafkaAddr
		if err = os.WriteFile(k.Config, []byte(korvetConfig(tb, o, k)), 0o644); err != nil {
			tb.Fatalf("testbed: write %s: %v", k.Config, err)
		}
		if err = k.start(); err == nil {
			return k
		}
		if !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	tb.Fatalf("testbed: %v", err)
	return nil
}

// StartCluster starts n brokers, node ids 1..n, on one Redis (keyspace
// korvet's default) with a 2s broker lease, one after the other.
func StartCluster(tb testing.TB, redisURL string, n int) []*Korvet {
	tb.Helper()
	ks := make([]*Korvet, n)
	for i := range ks {
		ks[i] = StartKorvet(tb, KorvetOptions{RedisURL: redisURL, NodeID: int32(i + 1), SessionTimeout: 2 * time.Second})
	}
	return ks
}

// korvetConfig is the korvet.toml for o, with k's addresses.
func korvetConfig(tb testing.TB, o KorvetOptions, k *Korvet) string {
	tb.Helper()
	level := o.LogLevel
	if level == "" {
		level = "info"
	}
	grace := o.ShutdownGrace
	if grace == 0 {
		grace = 5 * time.Second
	}
	var b strings.Builder
	fmt.Fprintf(&b, "data_dir = %q\nlog_level = %q\nshutdown_grace = %q\n", k.DataDir, level, grace.String())
	fmt.Fprintf(&b, "kafka.listen = %q\nkafka.node_id = %d\n", k.KafkaAddr, o.NodeID)
	if o.Rack != "" {
		fmt.Fprintf(&b, "kafka.rack = %q\n", o.Rack)
	}
	if o.SessionTimeout > 0 {
		if KorvetKnows(tb, "kafka", "broker_session_timeout") {
			fmt.Fprintf(&b, "kafka.broker_session_timeout = %q\n", o.SessionTimeout.String())
		} else {
			tb.Logf("testbed: this korvet has no kafka.broker_session_timeout yet; starting node %d without it", o.NodeID)
		}
	}
	fmt.Fprintf(&b, "http.listen = %q\nredis.url = %q\n", k.HTTPAddr, o.RedisURL)
	if k.RegistryAddr != "" {
		fmt.Fprintf(&b, "schema_registry.listen = %q\n", k.RegistryAddr)
	}
	if o.Keyspace != "" {
		fmt.Fprintf(&b, "redis.keyspace = %q\n", o.Keyspace)
	}
	b.WriteString(o.Extra)
	b.WriteString("\n")
	return b.String()
}

// probe passes when the Kafka port answers an ApiVersions request and
// /healthz answers 200.
func (k *Korvet) probe() error {
	if err := apiVersions(k.KafkaAddr); err != nil {
		return fmt.Errorf("kafka %s: %w", k.KafkaAddr, err)
	}
	hc := http.Client{Timeout: time.Second}
	resp, err := hc.Get("http://" + k.HTTPAddr + "/healthz")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/healthz: %s", resp.Status)
	}
	return nil
}

// apiVersions sends ApiVersions v0 and checks that a response with the
// same correlation id comes back.
func apiVersions(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(2 * time.Second)); err != nil {
		return err
	}
	const corr = 0x6b76 // anything
	clientID := "testbed"
	var req bytes.Buffer
	body := make([]byte, 0, 16+len(clientID))
	body = binary.BigEndian.AppendUint16(body, 18) // ApiVersions
	body = binary.BigEndian.AppendUint16(body, 0)  // v0
	body = binary.BigEndian.AppendUint32(body, corr)
	body = binary.BigEndian.AppendUint16(body, uint16(len(clientID)))
	body = append(body, clientID...)
	_ = binary.Write(&req, binary.BigEndian, int32(len(body)))
	req.Write(body)
	if _, err := c.Write(req.Bytes()); err != nil {
		return err
	}
	var head [8]byte
	if _, err := io.ReadFull(bufio.NewReader(c), head[:]); err != nil {
		return fmt.Errorf("ApiVersions: %w", err)
	}
	if size := binary.BigEndian.Uint32(head[:4]); size < 6 || size > 1<<20 {
		return fmt.Errorf("ApiVersions: response of %d bytes", size)
	}
	if got := binary.BigEndian.Uint32(head[4:]); got != corr {
		return fmt.Errorf("ApiVersions: correlation id %d, want %d", got, corr)
	}
	return nil
}

var (
	buildMu   sync.Mutex
	builtPath string
)

// BuildKorvet builds the korvet binary from the module the test runs in,
// once per test process, into os.TempDir()/korvet-testbed-<pid>, and
// returns its path. Builds of test processes that are gone are removed
// then; RemoveKorvetBuild (for TestMain) removes this process's.
func BuildKorvet(tb testing.TB) string {
	tb.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	if builtPath != "" {
		return builtPath
	}
	root, err := ModuleRoot()
	if err != nil {
		tb.Fatalf("testbed: %v", err)
	}
	removeStaleBuilds()
	dir := buildDir(os.Getpid())
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatalf("testbed: %v", err)
	}
	bin := filepath.Join(dir, "korvet")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("testbed: go build korvet in %s: %v\n%s", root, err, out)
	}
	builtPath = bin
	return bin
}

// RemoveKorvetBuild removes the binary BuildKorvet built for this
// process, if any: call it from TestMain after m.Run.
func RemoveKorvetBuild() {
	buildMu.Lock()
	defer buildMu.Unlock()
	if builtPath != "" {
		os.RemoveAll(filepath.Dir(builtPath))
		builtPath = ""
	}
}

func buildDir(pid int) string {
	return filepath.Join(os.TempDir(), fmt.Sprintf("korvet-testbed-%d", pid))
}

// removeStaleBuilds removes the builds of test processes that no longer
// run (one killed by a timeout never ran its TestMain's cleanup).
func removeStaleBuilds() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "korvet-testbed-*"))
	for _, d := range dirs {
		pid, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(d), "korvet-testbed-"))
		if err != nil || pid == os.Getpid() {
			continue
		}
		if syscall.Kill(pid, 0) == syscall.ESRCH {
			os.RemoveAll(d)
		}
	}
}

// ModuleRoot is the directory of korvet's go.mod: the module under test,
// or the one above a nested test module (internal/duckdbtest).
func ModuleRoot() (string, error) { return moduleRoot() }

var moduleRoot = sync.OnceValues(func() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("not inside a Go module (go env GOMOD is %q)", gomod)
	}
	for dir := filepath.Dir(gomod); ; dir = filepath.Dir(dir) {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(b, []byte("module github.com/korvet/korvet\n")) {
			return dir, nil
		}
		if dir == filepath.Dir(dir) {
			return "", fmt.Errorf("no korvet go.mod at or above %s", gomod)
		}
	}
})

// KorvetKnows tells whether this checkout's korvet.toml (which lists
// every key korvet knows) has key in [section]: the harness writes keys
// of features still being built only once they exist.
func KorvetKnows(tb testing.TB, section, key string) bool {
	tb.Helper()
	root, err := ModuleRoot()
	if err != nil {
		tb.Fatalf("testbed: %v", err)
	}
	f, err := os.Open(filepath.Join(root, "korvet.toml"))
	if err != nil {
		tb.Fatalf("testbed: %v", err)
	}
	defer f.Close()
	cur := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "[") {
			cur = strings.Trim(line, "[] ")
			continue
		}
		if name, _, ok := strings.Cut(line, "="); ok && cur == section && strings.TrimSpace(name) == key {
			return true
		}
	}
	return false
}
