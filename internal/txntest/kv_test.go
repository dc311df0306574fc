package txntest

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/korvet/korvet/internal/testbed"
)

// TestKVShowsOnlyCommitted: the KV view shows a value written in a
// transaction once the transaction commits, and never one from an
// aborted transaction.
func TestKVShowsOnlyCommitted(t *testing.T) {
	b := startBroker(t, "")
	const topic = "kvtxn"
	b.createTopic(t, topic, 1, map[string]*string{"korvet.index.enable": kadm.StringPtr("true")})
	seeds := []string{b.KafkaAddr}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	hc := &http.Client{Timeout: 5 * time.Second}
	get := func(key string) (int, string) {
		resp, err := hc.Get("http://" + b.HTTPAddr + "/v1/kv/" + topic + "/" + key)
		if err != nil {
			t.Fatalf("GET %s: %v", key, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	plain, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	// marker writes a plain record after everything before it and waits
	// until the KV view shows it: the view has applied what came before.
	marker := func(val string) {
		t.Helper()
		if err := plain.ProduceSync(ctx, &kgo.Record{Key: []byte("marker"), Value: []byte(val)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	txn, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic), kgo.TransactionalID("kv-producer"))
	if err != nil {
		t.Fatal(err)
	}
	defer txn.Close()

	// An open transaction: its value is not shown. The view applies the
	// log up to the last stable offset, as a read_committed consumer
	// reads it, so the plain record written after it waits too.
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := txn.ProduceSync(ctx, &kgo.Record{Key: []byte("k"), Value: []byte("v1")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	marker("m1")
	if code, body := get("k"); code != http.StatusNotFound {
		t.Fatalf("GET k inside an open transaction: %d %q, want 404", code, body)
	}
	if err := txn.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	testbed.WaitFor(t, 30*time.Second, "k = v1 once committed", func() bool {
		code, body := get("k")
		return code == http.StatusOK && body == "v1"
	})
	testbed.WaitFor(t, 30*time.Second, "marker = m1", func() bool {
		code, body := get("marker")
		return code == http.StatusOK && body == "m1"
	})

	// An aborted transaction never shows.
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := txn.ProduceSync(ctx, &kgo.Record{Key: []byte("k"), Value: []byte("v2-aborted")}, &kgo.Record{Key: []byte("new"), Value: []byte("aborted")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := txn.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
	marker("m2")
	testbed.WaitFor(t, 30*time.Second, "marker = m2 (the view passed the aborted transaction)", func() bool {
		code, body := get("marker")
		return code == http.StatusOK && body == "m2"
	})
	if code, body := get("k"); code != http.StatusOK || body != "v1" {
		t.Fatalf("GET k after an aborted overwrite: %d %q, want v1", code, body)
	}
	if code, body := get("new"); code != http.StatusNotFound {
		t.Fatalf("GET new (only written by the aborted transaction): %d %q, want 404", code, body)
	}
}
