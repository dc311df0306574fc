package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/korvet/korvet/internal/testbed"
)

// testVersion is stamped into the binary that the process tests build.
const testVersion = "v0.0.0-maintest"

var binDir string

func TestMain(m *testing.M) {
	code := m.Run()
	testbed.RemoveKorvetBuild()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
)

// korvetBinary builds korvet from this checkout once per test run, with
// main.version set to testVersion.
func korvetBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		goBin, err := exec.LookPath("go")
		if err != nil {
			buildErr = fmt.Errorf("the go command is needed to build korvet for this test: %w", err)
			return
		}
		binDir, err = os.MkdirTemp("", "korvet-test-bin-")
		if err != nil {
			buildErr = err
			return
		}
		builtBin = filepath.Join(binDir, "korvet")
		cmd := exec.Command(goBin, "build", "-ldflags", "-X main.version="+testVersion, "-o", builtBin, ".")
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtBin
}

// writeConfig writes text to korvet.toml in a fresh temp dir.
func writeConfig(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "korvet.toml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// tomlKeys lists the dotted TOML keys of Config's fields; a map field
// (topic_defaults) is one key, its table.
func tomlKeys(t reflect.Type, prefix string) []string {
	var keys []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name := f.Tag.Get("toml")
		if name == "" || name == "-" {
			continue
		}
		full := prefix + name
		if f.Type.Kind() == reflect.Struct && f.Type != reflect.TypeFor[duration]() {
			keys = append(keys, tomlKeys(f.Type, full+".")...)
			continue
		}
		keys = append(keys, full)
	}
	return keys
}

// TestKorvetTomlDocumentsDefaults checks the shipped korvet.toml against
// defaultConfig: every value in the file is the default, and every key
// korvet knows is in the file.
func TestKorvetTomlDocumentsDefaults(t *testing.T) {
	text, err := os.ReadFile("korvet.toml")
	if err != nil {
		t.Fatal(err)
	}

	// Decoded over a zero Config, the file alone must give the defaults:
	// a key missing from the file would show as a zero value.
	var fromFile Config
	md, err := toml.Decode(string(text), &fromFile)
	if err != nil {
		t.Fatalf("korvet.toml does not parse: %v", err)
	}
	if u := md.Undecoded(); len(u) > 0 {
		t.Errorf("korvet.toml has keys Config does not know: %v", u)
	}
	want := defaultConfig()
	if len(fromFile.TopicDefaults) == 0 && len(want.TopicDefaults) == 0 {
		fromFile.TopicDefaults, want.TopicDefaults = nil, nil
	}
	if !reflect.DeepEqual(fromFile, want) {
		t.Errorf("korvet.toml differs from defaultConfig():\n file:     %+v\n defaults: %+v", fromFile, want)
	}

	// Every key is written out in the file (so it documents all of them).
	inFile := map[string]bool{}
	for _, k := range md.Keys() {
		inFile[k.String()] = true
	}
	for _, k := range tomlKeys(reflect.TypeFor[Config](), "") {
		if !inFile[k] {
			t.Errorf("korvet.toml does not document key %q", k)
		}
	}

	// And loadConfig accepts it as is.
	c, err := loadConfig("korvet.toml")
	if err != nil {
		t.Fatalf("loadConfig(korvet.toml): %v", err)
	}
	if len(c.TopicDefaults) == 0 {
		c.TopicDefaults = nil
	}
	if len(c.topicDefaults) != 0 {
		t.Errorf("korvet.toml sets topic defaults: %v", c.topicDefaults)
	}
	c.topicDefaults = nil
	if !reflect.DeepEqual(c, want) {
		t.Errorf("loadConfig(korvet.toml) = %+v, want the defaults %+v", c, want)
	}
}

func TestLoadConfigOverrides(t *testing.T) {
	path := writeConfig(t, `log_level = "debug"
[kafka]
listen = "127.0.0.1:19092"
default_partitions = 3
[redis]
url = "redis://127.0.0.1:6380/2"
pool_size = 4
timeout = "1500ms"
[topic_defaults]
"retention.ms" = "3600000"
max.message.bytes = 2000000
`)
	c, err := loadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	want := defaultConfig()
	want.LogLevel = "debug"
	want.Kafka.Listen = "127.0.0.1:19092"
	want.Kafka.DefaultPartitions = 3
	want.Redis.URL = "redis://127.0.0.1:6380/2"
	want.Redis.PoolSize = 4
	want.Redis.Timeout.Duration = 1500 * time.Millisecond
	want.TopicDefaults = c.TopicDefaults // raw TOML; checked flattened below
	want.topicDefaults = map[string]string{"retention.ms": "3600000", "max.message.bytes": "2000000"}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("got  %+v\nwant %+v", c, want)
	}
}

func TestLoadConfigMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nope.toml")
	_, err := loadConfig(path)
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("loadConfig(missing file) = %v, want an error naming %s", err, path)
	}
}

// TestLoadConfigErrors checks that every rejected config names the file,
// the line and (where there is one) the key.
func TestLoadConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		text string
		line int
		want []string // substrings of the error, besides the file and line
	}{
		{name: "unknown top-level key", text: "log_level = \"info\"\nbogus = 1\n", line: 2, want: []string{"unknown key", "bogus"}},
		{name: "unknown key in a table", text: "[kafka]\nlisten = \"127.0.0.1:9092\"\nlisen = \"x\"\n", line: 3, want: []string{"unknown key", "kafka.lisen"}},
		{name: "unknown key in redis", text: "\n\n[redis]\npoolsize = 3\n", line: 4, want: []string{"unknown key", "redis.poolsize"}},
		{name: "unknown dotted key", text: "log_level = \"info\"\nredis.pool = 3\n", line: 2, want: []string{"unknown key", "redis.pool"}},
		{name: "pool_size 0", text: "[redis]\npool_size = 0\n", line: 2, want: []string{"redis.pool_size"}},
		{name: "pool_size too big", text: "[redis]\nurl = \"redis://127.0.0.1:6379/0\"\npool_size = 5000\n", line: 3, want: []string{"redis.pool_size"}},
		{name: "listen without port", text: "[kafka]\nlisten = \"nope\"\n", line: 2, want: []string{"kafka.listen", "nope"}},
		{name: "dotted listen without port", text: "log_level = \"info\"\nkafka.listen = \"nope\"\n", line: 2, want: []string{"kafka.listen", "nope"}},
		{name: "advertised without port", text: "[kafka]\nadvertised = \"kafka.example\"\n", line: 2, want: []string{"kafka.advertised"}},
		{name: "http listen", text: "[http]\nlisten = \"8080\"\n", line: 2, want: []string{"http.listen"}},
		{name: "short admin token", text: "[http]\nlisten = \"127.0.0.1:8080\"\nadmin_token = \"secret\"\n", line: 3, want: []string{"http.admin_token", "16 characters"}},
		{name: "bad redis url", text: "[redis]\nurl = \"http://127.0.0.1:6379\"\n", line: 2, want: []string{"redis.url"}},
		{name: "cluster over a unix socket", text: "[redis]\nurl = \"unix:///run/redis.sock\"\ncluster = true\n", line: 2, want: []string{"redis.url", "TCP"}},
		{name: "cluster with a db", text: "[redis]\nurl = \"redis://127.0.0.1:7000/2\"\ncluster = true\n", line: 2, want: []string{"redis.url", "db"}},
		{name: "cluster keyspace with braces", text: "[redis]\ncluster = true\nkeyspace = \"k{v}\"\n", line: 3, want: []string{"redis.keyspace", "hash tags"}},
		{name: "seeds without cluster", text: "[redis]\nseeds = [\"127.0.0.1:7001\"]\n", line: 2, want: []string{"redis.seeds", "cluster = true"}},
		{name: "seed without port", text: "[redis]\ncluster = true\nseeds = [\"redis-a\"]\n", line: 3, want: []string{"redis.seeds", "redis-a"}},
		{name: "wait_replicas", text: "[redis]\nwait_replicas = 17\n", line: 2, want: []string{"redis.wait_replicas"}},
		{name: "wait_timeout", text: "[redis]\nwait_timeout = \"0s\"\n", line: 2, want: []string{"redis.wait_timeout"}},
		{name: "memory_sample_interval", text: "[redis]\nmemory_sample_interval = \"100ms\"\n", line: 2, want: []string{"redis.memory_sample_interval", "1s to 24h"}},
		{name: "tls without rediss", text: "[redis]\ntls_ca_file = \"/etc/ssl/ca.pem\"\n", line: 2, want: []string{"redis.tls_ca_file", "rediss://"}},
		{name: "tls cert without key", text: "[redis]\nurl = \"rediss://127.0.0.1:6380/0\"\ntls_cert_file = \"/nonexistent/c.pem\"\n", line: 3, want: []string{"redis.tls_cert_file", "tls_key_file"}},
		{name: "tls ca missing", text: "[redis]\nurl = \"rediss://127.0.0.1:6380/0\"\ntls_ca_file = \"/nonexistent/ca.pem\"\n", line: 3, want: []string{"redis.tls_ca_file", "/nonexistent/ca.pem"}},
		{name: "empty keyspace", text: "[redis]\nkeyspace = \"\"\n", line: 2, want: []string{"redis.keyspace"}},
		{name: "bad duration", text: "[redis]\ntimeout = \"ten seconds\"\n", line: 2, want: []string{"duration", "ten seconds"}},
		{name: "duration without unit", text: "log_level = \"info\"\nshutdown_grace = \"10\"\n", line: 2, want: []string{"duration", "10"}},
		{name: "negative duration", text: "[redis]\ntimeout = \"-1s\"\n", line: 2, want: []string{"redis.timeout"}},
		{name: "wrong type", text: "[kafka]\ndefault_partitions = \"three\"\n", line: 2, want: []string{"default_partitions"}},
		{name: "default_partitions 0", text: "[kafka]\ndefault_partitions = 0\n", line: 2, want: []string{"kafka.default_partitions"}},
		{name: "max_request_bytes", text: "[kafka]\nmax_request_bytes = 10\n", line: 2, want: []string{"kafka.max_request_bytes"}},
		{name: "max_connections", text: "[kafka]\nmax_connections = 0\n", line: 2, want: []string{"kafka.max_connections"}},
		{name: "node_id", text: "[kafka]\nnode_id = -1\n", line: 2, want: []string{"kafka.node_id"}},
		{name: "group_cleanup_interval 0s", text: "[kafka]\ngroup_cleanup_interval = \"0s\"\n", line: 2, want: []string{"kafka.group_cleanup_interval", "1s to 24h"}},
		{name: "log_level", text: "log_level = \"verbose\"\n", line: 1, want: []string{"log_level"}},
		{name: "empty data_dir", text: "data_dir = \"\"\n", line: 1, want: []string{"data_dir"}},
		{name: "unknown topic_defaults key", text: "[topic_defaults]\n\"retention.ms\" = \"1000\"\n\"retention.msx\" = \"1000\"\n", line: 3, want: []string{"retention.msx", "unknown topic config"}},
		{name: "bad topic_defaults value", text: "[topic_defaults]\n\"cleanup.policy\" = \"delete\"\n\"retention.ms\" = \"soon\"\n", line: 3, want: []string{"retention.ms", "soon"}},
		{name: "bad topic_defaults enum", text: "[topic_defaults]\n\"cleanup.policy\" = \"keep\"\n", line: 2, want: []string{"cleanup.policy", "keep"}},
		{name: "syntax error: missing value", text: "[kafka]\nlisten = \"127.0.0.1:9092\"\nnode_id =\n", line: 3},
		{name: "syntax error: unterminated string", text: "[http]\n\nlisten = \"127.0.0.1:8080\n", line: 3},
		{name: "syntax error: bad table name", text: "log_level = \"info\"\n[ka fka]\n", line: 2},
		{name: "syntax error: duplicate key", text: "[redis]\npool_size = 4\npool_size = 5\n", line: 3},

		{name: "unknown table", text: "log_level = \"info\"\n[kafak]\nlisten = \"127.0.0.1:9092\"\n", line: 2, want: []string{"unknown key", "kafak"}},
		{name: "unknown sub-table", text: "[kafka]\nlisten = \"127.0.0.1:9092\"\n[kafka.ssl]\ncert = \"x\"\n", line: 3, want: []string{"unknown key", "kafka.ssl"}},
		{name: "unknown key in inline table", text: "kafka = { listen = \"127.0.0.1:9092\", bogus = 1 }\n", line: 1, want: []string{"unknown key", "kafka.bogus"}},
		{name: "table header with a comment", text: "[kafka] # the Kafka side\nlisten = \"nope\"\n", line: 2, want: []string{"kafka.listen", "nope"}},
		{name: "unquoted topic config name", text: "[topic_defaults]\nretention.ms = \"soon\"\n", line: 2, want: []string{"retention.ms", "soon"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeConfig(t, tt.text)
			_, err := loadConfig(path)
			if err == nil {
				t.Fatalf("loadConfig accepted:\n%s", tt.text)
			}
			msg := err.Error()
			var problems []string
			// "path:line:" is korvet's own form; a type mismatch comes from
			// the TOML decoder as "path: toml: line N (...)", which still
			// names both.
			if !strings.HasPrefix(msg, fmt.Sprintf("%s:%d:", path, tt.line)) &&
				!(strings.HasPrefix(msg, path+":") && strings.Contains(msg, fmt.Sprintf(" line %d ", tt.line))) {
				problems = append(problems, fmt.Sprintf("does not name %s line %d", path, tt.line))
			}
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					problems = append(problems, fmt.Sprintf("does not mention %q", w))
				}
			}
			if len(problems) == 0 {
				return
			}
			t.Errorf("error %q: %s", msg, strings.Join(problems, "; "))
		})
	}
}

