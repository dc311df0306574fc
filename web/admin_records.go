package web

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"net/http"
	"sort"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/engine/auth"
	"github.com/korvet/korvet/engine/record"
)

// Record routes: delete records before an offset, show the last records
// of a topic, produce a test record.

// Bounds of GET .../records: what one answer may carry.
const (
	recordsLimitDefault = 20
	recordsLimitMax     = 100
	valueBytesDefault   = 4096
	valueBytesMax       = 65536
	// recordsReadMax bounds what is read from Redis for one answer: a
	// single record may be as large as max.message.bytes, and the read
	// takes at least one.
	recordsReadMax = 8 << 20
)

type deleteRecordsBody struct {
	Partitions []struct {
		Partition int32 `json:"partition"`
		Before    int64 `json:"before"` // -1: the high watermark
	} `json:"partitions"`
}

type lowWatermarkJSON struct {
	Partition    int32 `json:"partition"`
	LowWatermark int64 `json:"low_watermark"`
}

func (s *server) topicDeleteRecords(w http.ResponseWriter, r *http.Request) {
	topic := r.PathValue("topic")
	var b deleteRecordsBody
	err := decodeBody(w, r, &b)
	var out []lowWatermarkJSON
	if err == nil {
		ctx, cancel := context.WithTimeout(r.Context(), adminTimeout)
		defer cancel()
		out, err = s.deleteRecords(ctx, r, topic, b)
	}
	s.finish(w, r, "topic.delete_records", "topic:"+topic, http.StatusOK, map[string]any{"partitions": out}, err)
}

func (s *server) deleteRecords(ctx context.Context, r *http.Request, topic string, b deleteRecordsBody) ([]lowWatermarkJSON, error) {
	if len(b.Partitions) == 0 {
		return nil, invalid(`field partitions: name at least one, as [{"partition":0,"before":123}]`)
	}
	req := kmsg.NewPtrDeleteRecordsRequest()
	req.TimeoutMillis = int32(adminTimeout.Milliseconds())
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = topic
	seen := map[int32]bool{}
	for _, p := range b.Partitions {
		if seen[p.Partition] {
			return nil, invalid(fmt.Sprintf("field partitions: partition %d is named twice", p.Partition))
		}
		if p.Before < -1 {
			return nil, invalid(fmt.Sprintf("field partitions: before %d of partition %d: an offset, or -1 for the high watermark", p.Before, p.Partition))
		}
		seen[p.Partition] = true
		rp := kmsg.NewDeleteRecordsRequestTopicPartition()
		rp.Partition, rp.Offset = p.Partition, p.Before
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	kr, err := s.kafka(ctx, r, req)
	if err != nil {
		return nil, err
	}
	out := []lowWatermarkJSON{}
	for _, t := range kr.(*kmsg.DeleteRecordsResponse).Topics {
		for _, p := range t.Partitions {
			if err := kafkaError(p.ErrorCode, nil, fmt.Sprintf("delete records of %s/%d", topic, p.Partition)); err != nil {
				return nil, err
			}
			out = append(out, lowWatermarkJSON{Partition: p.Partition, LowWatermark: p.LowWatermark})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Partition < out[j].Partition })
	return out, nil
}

// bytesJSON is a key or header value: text when it is UTF-8, else base64.
type bytesJSON struct {
	Text   *string `json:"text,omitempty"`
	Base64 *string `json:"base64,omitempty"`
}

// valueJSON is a record value, cut at max_value_bytes: JSON when the whole
// value is JSON, else text when UTF-8, else base64. Size is the whole
// value's.
type valueJSON struct {
	Text      *string         `json:"text,omitempty"`
	JSON      json.RawMessage `json:"json,omitempty"`
	Base64    *string         `json:"base64,omitempty"`
	Size      int             `json:"size"`
	Truncated bool            `json:"truncated"`
	Null      bool            `json:"null,omitempty"` // a tombstone
}

type headerJSON struct {
	Key   string    `json:"key"`
	Value bytesJSON `json:"value"`
}

type recordJSON struct {
	Partition int32        `json:"partition"`
	Offset    int64        `json:"offset"`
	Timestamp int64        `json:"timestamp"`
	Key       *bytesJSON   `json:"key"` // null: no key
	Headers   []headerJSON `json:"headers"`
	Value     valueJSON    `json:"value"`
}

func renderBytes(b []byte) bytesJSON {
	if utf8.Valid(b) {
		s := string(b)
		return bytesJSON{Text: &s}
	}
	s := base64.StdEncoding.EncodeToString(b)
	return bytesJSON{Base64: &s}
}

func renderValue(v []byte, maxBytes int) valueJSON {
	out := valueJSON{Size: len(v), Null: v == nil}
	if v == nil {
		return out
	}
	if len(v) <= maxBytes && json.Valid(v) {
		out.JSON = json.RawMessage(v)
		return out
	}
	if len(v) > maxBytes {
		v, out.Truncated = v[:maxBytes], true
	}
	if cut := trimRune(v); utf8.Valid(cut) {
		s := string(cut)
		out.Text = &s
		return out
	}
	s := base64.StdEncoding.EncodeToString(v)
	out.Base64 = &s
	return out
}

// trimRune drops a UTF-8 sequence the cut split in two.
func trimRune(b []byte) []byte {
	for i := 0; i < utf8.UTFMax && i < len(b); i++ {
		if r, size := utf8.DecodeLastRune(b[:len(b)-i]); r != utf8.RuneError || size > 1 {
			return b[:len(b)-i]
		}
	}
	return b
}

// intParam reads an optional integer query parameter within [lo, hi].
func intParam(r *http.Request, name string, def, lo, hi int64) (int64, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, invalid(fmt.Sprintf("query parameter %s: %q is not a whole number from %d to %d", name, v, lo, hi))
	}
	return n, nil
}

