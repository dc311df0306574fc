package kafkawire_test

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/resp"
)

// TestRedisLayout checks what Redis holds, through resp: key names, entry
// IDs equal to offsets, and the documented fields.
func TestRedisLayout(t *testing.T) {
	b := startBroker(t, engine.Options{AutoCreateTopics: true})
	cl := b.client(kgo.DefaultProduceTopic("layout"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ts := time.UnixMilli(1_700_000_000_000)
	produceAll(t, cl, []*kgo.Record{
		{Key: []byte("k1"), Value: []byte(`{"a":1,"b":"two"}`), Timestamp: ts, Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("x")}, {Key: "h", Value: nil}}},
		{Key: nil, Value: []byte("raw"), Timestamp: ts},
		{Key: []byte("k3"), Value: nil, Timestamp: ts},
	})
	ctx := ctxT(t, 10*time.Second)
	// XRANGE key 1 1 finds offset 1, as the contract says.
	r, err := b.rc.Do(ctx, "XRANGE", "korvet:storage:local:layout:0:0", "1", "1")
	if err != nil {
		t.Fatal(err)
	}
	if r.Len() != 1 {
		t.Fatalf("XRANGE 1 1 returned %d entries", r.Len())
	}
	r, err = b.rc.Do(ctx, "XRANGE", "korvet:storage:local:layout:0:0", "-", "+")
	if err != nil {
		t.Fatal(err)
	}
	var ents []resp.Reply
	ents = r.Elems(ents)
	want := []struct {
		id     string
		fields []string
	}{
		{"0-1", []string{"__ts", "1700000000000", "__key", "k1", "__header.h", "x", "__hnull.h", "", "a", "1", "b", `"two"`}},
		{"1-1", []string{"__ts", "1700000000000", "__value", "raw"}},
		{"2-1", []string{"__ts", "1700000000000", "__key", "k3"}},
	}
	if len(ents) != len(want) {
		t.Fatalf("%d entries, want %d", len(ents), len(want))
	}
	for i, e := range ents {
		var pair, fields []resp.Reply
		pair = e.Elems(pair)
		if got := string(pair[0].Bytes()); got != want[i].id {
			t.Fatalf("entry %d id %q, want %q", i, got, want[i].id)
		}
		fields = pair[1].Elems(fields)
		var got []string
		for _, f := range fields {
			got = append(got, string(f.Bytes()))
		}
		if strings.Join(got, "|") != strings.Join(want[i].fields, "|") {
			t.Fatalf("entry %d fields\n got %q\nwant %q", i, got, want[i].fields)
		}
	}
	m, err := b.rc.Do(ctx, "HGET", "korvet:meta:partition:layout:0", "next")
	if err != nil || string(m.Bytes()) != "3" {
		t.Fatalf("partition counter: %q %v", m.Bytes(), err)
	}
}

// rawConn speaks the Kafka framing by hand.
func rawConn(t *testing.T, addr string) net.Conn {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	return c
}

func request(corr int32, req kmsg.Request) []byte {
	var f kmsg.RequestFormatter
	return f.AppendRequest(nil, req, corr)
}

func expectClosed(t *testing.T, c net.Conn) {
	t.Helper()
	_, err := c.Read(make([]byte, 1))
	if err == nil || !(errors.Is(err, io.EOF) || strings.Contains(err.Error(), "reset")) {
		t.Fatalf("connection not closed: %v", err)
	}
}

func TestMalformedAndOversizedFrames(t *testing.T) {
	b := startBroker(t, engine.Options{AutoCreateTopics: true})

	t.Run("oversized", func(t *testing.T) {
		c := rawConn(t, b.addr)
		var hdr [4]byte
		binary.BigEndian.PutUint32(hdr[:], 1<<30) // a 1 GiB frame: never allocated
		c.Write(hdr[:])
		expectClosed(t, c)
	})
	t.Run("negative size", func(t *testing.T) {
		c := rawConn(t, b.addr)
		c.Write([]byte{0xff, 0xff, 0xff, 0xfe})
		expectClosed(t, c)
	})
	t.Run("garbage body", func(t *testing.T) {
		c := rawConn(t, b.addr)
		// A Metadata v9 header with a client id longer than the frame.
		body := []byte{0, 3, 0, 9, 0, 0, 0, 1, 0x7f, 0xff, 'x'}
		frame := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
		c.Write(append(frame, body...))
		expectClosed(t, c)
	})
	t.Run("truncated produce", func(t *testing.T) {
		c := rawConn(t, b.addr)
		req := kmsg.NewPtrProduceRequest()
		req.Version = 9
		req.Acks = -1
		req.TimeoutMillis = 1000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = []byte("not a batch")
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		frame := request(7, req)
		frame = frame[:len(frame)-6]
		binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
		c.Write(frame)
		expectClosed(t, c)
	})
	t.Run("unknown api", func(t *testing.T) {
		c := rawConn(t, b.addr)
		body := []byte{0x7f, 0x00, 0, 0, 0, 0, 0, 1, 0, 0}
		c.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...))
		expectClosed(t, c)
	})
	t.Run("corrupt batch answered", func(t *testing.T) {
		// A well-framed produce whose batch fails its CRC gets
		// CORRUPT_MESSAGE, and the connection stays usable.
		c := rawConn(t, b.addr)
		req := kmsg.NewPtrProduceRequest()
		req.Version = 7
		req.Acks = -1
		req.TimeoutMillis = 1000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "corrupt"
		rp := kmsg.NewProduceRequestTopicPartition()
		batch := kmsg.RecordBatch{Magic: 2, NumRecords: 1, Records: []byte{0x10, 0, 0, 0, 0, 0, 0, 0, 0}}
		batch.Length = int32(49 + len(batch.Records))
		rp.Records = batch.AppendTo(nil)
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		c.Write(request(9, req))
		resp := readResponse(t, c, req)
		pr := resp.(*kmsg.ProduceResponse)
		if code := pr.Topics[0].Partitions[0].ErrorCode; code != kerr.CorruptMessage.Code {
			t.Fatalf("error code %d, want CORRUPT_MESSAGE", code)
		}
		// Still usable: ApiVersions answers.
		av := kmsg.NewPtrApiVersionsRequest()
		c.Write(request(10, av))
		readResponse(t, c, av)
	})
	// After all that the broker still serves.
	produceAll(t, b.client(kgo.DefaultProduceTopic("after")), []*kgo.Record{{Value: []byte("ok")}})
}