// TestServeStopsOnBadConfig: the command line reports a config error and
// exits 1 without starting anything.
func TestServeStopsOnBadConfig(t *testing.T) {
	path := writeConfig(t, "[redis]\npool_size = 0\n")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"serve", "--config", path}, &stdout, &stderr); code != 1 {
		t.Fatalf("exit code %d, want 1; stderr:\n%s", code, stderr.String())
	}
	if want := path + ":2:"; !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr %q does not name %q", stderr.String(), want)
	}
}

func TestVersionAndUsage(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"version"}, &stdout, &stderr); code != 0 {
		t.Fatalf("version: exit %d, stderr %q", code, stderr.String())
	}
	if got, want := stdout.String(), "korvet "+version+"\n"; got != want {
		t.Errorf("version printed %q, want %q", got, want)
	}

	stdout.Reset()
	stderr.Reset()
	if code := run(nil, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), "usage") {
		t.Errorf("no args: exit %d, stderr %q; want 2 and the usage", code, stderr.String())
	}
	stdout.Reset()
	stderr.Reset()
	if code := run([]string{"frobnicate"}, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), "frobnicate") {
		t.Errorf("unknown command: exit %d, stderr %q; want 2 naming the command", code, stderr.String())
	}
}

// TestServeWithoutRedis: with nothing listening at the Redis URL, serve
// fails promptly and tells the user to start redis-server.
func TestServeWithoutRedis(t *testing.T) {
	dead := testbed.FreePort(t) // free a moment ago; nobody listens there
	path := writeConfig(t, fmt.Sprintf(`data_dir = %q
[kafka]
listen = "127.0.0.1:%d"
[http]
listen = "127.0.0.1:%d"
[redis]
url = "redis://127.0.0.1:%d/0"
`, t.TempDir(), testbed.FreePort(t), testbed.FreePort(t), dead))

	var stdout, stderr bytes.Buffer
	done := make(chan int, 1)
	start := time.Now()
	go func() { done <- run([]string{"serve", "--config", path}, &stdout, &stderr) }()
	select {
	case code := <-done:
		if code != 1 {
			t.Errorf("exit code %d, want 1", code)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("serve still running 20s after start with no Redis; stderr:\n%s", stderr.String())
	}
	msg := stderr.String()
	if !strings.Contains(msg, "redis-server") || !strings.Contains(msg, fmt.Sprint(dead)) {
		t.Errorf("stderr does not tell to start redis-server at port %d:\n%s", dead, msg)
	}
	t.Logf("failed after %v: %s", time.Since(start).Round(time.Millisecond), strings.TrimSpace(msg))
}

// proc is a korvet binary running as a child process on a testbed Redis.
type proc struct {
	cmd       *exec.Cmd
	exited    chan error // receives cmd.Wait's result once
	done      bool       // exited has been received from
	logs      *syncBuffer
	kafkaAddr string
	httpBase  string
	// registryBase is the schema registry listener's URL.
	registryBase string
	// bin and cfg start it again (relaunch); redis is the Redis it uses.
	bin, cfg string
	redis    *testbed.Redis
}

// startKorvet builds korvet (once), starts it against a fresh redis-server
// and waits until /healthz answers 200. extra is appended to its config.
func startKorvet(t *testing.T, extra string) *proc {
	t.Helper()
	return startKorvetOn(t, testbed.StartRedis(t), extra)
}

// startKorvetOn is startKorvet on a given Redis.
func startKorvetOn(t *testing.T, r *testbed.Redis, extra string) *proc {
	t.Helper()
	return startKorvetKafka(t, r, extra, "")
}

// startKorvetKafka is startKorvetOn with kafka appended to the [kafka]
// section of the config.
func startKorvetKafka(t *testing.T, r *testbed.Redis, extra, kafka string) *proc {
	t.Helper()
	return startKorvetWith(t, r, func(kafkaAddr, httpAddr string) string {
		return fmt.Sprintf("%s\n[kafka]\nlisten = %q\n%s\n[http]\nlisten = %q\n", extra, kafkaAddr, kafka, httpAddr)
	})
}

// newProc is a korvet process on r, on free ports, not started yet: the
// caller writes p.cfg and calls p.launch. It is killed when the test ends,
// and its log shown if the test failed.
func newProc(t *testing.T, r *testbed.Redis) *proc {
	t.Helper()
	kafkaPort, httpPort := testbed.FreePort(t), testbed.FreePort(t)
	p := &proc{
		logs:      &syncBuffer{},
		kafkaAddr: fmt.Sprintf("127.0.0.1:%d", kafkaPort),
		httpBase:  fmt.Sprintf("http://127.0.0.1:%d", httpPort),
		// Never the default 8081: test packages run in parallel.
		registryBase: fmt.Sprintf("http://127.0.0.1:%d", testbed.FreePort(t)),
		bin:          korvetBinary(t),
		redis:        r,
		done:         true, // until launched
	}
	t.Cleanup(func() {
		if !p.done {
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() {
			t.Logf("korvet log:\n%s", p.logs.String())
		}
	})
	return p
}

// startKorvetWith starts korvet on r with the config that body returns
// for its Kafka and HTTP addresses; data_dir, log_level, [redis] url and
// [schema_registry] listen come first and must not be in it.
func startKorvetWith(t *testing.T, r *testbed.Redis, body func(kafkaAddr, httpAddr string) string) *proc {
	t.Helper()
	p := newProc(t, r)
	p.cfg = writeConfig(t, fmt.Sprintf("data_dir = %q\nlog_level = \"info\"\nredis.url = %q\n%s\n%s",
		t.TempDir(), r.URL, p.registryKey(), body(p.kafkaAddr, strings.TrimPrefix(p.httpBase, "http://"))))
	p.launch(t)
	return p
}

// registryKey is the top-level line that puts the schema registry on
// p's port (configs written by tests must never leave it at 8081).
func (p *proc) registryKey() string {
	return fmt.Sprintf("schema_registry.listen = %q", strings.TrimPrefix(p.registryBase, "http://"))
}

// launch starts the binary with p's config and waits until /healthz
// answers 200 and korvet has logged that it started.
func (p *proc) launch(t *testing.T) {
	t.Helper()
	p.exited, p.done = make(chan error, 1), false
	started := strings.Count(p.logs.String(), "korvet started")
	p.cmd = exec.Command(p.bin, "serve", "--config", p.cfg)
	p.cmd.Stdout, p.cmd.Stderr = p.logs, p.logs
	if err := p.cmd.Start(); err != nil {
		p.done = true
		t.Fatal(err)
	}
	go func() { p.exited <- p.cmd.Wait() }()

	hc := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(20 * time.Second)
	for {
		// Exited first: a port taken meanwhile by another server must not
		// pass for korvet's.
		select {
		case err := <-p.exited:
			p.done = true
			t.Fatalf("korvet exited during start-up: %v", err)
		default:
		}
		code, _, err := httpGet(hc, p.httpBase+"/healthz")
		if err == nil && code == http.StatusOK && strings.Count(p.logs.String(), "korvet started") > started {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("/healthz did not answer 200 within 20s (last: %d, %v)", code, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitLogs waits until korvet's log satisfies done and returns it, as it
// is then or at the deadline: the log is copied from korvet's output as
// it comes, a moment after what it tells of has happened.
func (p *proc) waitLogs(within time.Duration, done func(logs string) bool) string {
	deadline := time.Now().Add(within)
	for {
		logs := p.logs.String()
		if done(logs) || time.Now().After(deadline) {
			return logs
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kill ends korvet with SIGKILL, as a crash would, and waits for it.
func (p *proc) kill(t *testing.T) {
	t.Helper()
	if p.done {
		return
	}
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-p.exited
	p.done = true
}

// stop sends SIGTERM and waits up to limit for the exit; it returns how
// long the exit took and the exit error, or fails the test.
func (p *proc) stop(t *testing.T, limit time.Duration) (time.Duration, error) {
	t.Helper()
	sent := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.exited:
		p.done = true
		return time.Since(sent), err
	case <-time.After(limit):
		t.Fatalf("korvet still running %v after SIGTERM", limit)
		return 0, nil
	}
}

// TestBinaryServeAndStop runs the real binary against a real redis-server:
// health endpoints answer, a record goes through, and SIGTERM stops it
// with exit code 0 within a few seconds.
func TestBinaryServeAndStop(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := korvetBinary(t)
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil || string(out) != "korvet "+testVersion+"\n" {
		t.Fatalf("korvet version: %q, %v; want %q", out, err, "korvet "+testVersion+"\n")
	}

	p := startKorvet(t, "")
	hc := &http.Client{Timeout: 2 * time.Second}
	code, body, err := httpGet(hc, p.httpBase+"/healthz")
	var health map[string]any
	if err != nil || code != http.StatusOK || json.Unmarshal(body, &health) != nil {
		t.Fatalf("/healthz = %d %q %v", code, body, err)
	}
	if health["status"] != "ok" || health["version"] != testVersion {
		t.Errorf("/healthz = %v, want status ok and version %s", health, testVersion)
	}
	if code, body, err := httpGet(hc, p.httpBase+"/readyz"); err != nil || code != http.StatusOK {
		t.Errorf("/readyz = %d %s %v, want 200", code, body, err)
	}

	// A record goes through, produced and consumed with franz-go.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const topic = "maintest"
	producer, err := kgo.NewClient(kgo.SeedBrokers(p.kafkaAddr), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	rec := &kgo.Record{Topic: topic, Key: []byte("k1"), Value: []byte("hello korvet"),
		Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("v")}}}
	if err := producer.ProduceSync(ctx, rec).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	consumer, err := kgo.NewClient(kgo.SeedBrokers(p.kafkaAddr),
		kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	var got []*kgo.Record
	for len(got) == 0 {
		fs := consumer.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consume: nothing within 30s: %v", err)
		}
		for _, fe := range fs.Errors() {
			t.Fatalf("consume: %s[%d]: %v", fe.Topic, fe.Partition, fe.Err)
		}
		got = append(got, fs.Records()...)
	}
	consumer.Close()
	g := got[0]
	if len(got) != 1 || string(g.Key) != "k1" || string(g.Value) != "hello korvet" || g.Offset != 0 ||
		len(g.Headers) != 1 || g.Headers[0].Key != "h" || string(g.Headers[0].Value) != "v" {
		t.Errorf("consumed %d records, first %s=%q offset %d headers %v; want 1 record k1=%q at 0 with h=v",
			len(got), g.Key, g.Value, g.Offset, g.Headers, "hello korvet")
	}

	// SIGTERM with the producer still connected (idle): exit 0 promptly.
	took, err := p.stop(t, 5*time.Second)
	if err != nil {
		t.Errorf("korvet exited with %v after SIGTERM, want exit code 0", err)
	}
	t.Logf("stopped %v after SIGTERM", took.Round(time.Millisecond))
	if !strings.Contains(p.logs.String(), "korvet stopped") {
		t.Errorf("log does not say korvet stopped:\n%s", p.logs.String())
	}
}

// TestBinaryStopDuringLongPoll: SIGTERM while a consumer waits in a long
// fetch on an empty partition. korvet should answer the fetch and exit at
// once rather than wait out the fetch's max wait.
func TestBinaryStopDuringLongPoll(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	p := startKorvet(t, `shutdown_grace = "10s"`)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const topic = "longpoll"
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.kafkaAddr), kgo.AllowAutoTopicCreation(),
		kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	if fs := cl.PollFetches(ctx); len(fs.Records()) != 1 || len(fs.Errors()) > 0 {
		t.Fatalf("first poll: %d records, errors %v", len(fs.Records()), fs.Errors())
	}
	// The consumer's next fetch parks at the high watermark: wait until
	// korvet holds it.
	testbed.WaitFor(t, 10*time.Second, "a parked fetch", func() bool {
		return metrics(t, p)["korvet_kafka_requests_in_flight"] >= 1
	})

	took, err := p.stop(t, 15*time.Second)
	if err != nil {
		t.Errorf("korvet exited with %v after SIGTERM, want exit code 0", err)
	}
	t.Logf("stopped %v after SIGTERM", took.Round(time.Millisecond))
	if took > 2*time.Second {
		t.Errorf("stop took %v: a parked fetch must answer when the server stops", took.Round(100*time.Millisecond))
	}
}

func httpGet(hc *http.Client, url string) (int, []byte, error) {
	resp, err := hc.Get(url)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

// syncBuffer is a bytes.Buffer safe for a child's stdout and stderr.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
