package kafkawire_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/engine/record"
	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/kafkawire/batch"
	"github.com/korvet/korvet/resp"
)

// waitReplicaOnline polls the master until it lists n online replicas.
func waitReplicaOnline(t *testing.T, master *resp.Client, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		r, err := master.Do(context.Background(), "INFO", "replication")
		if err == nil && strings.Count(string(r.Bytes()), "state=online") == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("master does not list %d online replicas: %s %v", n, r.Bytes(), err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestWaitReplicas checks redis.wait_replicas on a standalone Redis with
// one replica: an acks=all produce is acknowledged only once the replica
// has it; without the replica it answers NOT_ENOUGH_REPLICAS_AFTER_APPEND
// with the records written all the same, while acks=1 does not wait; an
// idempotent producer's retry goes through once the replica is back.
func TestWaitReplicas(t *testing.T) {
	master := testbed.StartRedis(t)
	replica := testbed.StartRedis(t, "--replicaof", "127.0.0.1", strconv.Itoa(master.Port))
	b := &broker{t: t, redis: master, opts: engine.Options{WaitReplicas: 1, WaitTimeout: 300 * time.Millisecond}}
	b.start("127.0.0.1:0")
	t.Cleanup(b.stop)
	rrc, err := resp.New(replica.URL, resp.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rrc.Close()
	waitReplicaOnline(t, b.rc, 1)
	ctx := context.Background()
	const topic = "durable"
	if _, err := b.admin().CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	meta := "korvet:meta:partition:" + topic + ":0"

	// Acknowledged means on the replica: its copy of the partition
	// counter is past every acknowledged offset the moment the ack
	// arrives (without WAIT this races replication).
	cl := b.client(kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()))
	defer cl.Close()
	for i := range 50 {
		r := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v" + strconv.Itoa(i))})
		if err := r.FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
		off := r[0].Record.Offset
		got, err := rrc.Do(ctx, "HGET", meta, "next")
		if err != nil {
			t.Fatal(err)
		}
		if n, _ := strconv.ParseInt(string(got.Bytes()), 10, 64); n <= off {
			t.Fatalf("offset %d acknowledged but the replica's next is %d", off, n)
		}
	}

	// The replica leaves: acks=all is refused (retriable), acks=1 is not.
	if _, err := rrc.Do(ctx, "REPLICAOF", "NO", "ONE"); err != nil {
		t.Fatal(err)
	}
	waitReplicaOnline(t, b.rc, 0)
	produce := func(acks int16, value string) (int16, int64) {
		t.Helper()
		raw, err := batch.AppendBatch(nil, []record.Record{{Timestamp: time.Now().UnixMilli(), Value: []byte(value)}}, batch.BuildOptions{})
		if err != nil {
			t.Fatal(err)
		}
		req := kmsg.NewPtrProduceRequest()
		req.Version, req.Acks, req.TimeoutMillis = 9, acks, 5000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = raw
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		res := ask(t, b.addr, req).(*kmsg.ProduceResponse)
		p := res.Topics[0].Partitions[0]
		return p.ErrorCode, p.BaseOffset
	}
	start := time.Now()
	code, _ := produce(-1, "unreplicated")
	if code != kerr.NotEnoughReplicasAfterAppend.Code {
		t.Fatalf("acks=all without the replica answered %v, want NOT_ENOUGH_REPLICAS_AFTER_APPEND", kerr.ErrorForCode(code))
	}
	if waited := time.Since(start); waited < 250*time.Millisecond {
		t.Errorf("acks=all gave up after %v, before wait_timeout", waited)
	}
	code, off := produce(1, "leader only")
	if code != 0 {
		t.Fatalf("acks=1 without the replica: %v", kerr.ErrorForCode(code))
	}
	// The refused append is in the log all the same, before the acks=1 one.
	recs := consumeN(t, b, topic, int(off)+1)
	if got := string(recs[off-1].Value); got != "unreplicated" {
		t.Fatalf("record before the acks=1 one is %q, want the acks=all one", got)
	}

	// An idempotent producer keeps retrying and succeeds once the replica
	// is back.
	done := make(chan error, 1)
	go func() {
		r := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("after")})
		done <- r.FirstErr()
	}()
	select {
	case err := <-done:
		t.Fatalf("acks=all succeeded without a replica: %v", err)
	case <-time.After(500 * time.Millisecond):
	}
	if _, err := rrc.Do(ctx, "REPLICAOF", "127.0.0.1", strconv.Itoa(master.Port)); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("retry after the replica came back: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("acks=all produce did not succeed after the replica came back")
	}
}
