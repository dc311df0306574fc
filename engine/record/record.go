// Package record holds the one shape a Kafka record takes inside korvet.
//
// The wire layer parses record batches into Records and builds batches from
// them; the engine stores and loads them. Byte slices usually point into a
// buffer owned by whoever produced the Record (a decompressed batch, a Redis
// reply), so a Record is only valid as long as that buffer is.
//
// A nil slice means null, a non-nil empty slice means empty: Kafka keeps the
// two apart (a null value is a tombstone) and so does korvet.
package record

// Header is one record header. Value nil is a null header value.
type Header struct {
	Key   []byte
	Value []byte
}

// Record is one Kafka record.
type Record struct {
	Offset    int64 // absolute offset; set by the engine on append
	Timestamp int64 // milliseconds since the epoch
	Key       []byte
	Value     []byte
	Headers   []Header
}

// Size is the record's payload size in bytes, used for size limits and
// retention.bytes accounting. It is not the encoded size on the wire.
func (r *Record) Size() int {
	n := len(r.Key) + len(r.Value) + 8
	for i := range r.Headers {
		n += len(r.Headers[i].Key) + len(r.Headers[i].Value)
	}
	return n
}

// Txn marks a record of a transactional batch, or a control record (a
// transaction's commit or abort marker). ProducerID -1: neither.
type Txn struct {
	ProducerID int64
	Epoch      int16
	Control    bool
}
