package kafkawire_test

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/internal/testbed"
)

// readCorr reads one response frame and returns its correlation id and
// body (after the correlation id).
func readCorr(t *testing.T, c net.Conn) (int32, []byte) {
	t.Helper()
	var hdr [8]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		t.Fatalf("read response: %v", err)
	}
	body := make([]byte, binary.BigEndian.Uint32(hdr[:4])-4)
	if _, err := io.ReadFull(c, body); err != nil {
		t.Fatalf("read response body: %v", err)
	}
	return int32(binary.BigEndian.Uint32(hdr[4:])), body
}

// oldProduce is a Produce request of version v carrying batch to two
// partitions (one that does not exist) of topic existing and to a topic
// that does not exist yet.
func oldProduce(v, acks int16, existing, missing string, batch []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = v, acks, 5000
	for _, tp := range []struct {
		topic string
		parts []int32
	}{{existing, []int32{0, 7}}, {missing, []int32{0}}} {
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = tp.topic
		for _, p := range tp.parts {
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition, rp.Records = p, batch
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	return req
}

// TestProduceOldVersionsRefused: Produce v0-2 is advertised (librdkafka
// reads a higher minimum as "no compression", see apiTable) but refused
// with UNSUPPORTED_VERSION on every partition; nothing is stored or
// created, acks=0 gets no answer, and the connection stays open. A
// franz-go client held to Produce v2 gets the error too, and the same
// batch at v3 is stored.
func TestProduceOldVersionsRefused(t *testing.T) {
	b := startBroker(t, engine.Options{AutoCreateTopics: true})
	ctx := ctxT(t, 30*time.Second)
	const existing, missing = "old-produce", "old-produce-new"
	produceAll(t, b.client(kgo.DefaultProduceTopic(existing)), []*kgo.Record{{Value: []byte("first")}})
	// A valid record batch: the version alone is what is refused.
	batch, err := testbed.ZstdBatch(100)
	if err != nil {
		t.Fatal(err)
	}
	c := rawConn(t, b.addr)
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))

	av := kmsg.NewPtrApiVersionsRequest()
	av.Version = 3
	avr := readAfter(t, c, 1, av).(*kmsg.ApiVersionsResponse)
	ranges := map[int16][2]int16{}
	for _, k := range avr.ApiKeys {
		ranges[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	if got := ranges[0]; got != [2]int16{0, 13} {
		t.Errorf("ApiVersions lists Produce %d-%d, want 0-13", got[0], got[1])
	}
	if got := ranges[1]; got != [2]int16{4, 18} {
		t.Errorf("ApiVersions lists Fetch %d-%d, want 4-18", got[0], got[1])
	}

	corr := int32(10)
	for v := int16(0); v <= 2; v++ {
		for _, acks := range []int16{1, -1} {
			corr++
			req := oldProduce(v, acks, existing, missing, batch)
			pr := readAfter(t, c, corr, req).(*kmsg.ProduceResponse)
			if len(pr.Topics) != 2 || pr.Topics[0].Topic != existing || pr.Topics[1].Topic != missing {
				t.Fatalf("v%d acks=%d: answered topics %+v, want %s and %s", v, acks, pr.Topics, existing, missing)
			}
			n := 0
			for _, rt := range pr.Topics {
				for _, rp := range rt.Partitions {
					n++
					if rp.ErrorCode != kerr.UnsupportedVersion.Code || rp.BaseOffset != -1 {
						t.Errorf("v%d acks=%d: %s partition %d answered code %d offset %d, want UNSUPPORTED_VERSION (35), -1",
							v, acks, rt.Topic, rp.Partition, rp.ErrorCode, rp.BaseOffset)
					}
				}
			}
			if n != 3 {
				t.Errorf("v%d acks=%d: %d partitions answered, want 3", v, acks, n)
			}
		}
		// acks=0: no answer; the next request's answer comes next.
		corr++
		if _, err := c.Write(request(corr, oldProduce(v, 0, existing, missing, batch))); err != nil {
			t.Fatal(err)
		}
		corr++
		readAfter(t, c, corr, kmsg.NewPtrApiVersionsRequest())
	}

	// franz-go held to Produce v2 (Kafka 0.10.1's versions) sends message
	// set v1 and is refused the same way.
	old := b.client(kgo.MaxVersions(kversion.V0_10_1()), kgo.DefaultProduceTopic(existing),
		kgo.RecordRetries(0), kgo.DisableIdempotentWrite())
	if err := old.ProduceSync(ctx, &kgo.Record{Value: []byte("old")}).FirstErr(); !errors.Is(err, kerr.UnsupportedVersion) {
		t.Errorf("franz-go at Produce v2: %v, want UNSUPPORTED_VERSION", err)
	}

	// Nothing was stored or created.
	if b.eng.Topic(missing) != nil {
		t.Errorf("topic %s was created by a refused produce", missing)
	}
	r, err := b.rc.Do(ctx, "XLEN", "korvet:storage:local:"+existing+":0:0")
	if err != nil {
		t.Fatal(err)
	}
	if n, err := r.Int(); err != nil || n != 1 {
		t.Errorf("%s holds %d entries (%v), want the 1 produced at v3+", existing, n, err)
	}

	// The connection still serves, and the same batch at v3 is stored.
	corr++
	pr := readAfter(t, c, corr, oldProduce(3, -1, existing, missing, batch)).(*kmsg.ProduceResponse)
	if rp := pr.Topics[0].Partitions[0]; rp.ErrorCode != 0 || rp.BaseOffset != 1 {
		t.Errorf("v3 on the same connection: code %d offset %d, want 0 and 1", rp.ErrorCode, rp.BaseOffset)
	}
}

// readAfter sends req with correlation id corr on c and decodes the next
// response, which must be its answer.
func readAfter(t *testing.T, c net.Conn, corr int32, req kmsg.Request) kmsg.Response {
	t.Helper()
	if _, err := c.Write(request(corr, req)); err != nil {
		t.Fatal(err)
	}
	got, body := readCorr(t, c)
	if got != corr {
		t.Fatalf("response to correlation %d came for %d", corr, got)
	}
	if req.IsFlexible() && req.Key() != 18 {
		body = body[1:] // response header tags
	}
	r := req.ResponseKind()
	r.SetVersion(req.GetVersion())
	if err := r.ReadFrom(body); err != nil {
		t.Fatalf("decode %s response: %v", kmsg.NameForKey(req.Key()), err)
	}
	return r
}