func readResponse(t *testing.T, c net.Conn, req kmsg.Request) kmsg.Response {
	t.Helper()
	var hdr [4]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		t.Fatalf("read response: %v", err)
	}
	body := make([]byte, binary.BigEndian.Uint32(hdr[:]))
	if _, err := io.ReadFull(c, body); err != nil {
		t.Fatal(err)
	}
	body = body[4:] // correlation id
	if req.IsFlexible() && req.Key() != 18 {
		body = body[1:]
	}
	r := req.ResponseKind()
	if err := r.ReadFrom(body); err != nil {
		t.Fatalf("decode response: %v", err)
	}
	return r
}

func TestApiVersionsProbe(t *testing.T) {
	b := startBroker(t, engine.Options{})
	c := rawConn(t, b.addr)
	// A version newer than any korvet knows: answered in v0 with
	// UNSUPPORTED_VERSION and the list (what librdkafka relies on).
	body := []byte{0, 18, 0, 99, 0, 0, 0, 5, 0xff, 0xff}
	c.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...))
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version = 0
	r := readResponse(t, c, av).(*kmsg.ApiVersionsResponse)
	if r.ErrorCode != kerr.UnsupportedVersion.Code || len(r.ApiKeys) == 0 {
		t.Fatalf("probe answer: code %d, %d keys", r.ErrorCode, len(r.ApiKeys))
	}
	// Several requests in flight on one connection come back in order.
	var buf bytes.Buffer
	for i := int32(0); i < 20; i++ {
		var req kmsg.Request = kmsg.NewPtrApiVersionsRequest()
		if i%2 == 1 {
			md := kmsg.NewPtrMetadataRequest()
			md.Version = 9
			req = md
		}
		buf.Write(request(100+i, req))
	}
	c.Write(buf.Bytes())
	for i := int32(0); i < 20; i++ {
		var hdr [8]byte
		if _, err := io.ReadFull(c, hdr[:]); err != nil {
			t.Fatal(err)
		}
		if corr := int32(binary.BigEndian.Uint32(hdr[4:])); corr != 100+i {
			t.Fatalf("response %d has correlation %d", i, corr)
		}
		rest := make([]byte, binary.BigEndian.Uint32(hdr[:])-4)
		io.ReadFull(c, rest)
	}
}

func TestMessageTooLargeAndCompactedKeys(t *testing.T) {
	b := startBroker(t, engine.Options{AutoCreateTopics: true})
	adm := b.admin()
	ctx := ctxT(t, 20*time.Second)
	mmb, compact := "1000", "compact"
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"max.message.bytes": &mmb}, "small"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"cleanup.policy": &compact}, "compacted"); err != nil {
		t.Fatal(err)
	}
	cl := b.client(kgo.RecordRetries(0), kgo.DisableIdempotentWrite())
	// Random bytes: the limit applies to the compressed batch, as in Kafka.
	big := make([]byte, 5000)
	rand.Read(big)
	err := cl.ProduceSync(ctx, &kgo.Record{Topic: "small", Value: big}).FirstErr()
	if !errors.Is(err, kerr.MessageTooLarge) {
		t.Fatalf("oversized record: %v, want MESSAGE_TOO_LARGE", err)
	}
	err = cl.ProduceSync(ctx, &kgo.Record{Topic: "compacted", Value: []byte("keyless")}).FirstErr()
	if !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("keyless record on compacted topic: %v, want INVALID_RECORD", err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "compacted", Key: []byte("k"), Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

func TestLogAppendTime(t *testing.T) {
	b := startBroker(t, engine.Options{AutoCreateTopics: true})
	ctx := ctxT(t, 20*time.Second)
	lat := "LogAppendTime"
	if _, err := b.admin().CreateTopic(ctx, 1, 1, map[string]*string{"message.timestamp.type": &lat}, "lat"); err != nil {
		t.Fatal(err)
	}
	before := time.Now().Add(-time.Second)
	produceAll(t, b.client(kgo.DefaultProduceTopic("lat")), []*kgo.Record{{Value: []byte("x"), Timestamp: time.UnixMilli(5)}})
	got := consumeN(t, b, "lat", 1)
	if got[0].Timestamp.Before(before) {
		t.Fatalf("timestamp %v: not the append time", got[0].Timestamp)
	}
}
