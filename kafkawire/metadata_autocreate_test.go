package kafkawire_test

import (
	"bytes"
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/korvet/korvet/engine"
)

// TestMetadataAutoCreateAfterDelete: as in Kafka, the Metadata call that
// auto-creates a topic answers LEADER_NOT_AVAILABLE for it without
// partitions, also right after DeleteTopics; the next call lists the new
// topic (a new id, empty). Without auto-creation it is
// UNKNOWN_TOPIC_OR_PARTITION and nothing is created. kgo and kcat
// (librdkafka) producing to a new topic retry through the first answer.
func TestMetadataAutoCreateAfterDelete(t *testing.T) {
	b := startBroker(t, engine.Options{AutoCreateTopics: true, DefaultPartitions: 2})
	ctx := ctxT(t, 60*time.Second)
	cl := b.client()
	adm := b.admin()
	const topic = "gone"
	if _, err := adm.CreateTopic(ctx, 3, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	produceAll(t, b.client(kgo.DefaultProduceTopic(topic)), []*kgo.Record{{Value: []byte("old")}})
	before := b.eng.Topic(topic).ID()
	if res, err := adm.DeleteTopics(ctx, topic); err != nil || res.Error() != nil {
		t.Fatalf("delete: %v %v", err, res.Error())
	}

	// kgo sends the highest version both sides know; old pins it below
	// v4, which has no flag and always creates.
	old := b.client(kgo.MaxVersions(kversion.V0_10_2()))
	metadata := func(cl *kgo.Client, auto bool, name string) kmsg.MetadataResponseTopic {
		t.Helper()
		req := kmsg.NewPtrMetadataRequest()
		req.AllowAutoTopicCreation = auto
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil || len(resp.Topics) != 1 {
			t.Fatalf("metadata of %s: %v (%d topics)", name, err, len(resp.Topics))
		}
		return resp.Topics[0]
	}

	if mt := metadata(cl, false, topic); mt.ErrorCode != kerr.UnknownTopicOrPartition.Code || b.eng.Topic(topic) != nil {
		t.Fatalf("deleted topic without auto-creation: error %d, recreated %v", mt.ErrorCode, b.eng.Topic(topic) != nil)
	}
	mt := metadata(cl, true, topic)
	if mt.ErrorCode != kerr.LeaderNotAvailable.Code || len(mt.Partitions) != 0 {
		t.Fatalf("first call after delete: error %d with %d partitions, want LEADER_NOT_AVAILABLE and none", mt.ErrorCode, len(mt.Partitions))
	}
	if b.eng.Topic(topic) == nil {
		t.Fatal("the call did not create the topic")
	}
	mt = metadata(cl, true, topic)
	if mt.ErrorCode != 0 || len(mt.Partitions) != 2 || mt.TopicID == before {
		t.Fatalf("second call: error %d, %d partitions, id changed %v; want the new topic with 2 partitions", mt.ErrorCode, len(mt.Partitions), mt.TopicID != before)
	}
	if hw := b.eng.Topic(topic).Partition(0).HighWatermark(); hw != 0 {
		t.Fatalf("recreated topic has high watermark %d", hw)
	}

	// Metadata before v4 creates whatever it names.
	if mt := metadata(old, false, "fresh-v2"); mt.ErrorCode != kerr.LeaderNotAvailable.Code {
		t.Fatalf("v2 auto-create: error %d", mt.ErrorCode)
	}
	if mt := metadata(old, false, "fresh-v2"); mt.ErrorCode != 0 || len(mt.Partitions) != 2 {
		t.Fatalf("v2 second call: error %d, %d partitions", mt.ErrorCode, len(mt.Partitions))
	}

	// Clients go through the first answer on their own.
	produceAll(t, b.client(kgo.DefaultProduceTopic("fresh-kgo")), []*kgo.Record{{Value: []byte("v")}})
	if got := consumeN(t, b, "fresh-kgo", 1); string(got[0].Value) != "v" {
		t.Fatalf("kgo read back %q", got[0].Value)
	}
	kcat := kcatPath(t)
	kctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(kctx, kcat, "-b", b.addr, "-P", "-t", "fresh-kcat", "-X", "socket.timeout.ms=10000")
	cmd.Stdin = bytes.NewReader([]byte("a\nb\n"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kcat -P to a new topic: %v\n%s", err, out)
	}
	// Two partitions: the records may come back in either order.
	if got := consumeN(t, b, "fresh-kcat", 2); string(got[0].Value)+string(got[1].Value) != "ab" && string(got[0].Value)+string(got[1].Value) != "ba" {
		t.Fatalf("kcat produced %q, %q", got[0].Value, got[1].Value)
	}
}