func (s *server) topicRecords(w http.ResponseWriter, r *http.Request) {
	topic := r.PathValue("topic")
	if !s.mayTopic(r, auth.OpRead, topic) {
		writeAPIError(w, &apiError{status: http.StatusForbidden, code: "topic_authorization_failed",
			msg: identityOf(r).principal + " may not READ topic " + topic + " (grant it with an ACL)"})
		return
	}
	var part, limit, maxValue int64
	err := firstErr(
		func() (err error) { part, err = intParam(r, "partition", -1, -1, 1<<31-1); return },
		func() (err error) { limit, err = intParam(r, "limit", recordsLimitDefault, 1, recordsLimitMax); return },
		func() (err error) {
			maxValue, err = intParam(r, "max_value_bytes", valueBytesDefault, 0, valueBytesMax)
			return
		},
	)
	if err != nil {
		writeAPIError(w, err)
		return
	}
	t := s.eng.Topic(topic)
	if t == nil || t.Internal() {
		writeAPIError(w, &apiError{status: http.StatusNotFound, code: "unknown_topic_or_partition", msg: "topic " + topic + " does not exist"})
		return
	}
	ps := t.Partitions()
	if part >= 0 {
		if int(part) >= len(ps) {
			writeAPIError(w, &apiError{status: http.StatusNotFound, code: "unknown_topic_or_partition", msg: fmt.Sprintf("topic %s has no partition %d (it has %d)", topic, part, len(ps))})
			return
		}
		ps = ps[part : part+1]
	}
	ctx, cancel := context.WithTimeout(r.Context(), apiTimeout)
	defer cancel()
	out := []recordJSON{}
	for _, p := range ps {
		recs, err := lastRecords(ctx, p, int(limit), int(maxValue))
		if err != nil {
			writeAPIError(w, fmt.Errorf("read %s/%d: %w", topic, p.ID(), err))
			return
		}
		out = append(out, recs...)
	}
	// Newest last; across partitions the last limit records by time.
	sort.SliceStable(out, func(i, j int) bool { return out[i].Timestamp < out[j].Timestamp })
	if len(out) > int(limit) {
		out = out[len(out)-int(limit):]
	}
	writeJSON(w, http.StatusOK, map[string]any{"records": out})
}

// lastRecords reads the last n records of p below its high watermark.
func lastRecords(ctx context.Context, p *engine.Partition, n, maxValue int) ([]recordJSON, error) {
	hw := p.HighWatermark()
	from := max(hw-int64(n), p.LogStart())
	out := []recordJSON{}
	budget := recordsReadMax
	for from < hw && len(out) < n && budget > 0 {
		res, err := p.ReadBelow(ctx, from, budget, hw)
		if errors.Is(err, engine.ErrOffsetOutOfRange) && from < p.LogStart() {
			from = p.LogStart() // retention or delete-records moved it meanwhile
			continue
		}
		if err != nil {
			return nil, err
		}
		if len(res.Records) == 0 {
			res.Release()
			break
		}
		for i := range res.Records {
			rec := &res.Records[i]
			budget -= rec.Size()
			out = append(out, renderRecord(p.ID(), rec, maxValue))
		}
		from = res.Records[len(res.Records)-1].Offset + 1
		res.Release()
	}
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return out, nil
}

// renderRecord copies what the answer shows of rec: its buffers go back
// to the pool after.
func renderRecord(partition int32, rec *record.Record, maxValue int) recordJSON {
	rj := recordJSON{Partition: partition, Offset: rec.Offset, Timestamp: rec.Timestamp, Headers: []headerJSON{}, Value: renderValue(rec.Value, maxValue)}
	if rec.Value != nil && rj.Value.JSON != nil {
		rj.Value.JSON = append(json.RawMessage(nil), rj.Value.JSON...)
	}
	if rec.Key != nil {
		k := renderBytes(rec.Key)
		rj.Key = &k
	}
	for _, h := range rec.Headers {
		rj.Headers = append(rj.Headers, headerJSON{Key: string(h.Key), Value: renderBytes(h.Value)})
	}
	return rj
}

type produceBody struct {
	Partition *int32  `json:"partition"` // absent or -1: korvet picks
	Key       *string `json:"key"`
	Value     *string `json:"value"` // absent: a null value (tombstone)
	Encoding  string  `json:"encoding"`
	Headers   []struct {
		Key   string `json:"key"`
		Value string `json:"value"`
	} `json:"headers"`
}

