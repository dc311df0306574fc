package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/korvet/korvet/internal/testbed"
)

// TestSecretsStayOut runs the binary on a Redis that requires a password,
// with the password in the Redis URL and every other secret korvet knows
// (S3 secret key, REST catalog token, passwords in the S3 endpoint and
// catalog URLs) set to unique markers, and looks for the markers where
// korvet writes: its log, /api/v1/status, /api/v1/topics, the status page,
// /metrics, and the errors of serve, user and index when Redis is
// unreachable or refuses the password. The places that show a URL must
// show it redacted (redis://default:***@...), so that the test sees them.
func TestSecretsStayOut(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	marker := func(what string) string {
		b := make([]byte, 8)
		if _, err := rand.Read(b); err != nil {
			t.Fatal(err)
		}
		return "marker-" + what + "-" + hex.EncodeToString(b)
	}
	redisPW := marker("redis")
	secrets := []string{redisPW, marker("s3secret"), marker("token"), marker("endpointpw"), marker("catalogpw"), marker("wrongpw")}
	s3Secret, token, endpointPW, catalogPW, wrongPW := secrets[1], secrets[2], secrets[3], secrets[4], secrets[5]
	r := testbed.StartRedis(t, "--requirepass", redisPW)
	redisURL := fmt.Sprintf("redis://default:%s@127.0.0.1:%d/0", redisPW, r.Port)
	shownURL := fmt.Sprintf("redis://default:***@127.0.0.1:%d/0", r.Port)
	deadEndpoint := testbed.FreePort(t) // free a moment ago; nothing listens
	deadCatalog := testbed.FreePort(t)
	hc := &http.Client{Timeout: 5 * time.Second}

	clean := func(t *testing.T, where, text string) {
		t.Helper()
		for _, s := range secrets {
			if strings.Contains(text, s) {
				t.Errorf("%s holds secret %s:\n%s", where, s, text)
			}
		}
	}
	config := func(p *proc, url, cold string) string {
		return writeConfig(t, fmt.Sprintf(`data_dir = %q
log_level = "debug"
`+p.registryKey()+`
[kafka]
listen = %q
[http]
listen = %q
[redis]
url = %q
[cold]
access_key = "korvet-test-access"
secret_key = %q
rest_catalog_url = "http://catalog:%s@127.0.0.1:%d/api"
rest_catalog_token = %q
%s
`, t.TempDir(), p.kafkaAddr, strings.TrimPrefix(p.httpBase, "http://"), url, s3Secret, catalogPW, deadCatalog, token, cold))
	}

	for _, tc := range []struct {
		name string
		cold string // warehouse and endpoint
		// coldLog is what the log shows of the cold tier's setup error.
		coldLog string
	}{
		// The bucket check fails first: the S3 endpoint's error path.
		{"s3 warehouse", fmt.Sprintf("warehouse = \"s3://korvet-bucket/wh\"\nendpoint = \"http://ak:%s@127.0.0.1:%d\"", endpointPW, deadEndpoint),
			"bucket korvet-bucket at 127.0.0.1:"},
		// A local warehouse: the REST catalog's error path.
		{"rest catalog", "", "catalog:***@127.0.0.1:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newProc(t, r)
			p.cfg = config(p, redisURL, tc.cold)
			p.launch(t)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cl, err := kgo.NewClient(kgo.SeedBrokers(p.kafkaAddr), kgo.AllowAutoTopicCreation())
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "secrets", Value: []byte("v")}).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
			// The cold tier's setup error is in the log by now, or soon.
			for !strings.Contains(p.logs.String(), "cold tier not reachable yet") {
				if ctx.Err() != nil {
					t.Fatal("korvet did not log that the cold tier is unreachable")
				}
				time.Sleep(50 * time.Millisecond)
			}
			for path, want := range map[string]string{
				"/api/v1/status": `"keyspace"`,
				"/api/v1/topics": `"secrets"`,
				"/":              "<html",
				"/metrics":       "korvet_",
			} {
				code, body, err := httpGet(hc, p.httpBase+path)
				if err != nil || code != http.StatusOK || !strings.Contains(string(body), want) {
					t.Fatalf("GET %s: %d %v, body without %q:\n%.500s", path, code, err, want, body)
				}
				clean(t, "GET "+path, string(body))
			}
			if _, err := p.stop(t, 15*time.Second); err != nil {
				t.Errorf("korvet exited with %v after SIGTERM", err)
			}
			logs := p.logs.String()
			clean(t, "korvet's log", logs)
			for _, want := range []string{"redis=" + shownURL, tc.coldLog} {
				if !strings.Contains(logs, want) {
					t.Errorf("korvet's log does not show %q:\n%s", want, logs)
				}
			}
		})
	}

	// Redis unreachable, or refusing the password: serve, user and index
	// fail, naming the Redis without its password.
	deadRedis := testbed.FreePort(t)
	for _, tc := range []struct {
		name, url, shown string
	}{
		{"unreachable", fmt.Sprintf("redis://default:%s@127.0.0.1:%d/0", redisPW, deadRedis), fmt.Sprintf("redis://default:***@127.0.0.1:%d/0", deadRedis)},
		{"wrong password", fmt.Sprintf("redis://default:%s@127.0.0.1:%d/0", wrongPW, r.Port), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newProc(t, r)
			cfg := config(p, tc.url, "")
			for _, args := range [][]string{
				{"serve", "--config", cfg},
				{"user", "list", "--config", cfg},
				{"index", "rebuild", "--config", cfg},
			} {
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				out, err := exec.CommandContext(ctx, p.bin, args...).CombinedOutput()
				timedOut := ctx.Err() != nil
				cancel()
				if timedOut {
					t.Fatalf("korvet %v still running after 60s:\n%s", args, out)
				}
				if err == nil {
					t.Errorf("korvet %v succeeded:\n%s", args, out)
				}
				clean(t, fmt.Sprintf("korvet %v", args), string(out))
				if tc.shown != "" && !strings.Contains(string(out), tc.shown) {
					t.Errorf("korvet %v does not name %s:\n%s", args, tc.shown, out)
				}
				if tc.shown == "" && !strings.Contains(string(out), "WRONGPASS") {
					t.Errorf("korvet %v does not say Redis refused the password:\n%s", args, out)
				}
			}
		})
	}
}

// TestConfigErrorsHidePasswords: a config error quoting a URL hides the
// password in it.
func TestConfigErrorsHidePasswords(t *testing.T) {
	for _, text := range []string{
		"[cold]\nwarehouse = \"gs://ak:hunter2@bucket/wh\"\n",
		"[redis]\nurl = \"redis://default:hunter2@127.0.0.1:99999/0\"\n",
		"[redis]\nurl = \"rediss://default:hunter2@127.0.0.1:99999/0\"\n",
	} {
		_, err := loadConfig(writeConfig(t, text))
		if err == nil || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("config %q: error %v, want one without the password", text, err)
		}
	}
	_, err := loadConfig(writeConfig(t, "[cold]\nwarehouse = \"gs://ak:hunter2@bucket/wh\"\n"))
	if err == nil || !strings.Contains(err.Error(), "gs://ak:***@bucket/wh") {
		t.Errorf("bad warehouse: %v, want it named without its password", err)
	}
}
