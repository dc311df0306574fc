package testbed

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ZstdBatch returns a Kafka v2 record batch, zstd-compressed, of one
// record whose value is n zero bytes. The record is streamed through the
// encoder and the frame does not state its size, so a broker learns what
// it inflates to only by inflating it: a few KB for tens of MB, the shape
// of a decompression bomb (and of a very compressible legitimate batch).
func ZstdBatch(n int) ([]byte, error) {
	// The record: length, attributes, timestamp delta, offset delta, a
	// null key, the value's length and bytes, no headers.
	head := []byte{0, 0, 0}                    // attributes, timestamp delta, offset delta
	head = binary.AppendVarint(head, -1)       // null key
	head = binary.AppendVarint(head, int64(n)) // value length
	length := len(head) + n + 1                // + the header count
	rec := binary.AppendVarint(nil, int64(length))
	rec = append(rec, head...)

	var body bytes.Buffer
	w, err := zstd.NewWriter(&body, zstd.WithEncoderConcurrency(1))
	if err != nil {
		return nil, fmt.Errorf("zstd writer: %w", err)
	}
	if _, err := w.Write(rec); err != nil {
		return nil, fmt.Errorf("zstd: %w", err)
	}
	zeros := make([]byte, 1<<20)
	for left := n; left > 0; left -= len(zeros) {
		if _, err := w.Write(zeros[:min(left, len(zeros))]); err != nil {
			return nil, fmt.Errorf("zstd: %w", err)
		}
	}
	if _, err := w.Write([]byte{0}); err != nil { // no headers
		return nil, fmt.Errorf("zstd: %w", err)
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("zstd: %w", err)
	}

	now := time.Now().UnixMilli()
	kb := kmsg.RecordBatch{
		Length:         int32(49 + body.Len()),
		Magic:          2,
		Attributes:     4, // zstd
		FirstTimestamp: now,
		MaxTimestamp:   now,
		ProducerID:     -1,
		ProducerEpoch:  -1,
		FirstSequence:  -1,
		NumRecords:     1,
		Records:        body.Bytes(),
	}
	b := kb.AppendTo(nil)
	// The CRC covers everything from the attributes (byte 21) on.
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b, nil
}