func (s *server) topicProduce(w http.ResponseWriter, r *http.Request) {
	topic := r.PathValue("topic")
	var b produceBody
	err := decodeBody(w, r, &b)
	var out map[string]any
	if err == nil {
		ctx, cancel := context.WithTimeout(r.Context(), adminTimeout)
		defer cancel()
		out, err = s.produce(ctx, r, topic, b)
	}
	s.finish(w, r, "topic.produce", "topic:"+topic, http.StatusCreated, out, err)
}

func (s *server) produce(ctx context.Context, r *http.Request, topic string, b produceBody) (map[string]any, error) {
	decode := func(field string, v *string) ([]byte, error) {
		if v == nil {
			return nil, nil
		}
		switch b.Encoding {
		case "", "text":
			return []byte(*v), nil
		case "base64":
			out, err := base64.StdEncoding.DecodeString(*v)
			if err != nil {
				return nil, invalid(fmt.Sprintf("field %s: not base64 (encoding is base64): %v", field, err))
			}
			return out, nil
		}
		return nil, invalid(fmt.Sprintf("field encoding: %q is not text or base64", b.Encoding))
	}
	key, err := decode("key", b.Key)
	if err != nil {
		return nil, err
	}
	value, err := decode("value", b.Value)
	if err != nil {
		return nil, err
	}
	if b.Value != nil && value == nil {
		value = []byte{} // an empty value, not a tombstone
	}
	rec := kmsg.Record{Key: key, Value: value}
	for i, h := range b.Headers {
		hv, err := decode(fmt.Sprintf("headers[%d].value", i), &h.Value)
		if err != nil {
			return nil, err
		}
		rec.Headers = append(rec.Headers, kmsg.Header{Key: h.Key, Value: hv})
	}
	// Refused before the topic is looked up, so that whether it exists
	// is told only to those who may write to it (Produce checks again).
	if !s.mayTopic(r, auth.OpWrite, topic) {
		return nil, &apiError{status: http.StatusForbidden, code: "topic_authorization_failed",
			msg: identityOf(r).principal + " may not WRITE to topic " + topic + " (grant it with an ACL)"}
	}
	t := s.eng.Topic(topic)
	if t == nil || t.Internal() {
		return nil, &apiError{status: http.StatusNotFound, code: "unknown_topic_or_partition", msg: "topic " + topic + " does not exist (create it first)"}
	}
	partition := int32(-1)
	if b.Partition != nil {
		partition = *b.Partition
	}
	if partition < -1 || int(partition) >= len(t.Partitions()) {
		return nil, invalid(fmt.Sprintf("field partition: topic %s has partitions 0 to %d (or -1 for any)", topic, len(t.Partitions())-1))
	}
	if partition == -1 {
		partition = pickPartition(key, len(t.Partitions()))
	}

	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, int32(adminTimeout.Milliseconds())
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic, rt.TopicID = topic, t.ID()
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = partition, oneRecordBatch(rec, time.Now().UnixMilli())
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	kr, err := s.kafka(ctx, r, req)
	if err != nil {
		return nil, err
	}
	resp := kr.(*kmsg.ProduceResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return nil, fmt.Errorf("produce to %s: no single partition in the answer", topic)
	}
	p := resp.Topics[0].Partitions[0]
	if err := kafkaError(p.ErrorCode, p.ErrorMessage, fmt.Sprintf("produce to %s/%d", topic, p.Partition)); err != nil {
		return nil, err
	}
	return map[string]any{"partition": p.Partition, "offset": p.BaseOffset}, nil
}

// pickPartition spreads keyless test records by time and sends a key to
// one partition always (not Kafka's murmur2: a test record only needs to
// land somewhere valid).
func pickPartition(key []byte, n int) int32 {
	if key == nil {
		return int32(time.Now().UnixNano() % int64(n))
	}
	return int32(crc32.ChecksumIEEE(key) % uint32(n))
}

// oneRecordBatch encodes rec as a v2 record batch of one record, without
// compression and without a producer id.
func oneRecordBatch(rec kmsg.Record, now int64) []byte {
	// AppendTo starts with Length, a varint: with Length 0 that is one
	// byte, the rest is the record's length.
	rec.Length = int32(len(rec.AppendTo(nil)) - 1)
	framed := rec.AppendTo(nil)
	kb := kmsg.RecordBatch{
		Length:         int32(49 + len(framed)),
		Magic:          2,
		FirstTimestamp: now,
		MaxTimestamp:   now,
		ProducerID:     -1,
		ProducerEpoch:  -1,
		FirstSequence:  -1,
		NumRecords:     1,
		Records:        framed,
	}
	b := kb.AppendTo(nil)
	// The CRC covers everything from the attributes (byte 21) on.
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// firstErr runs steps until one fails.
func firstErr(steps ...func() error) error {
	for _, f := range steps {
		if err := f(); err != nil {
			return err
		}
	}
	return nil
}
