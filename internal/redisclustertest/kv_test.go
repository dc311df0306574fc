package redisclustertest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestKVViewOnCluster: a topic with the KV index (korvet.index.enable)
// on the Redis Cluster; keys written several times over six partitions,
// then GET /v1/kv/{topic}/{key} answers each key's latest value, waiting
// for its last write with the read-your-writes token (after=P:O): one
// GET per key, no retry. A key never written is 404.
func TestKVViewOnCluster(t *testing.T) {
	needRedisCluster(t)
	kvView(t, startEnv(t, 1, ""))
}

func kvView(t *testing.T, e *env) {
	const topic, keys, rounds = "profiles", 40, 5
	e.createTopic(topic, 6, map[string]*string{"korvet.index.enable": kadm.StringPtr("true")})
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.seeds()...), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	latest := map[string]string{}
	token := map[string]string{}
	for round := range rounds {
		var recs []*kgo.Record
		for k := range keys {
			key := fmt.Sprintf("user/%d", k) // a slash: the key is path-escaped
			value := fmt.Sprintf("round %d of %s", round, key)
			latest[key] = value
			recs = append(recs, &kgo.Record{Key: []byte(key), Value: []byte(value)})
		}
		res := cl.ProduceSync(ctx, recs...)
		if err := res.FirstErr(); err != nil {
			t.Fatalf("produce round %d: %v", round, err)
		}
		for _, r := range res {
			token[string(r.Record.Key)] = fmt.Sprintf("%d:%d", r.Record.Partition, r.Record.Offset)
		}
	}

	hc := &http.Client{Timeout: 20 * time.Second}
	get := func(key, after string) (int, string) {
		t.Helper()
		u := fmt.Sprintf("http://%s/v1/kv/%s/%s", e.brokers[0].HTTPAddr, topic, url.PathEscape(key))
		if after != "" {
			u += "?after=" + after
		}
		resp, err := hc.Get(u)
		if err != nil {
			t.Fatalf("GET %s: %v", u, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return resp.StatusCode, string(body)
	}
	for key, value := range latest {
		if code, body := get(key, token[key]); code != http.StatusOK || body != value {
			t.Errorf("GET %s after %s: %d %q, want 200 %q", key, token[key], code, body, value)
		}
	}
	// A key nobody wrote: 404, once the index has caught up with every
	// write (the last token of each partition is behind us already).
	if code, body := get("nobody", ""); code != http.StatusNotFound {
		t.Errorf("GET nobody: %d %q, want 404", code, body)
	}
}
