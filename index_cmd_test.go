package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/korvet/korvet/engine/index"
	"github.com/korvet/korvet/internal/testbed"
)

// korvetInProc is `korvet serve` running in the test process.
type korvetInProc struct {
	cfgPath, kafka, http string
	cancel               context.CancelFunc
	done                 chan error
}

func serveInProc(t *testing.T, cfgPath string, cfg Config) *korvetInProc {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	k := &korvetInProc{cfgPath: cfgPath, kafka: cfg.Kafka.Listen, http: "http://" + cfg.HTTP.Listen, cancel: cancel, done: make(chan error, 1)}
	go func() { k.done <- serve(ctx, cfg, io.Discard) }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		res, err := http.Get(k.http + "/healthz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == 200 {
				return k
			}
		}
		select {
		case err := <-k.done:
			t.Fatalf("serve exited: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("korvet did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (k *korvetInProc) stop(t *testing.T) {
	t.Helper()
	k.cancel()
	if err := <-k.done; err != nil {
		t.Fatalf("serve: %v", err)
	}
}

func runCmd(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// korvet index rebuild and verify: refused while korvet runs (it holds
// the index lock), they rebuild and verify once it is stopped, verify
// reports a tampered key, and deleting the index directory makes korvet
// rebuild it on start.
func TestIndexCommands(t *testing.T) {
	r := testbed.StartRedis(t)
	dataDir := t.TempDir()
	cfgPath := filepath.Join(t.TempDir(), "korvet.toml")
	text := fmt.Sprintf("data_dir = %q\nshutdown_grace = \"2s\"\nschema_registry.listen = \"127.0.0.1:0\"\n[kafka]\nlisten = \"127.0.0.1:%d\"\n[http]\nlisten = \"127.0.0.1:%d\"\nadmin_token = \"0123456789abcdef0123\"\n[redis]\nurl = %q\n",
		dataDir, testbed.FreePort(t), testbed.FreePort(t), r.URL)
	if err := os.WriteFile(cfgPath, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := loadConfig(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	k := serveInProc(t, cfgPath, cfg)
	ctx := context.Background()
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.kafka), kgo.DefaultProduceTopic("users"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 2, 1, map[string]*string{"cleanup.policy": ptrTo("compact")}, "users"); err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for i := range 3000 {
		recs = append(recs, &kgo.Record{Key: []byte(fmt.Sprintf("user-%d", i%300)), Value: []byte(fmt.Sprintf("v%d", i))})
	}
	recs = append(recs, &kgo.Record{Key: []byte("user-7"), Value: nil})
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	getKey := func(key string) (int, string) {
		t.Helper()
		res, err := http.Get(k.http + "/v1/kv/users/" + key)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	if code, body := getKey("user-8"); code != 200 || body != "v2708" {
		t.Fatalf("user-8: %d %s", code, body)
	}

	// While korvet runs, rebuild asks it to rebuild online (admin token);
	// verify needs it stopped.
	code, out, errOut := runCmd("index", "rebuild", "--config", cfgPath)
	if code != 0 || !strings.Contains(out, "rebuilt online") {
		t.Fatalf("rebuild while running: %d %s %s", code, out, errOut)
	}
	if code, body := getKey("user-8"); code != 200 || body != "v2708" {
		t.Fatalf("user-8 after the online rebuild: %d %s", code, body)
	}
	// Without a token too: the unix socket in data_dir (owner-only) is how
	// the nightly timer, running as korvet's user, reaches it.
	noToken := filepath.Join(t.TempDir(), "korvet.toml")
	noTokenText := strings.Replace(text, "admin_token = \"0123456789abcdef0123\"\n", "", 1)
	if strings.Contains(noTokenText, "admin_token") {
		t.Fatal("the config still has an admin token")
	}
	if err := os.WriteFile(noToken, []byte(noTokenText), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := runCmd("index", "rebuild", "--config", noToken); code != 0 || !strings.Contains(out, "rebuilt online") {
		t.Fatalf("rebuild over the admin socket: %d %s %s", code, out, errOut)
	}
	code, _, errOut = runCmd("index", "verify", "--config", cfgPath)
	if code != 1 || !strings.Contains(errOut, "korvet is running") {
		t.Fatalf("verify while running: %d %s", code, errOut)
	}
	k.stop(t)

	code, out, errOut = runCmd("index", "verify", "--config", cfgPath)
	if code != 0 || !strings.Contains(out, "0 differences") {
		t.Fatalf("verify: %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = runCmd("index", "rebuild", "--config", cfgPath)
	if code != 0 || !strings.Contains(out, "3001 records") || !strings.Contains(errOut, "100.0% of the way to the last stable offsets") {
		t.Fatalf("rebuild: %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = runCmd("index", "rebuild", "--config", cfgPath, "--topic", "users")
	if code != 0 || !strings.Contains(out, "rebuilt users") {
		t.Fatalf("rebuild --topic: %d\n%s\n%s", code, out, errOut)
	}
	if code, out, _ = runCmd("index", "verify", "--config", cfgPath); code != 0 {
		t.Fatalf("verify after rebuild: %d\n%s", code, out)
	}

	// Tamper with one key: verify names it.
	ix, err := index.Open(indexDir(cfg), index.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ids, err := ix.Topics()
	if err != nil || len(ids) != 1 {
		t.Fatalf("topics in the index: %v %v", ids, err)
	}
	b := ix.NewBatch()
	if err := b.Set(ids[0], []byte("user-9"), index.Pointer{Partition: 1, Offset: 1}); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	b.Close()
	ix.Close()
	code, out, _ = runCmd("index", "verify", "--config", cfgPath)
	if code != 1 || !strings.Contains(out, `users key "user-9": index 1/1`) || !strings.Contains(out, "1 differences") {
		t.Fatalf("verify after tampering: %d\n%s", code, out)
	}

	// No index at all: korvet rebuilds it from the log as it starts.
	if err := os.RemoveAll(indexDir(cfg)); err != nil {
		t.Fatal(err)
	}
	k = serveInProc(t, cfgPath, cfg)
	defer k.stop(t)
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, body := getKey("user-9")
		if code == 200 && body == "v2709" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("user-9 after deleting the index: %d %s", code, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code, _ := getKey("user-7"); code != 404 {
		t.Fatalf("tombstoned user-7: %d", code)
	}
}

func ptrTo(s string) *string { return &s }
