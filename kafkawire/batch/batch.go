// Package batch decodes Kafka record batches (magic v2) from Produce
// requests and builds them for Fetch responses, with every compression codec
// Kafka defines.
//
// The v2 batch layout, all integers big endian:
//
//	baseOffset           int64   0
//	batchLength          int32   8  bytes after this field
//	partitionLeaderEpoch int32  12
//	magic                int8   16  2
//	crc                  uint32 17  CRC-32C of everything from attributes on
//	attributes           int16  21
//	lastOffsetDelta      int32  23
//	baseTimestamp        int64  27
//	maxTimestamp         int64  35
//	producerId           int64  43
//	producerEpoch        int16  51
//	baseSequence         int32  53
//	recordCount          int32  57
//	records                     61  possibly compressed as a whole
//
// Each record is a zigzag varint length followed by: attributes int8,
// timestampDelta varlong, offsetDelta varint, key and value (varint length,
// -1 for null), and a varint count of headers, each a varint length key
// (never null) and a varint length value (-1 for null).
package batch

import (
	"errors"
	"hash/crc32"

	"github.com/korvet/korvet/engine/record"
)

// Compression is a record batch codec, attribute bits 0-2.
type Compression int8

// The codecs Kafka defines; the attribute values 5-7 are unassigned.
const (
	None   Compression = 0
	Gzip   Compression = 1
	Snappy Compression = 2
	LZ4    Compression = 3
	Zstd   Compression = 4
)

func (c Compression) String() string {
	switch c {
	case None:
		return "none"
	case Gzip:
		return "gzip"
	case Snappy:
		return "snappy"
	case LZ4:
		return "lz4"
	case Zstd:
		return "zstd"
	}
	return "unknown"
}

// Batch attribute bits.
const (
	AttrCompressionMask int16 = 0x07
	AttrLogAppendTime   int16 = 0x08 // timestamp type: 0 create time, 1 log append time
	AttrTransactional   int16 = 0x10
	AttrControl         int16 = 0x20
	AttrDeleteHorizon   int16 = 0x40 // baseTimestamp holds the delete horizon (KIP-534)
)

// BatchHeaderSize is the size of a v2 batch before its records, the fixed
// cost of every batch in max_bytes accounting.
const BatchHeaderSize = 61

// DefaultMaxDecompressed is the Decoder's bound when MaxDecompressed is 0.
const DefaultMaxDecompressed = 64 << 20

const (
	magicV2 = 2

	// Byte positions in the batch header.
	offLength     = 8
	offLeaderEp   = 12
	offMagic      = 16
	offCRC        = 17
	offAttributes = 21
	offLastDelta  = 23
	offFirstTS    = 27
	offMaxTS      = 35
	offProducerID = 43
	offProdEpoch  = 51
	offBaseSeq    = 53
	offNumRecords = 57

	// minBatchLength is batchLength for a batch with no records.
	minBatchLength = BatchHeaderSize - offLeaderEp

	// minRecordSize is the smallest encoded record: one byte each for the
	// length, attributes, timestamp delta, offset delta, key length, value
	// length and header count. Counts are checked against it before
	// anything is allocated for them.
	minRecordSize = 7
	// minHeaderSize is the smallest encoded header: key and value lengths.
	minHeaderSize = 2
)

// Errors, to be matched with errors.Is; the returned errors wrap them with
// where and what went wrong.
var (
	// ErrCorrupt is a batch that does not parse: a bad CRC, truncation,
	// bad lengths or varints, a record count that does not match the
	// records. Kafka's CORRUPT_MESSAGE.
	ErrCorrupt = errors.New("corrupt record batch")
	// ErrUnsupported is a magic v0/v1 message set or an unknown codec.
	// Kafka's UNSUPPORTED_FOR_MESSAGE_FORMAT (or CORRUPT_MESSAGE for the
	// codec).
	ErrUnsupported = errors.New("unsupported record batch format")
	// ErrTooLarge is a batch that decompresses beyond the Decoder's bound.
	// Kafka's MESSAGE_TOO_LARGE.
	ErrTooLarge = errors.New("record batch decompresses beyond the limit")
)

// castagnoli is the CRC-32C table of the batch checksum.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Batch is one decoded record batch.
type Batch struct {
	BaseOffset           int64
	PartitionLeaderEpoch int32
	Attributes           int16
	LastOffsetDelta      int32
	FirstTimestamp       int64
	MaxTimestamp         int64
	ProducerID           int64
	ProducerEpoch        int16
	BaseSequence         int32
	NumRecords           int32
	// Records hold Offset = BaseOffset + offsetDelta and Timestamp =
	// FirstTimestamp + timestampDelta, as written by the producer: with
	// LogAppendTime set Kafka reports MaxTimestamp instead, which is left
	// to the caller.
	Records []record.Record
}

// Compression is the batch's codec.
func (b *Batch) Compression() Compression { return Compression(b.Attributes & AttrCompressionMask) }

// Transactional reports whether the batch belongs to a transaction.
func (b *Batch) Transactional() bool { return b.Attributes&AttrTransactional != 0 }

// Control reports whether the batch holds control records (transaction
// markers).
func (b *Batch) Control() bool { return b.Attributes&AttrControl != 0 }

// LogAppendTime reports whether the timestamps are the broker's append
// time rather than the producer's create time.
func (b *Batch) LogAppendTime() bool { return b.Attributes&AttrLogAppendTime != 0 }
