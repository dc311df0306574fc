package clustertest

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/internal/testbed/kafkaload"
)

// rawProducer sends Produce requests (v7, acks=all, no idempotence) of one
// record each over one connection to one broker, without waiting for the
// answers, and collects the answers as they come: a client whose requests
// are in flight when its broker stalls.
type rawProducer struct {
	conn  net.Conn
	topic string

	mu      sync.Mutex
	next    int32
	sent    map[int32]rawSend // by correlation id
	answers map[int32]rawAnswer
	readErr error
	done    chan struct{}
}

type rawSend struct {
	value string
	at    time.Time
}

type rawAnswer struct {
	offset int64
	code   int16 // Kafka error code; 0: written at offset
}

func dialRaw(addr, topic string) (*rawProducer, error) {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	rp := &rawProducer{conn: c, topic: topic, sent: map[int32]rawSend{}, answers: map[int32]rawAnswer{}, done: make(chan struct{})}
	go rp.read()
	return rp, nil
}

// send writes one Produce request of value to partition.
func (rp *rawProducer) send(partition int32, value string) error {
	rp.mu.Lock()
	corr := rp.next
	rp.next++
	rp.sent[corr] = rawSend{value: value, at: time.Now()}
	rp.mu.Unlock()

	req := kmsg.NewPtrProduceRequest()
	req.Version = 7
	req.Acks = -1
	req.TimeoutMillis = 30000
	tp := kmsg.NewProduceRequestTopicPartition()
	tp.Partition = partition
	tp.Records = recordBatch([]byte(value))
	t := kmsg.NewProduceRequestTopic()
	t.Topic = rp.topic
	t.Partitions = append(t.Partitions, tp)
	req.Topics = append(req.Topics, t)

	// Request header v1: api key, version, correlation id, client id.
	body := binary.BigEndian.AppendUint16(nil, uint16(req.Key()))
	body = binary.BigEndian.AppendUint16(body, uint16(req.Version))
	body = binary.BigEndian.AppendUint32(body, uint32(corr))
	body = binary.BigEndian.AppendUint16(body, uint16(len("zombie-client")))
	body = append(body, "zombie-client"...)
	body = req.AppendTo(body)
	frame := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
	if err := rp.conn.SetWriteDeadline(time.Now().Add(5 * time.Second)); err != nil {
		return err
	}
	_, err := rp.conn.Write(append(frame, body...))
	return err
}

// read collects answers until the connection ends.
func (rp *rawProducer) read() {
	defer close(rp.done)
	br := bufio.NewReader(rp.conn)
	for {
		var head [8]byte
		if _, err := io.ReadFull(br, head[:]); err != nil {
			rp.setErr(err)
			return
		}
		size := binary.BigEndian.Uint32(head[:4])
		if size < 4 || size > 1<<20 {
			rp.setErr(fmt.Errorf("answer of %d bytes", size))
			return
		}
		corr := int32(binary.BigEndian.Uint32(head[4:]))
		body := make([]byte, size-4)
		if _, err := io.ReadFull(br, body); err != nil {
			rp.setErr(err)
			return
		}
		resp := kmsg.NewPtrProduceResponse()
		resp.Version = 7
		if err := resp.ReadFrom(body); err != nil || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			rp.setErr(fmt.Errorf("answer %d: %v (%d topics)", corr, err, len(resp.Topics)))
			return
		}
		p := resp.Topics[0].Partitions[0]
		rp.mu.Lock()
		rp.answers[corr] = rawAnswer{offset: p.BaseOffset, code: p.ErrorCode}
		rp.mu.Unlock()
	}
}

func (rp *rawProducer) setErr(err error) {
	rp.mu.Lock()
	rp.readErr = err
	rp.mu.Unlock()
}

func (rp *rawProducer) sentCount() int {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	return len(rp.sent)
}

// unanswered counts the requests with no answer yet.
func (rp *rawProducer) unanswered() int {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	return len(rp.sent) - len(rp.answers)
}

func (rp *rawProducer) close() {
	rp.conn.Close()
	<-rp.done
}

// recordBatch is a v2 record batch of one record with value and no key.
func recordBatch(value []byte) []byte {
	var rec []byte
	rec = append(rec, 0)               // attributes
	rec = binary.AppendVarint(rec, 0)  // timestamp delta
	rec = binary.AppendVarint(rec, 0)  // offset delta
	rec = binary.AppendVarint(rec, -1) // no key
	rec = binary.AppendVarint(rec, int64(len(value)))
	rec = append(rec, value...)
	rec = binary.AppendVarint(rec, 0) // no headers
	records := binary.AppendVarint(nil, int64(len(rec)))
	records = append(records, rec...)

	now := time.Now().UnixMilli()
	b := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1,
		Magic:                2,
		FirstTimestamp:       now,
		MaxTimestamp:         now,
		ProducerID:           -1,
		ProducerEpoch:        -1,
		FirstSequence:        -1,
		NumRecords:           1,
		Records:              records,
	}
	raw := b.AppendTo(nil)
	// Length counts what follows it; the CRC (Castagnoli) covers what
	// follows the CRC: attributes on.
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	crc := crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli))
	binary.BigEndian.PutUint32(raw[17:], crc)
	return raw
}

// TestRawProducerOneBroker checks the raw client the zombie test uses
// against one broker: each request is answered, at consecutive offsets,
// and the records read back as sent.
func TestRawProducerOneBroker(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a korvet broker")
	}
	c := startCluster(t, 1)
	c.createTopic("raw", 2, nil)
	rp, err := dialRaw(c.brokers[0].KafkaAddr, "raw")
	if err != nil {
		t.Fatal(err)
	}
	defer rp.close()
	extra := map[string]int64{}
	for i := range 5 {
		if err := rp.send(1, fmt.Sprintf("raw=%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	testbed.Eventually(t, 10*time.Second, "answers", func() (bool, string) {
		n := rp.unanswered()
		return n == 0, fmt.Sprintf("%d unanswered", n)
	})
	rp.mu.Lock()
	for corr, s := range rp.sent {
		a := rp.answers[corr]
		if a.code != 0 || a.offset != int64(corr) {
			t.Errorf("%s: answer %+v, want offset %d", s.value, a, corr)
		}
		extra[s.value] = a.offset
	}
	rp.mu.Unlock()
	kafkaload.CheckLog(t, c.seeds(), c.adm, "raw", kafkaload.Check{Extra: extra})
}
