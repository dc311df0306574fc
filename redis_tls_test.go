package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/korvet/korvet/internal/testbed"
)

// TestServeOnRedisOverTLS runs korvet on a Redis that speaks TLS only and
// asks for a client certificate: rediss:// with redis.tls_ca_file,
// tls_cert_file and tls_key_file; a record goes through, and the Redis
// password shows nowhere in the log.
func TestServeOnRedisOverTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	const pass = "tls-redis-pass"
	r := testbed.StartTLSRedis(t, true, "--requirepass", pass)
	k := testbed.StartKorvet(t, testbed.KorvetOptions{
		RedisURL: "rediss://:" + pass + "@" + r.Addr + "/0",
		Extra: fmt.Sprintf("redis.tls_ca_file = %q\nredis.tls_cert_file = %q\nredis.tls_key_file = %q\n",
			r.CAFile, r.CertFile, r.KeyFile),
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.KafkaAddr), kgo.AllowAutoTopicCreation(),
		kgo.DefaultProduceTopic("over-tls"), kgo.ConsumeTopics("over-tls"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte("k"), Value: []byte("through TLS")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	fs := cl.PollFetches(ctx)
	if err := fs.Err0(); err != nil {
		t.Fatal(err)
	}
	if recs := fs.Records(); len(recs) != 1 || string(recs[0].Value) != "through TLS" {
		t.Fatalf("consumed %d records", len(recs))
	}
	if log, _ := os.ReadFile(k.LogPath()); strings.Contains(string(log), pass) {
		t.Fatal("the Redis password is in korvet's log")
	}
}
