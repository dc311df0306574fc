package clustertest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestKVReadYourWritesAcrossBrokers: a value produced through one broker
// is read from every other broker's KV view at once, by passing the
// acknowledged partition and offset as the read-your-writes token (query
// parameter after=P:O, or header Korvet-After): one GET each, no retry.
func TestKVReadYourWritesAcrossBrokers(t *testing.T) {
	needCluster(t)
	c := startCluster(t, 3)
	const topic = "profiles"
	c.createTopic(topic, partitions, map[string]*string{"korvet.index.enable": kadm.StringPtr("true")})
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	hc := &http.Client{Timeout: 10 * time.Second}
	get := func(url, header string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		if header != "" {
			req.Header.Set("Korvet-After", header)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return resp.StatusCode, string(body)
	}

	reads := 0
	var slowest time.Duration
	for round := range 30 {
		key := fmt.Sprintf("user-%d", round%3) // keys written again: the newest value must win
		value := fmt.Sprintf("v%d", round)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		r, err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte(key), Value: []byte(value)}).First()
		cancel()
		if err != nil {
			t.Fatalf("produce %s=%s: %v", key, value, err)
		}
		leaders, _, err := c.leaders(topic)
		if err != nil {
			t.Fatal(err)
		}
		token := fmt.Sprintf("%d:%d", r.Partition, r.Offset)
		for _, k := range c.brokers {
			if k.NodeID == leaders[r.Partition] && round%2 == 0 {
				continue // the leader too on odd rounds; the others always
			}
			url := fmt.Sprintf("http://%s/v1/kv/%s/%s", k.HTTPAddr, topic, key)
			header := ""
			if round%3 == 0 {
				header = token
			} else {
				url += "?after=" + token
			}
			start := time.Now()
			code, body := get(url, header)
			slowest = max(slowest, time.Since(start))
			reads++
			if code != http.StatusOK || body != value {
				t.Errorf("round %d: node %d (leader of %d is %d) answered %d %q for %s after %s, want %q", round, k.NodeID, r.Partition, leaders[r.Partition], code, body, key, token, value)
			}
		}
	}
	t.Logf("%d reads with a token on brokers that did not take the write; slowest %v", reads, slowest.Round(time.Millisecond))
}
