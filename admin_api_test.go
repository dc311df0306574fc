package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/korvet/korvet/internal/testbed"
)

// TestAdminAPIServe runs the real binary: a topic created over the admin
// socket (serve.go wires the admin API to the Kafka server) is what
// librdkafka (kcat -L -J) lists, with its partitions; the action is
// audited in korvet's log with the socket's principal.
func TestAdminAPIServe(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	testbed.NeedClient(t, "kcat", "kcat", "-V")
	r := testbed.StartRedis(t)
	k := testbed.StartKorvet(t, testbed.KorvetOptions{RedisURL: r.URL})
	sock := filepath.Join(k.DataDir, "korvet.sock")
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}}
	res, err := hc.Post("http://korvet/api/v1/topics", "application/json", strings.NewReader(`{"name":"via-api","partitions":4,"configs":{"retention.ms":"3600000"}}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusCreated {
		t.Fatalf("create over the admin socket: %s %s", res.Status, body)
	}

	out := testbed.RunCmd(t, 30*time.Second, nil, "kcat", "-L", "-J", "-b", k.KafkaAddr, "-t", "via-api")
	var md struct {
		Topics []struct {
			Topic      string `json:"topic"`
			Partitions []struct {
				Partition int `json:"partition"`
			} `json:"partitions"`
		} `json:"topics"`
	}
	if err := json.Unmarshal([]byte(out), &md); err != nil {
		t.Fatalf("kcat -L -J: %v: %s", err, out)
	}
	if len(md.Topics) != 1 || md.Topics[0].Topic != "via-api" || len(md.Topics[0].Partitions) != 4 {
		t.Fatalf("kcat lists %s", out)
	}
	testbed.WaitFor(t, 10*time.Second, "the audit line in the log", func() bool {
		for _, l := range strings.Split(k.Log(), "\n") {
			if strings.Contains(l, `msg="admin action"`) && strings.Contains(l, "action=topic.create") &&
				strings.Contains(l, `principal="local admin socket"`) && strings.Contains(l, "resource=topic:via-api") && strings.Contains(l, "outcome=ok") {
				return true
			}
		}
		return false
	})

	// The document is served over the HTTP listener too.
	res, err = http.Get("http://" + k.HTTPAddr + "/api/v1/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct{ OpenAPI string }
	err = json.NewDecoder(res.Body).Decode(&doc)
	res.Body.Close()
	if err != nil || res.StatusCode != http.StatusOK || doc.OpenAPI != "3.1.0" {
		t.Fatalf("GET /api/v1/openapi.json: %s %v %+v", res.Status, err, doc)
	}
}
