package batch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"slices"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	"github.com/korvet/korvet/engine/record"
)

// BuildOptions are the batch fields AppendBatch does not derive from the
// records.
type BuildOptions struct {
	Compression Compression
	// HasProducer writes ProducerID, ProducerEpoch and BaseSequence as
	// given; without it they are -1, a batch of no idempotent producer,
	// and must be left 0 or -1. A flag rather than -1 defaults keeps the
	// zero BuildOptions right and producer ID 0 expressible.
	HasProducer   bool
	ProducerID    int64
	ProducerEpoch int16
	BaseSequence  int32
	// Attributes are extra attribute bits (AttrTransactional, AttrControl,
	// AttrLogAppendTime); the codec bits come from Compression and must be
	// 0 here.
	Attributes           int16
	PartitionLeaderEpoch int32
}

// Encoder builds record batches, keeping codec state and a scratch buffer
// across calls: creating a zstd, gzip or lz4 compressor costs far more
// than a small batch, so a fetch path that compresses should keep one.
// The zero value is ready to use. An Encoder is not safe for concurrent
// use.
type Encoder struct {
	scratch []byte // uncompressed records of a compressed batch
	out     appender
	gz      *gzip.Writer
	lz      *lz4.Writer
	zstd    *zstd.Encoder
}

// AppendBatch appends one v2 batch holding recs to dst with a fresh Encoder;
// see Encoder.AppendBatch.
func AppendBatch(dst []byte, recs []record.Record, opts BuildOptions) ([]byte, error) {
	var e Encoder
	return e.AppendBatch(dst, recs, opts)
}

// AppendBatch appends one v2 batch holding recs to dst. recs must be
// non-empty with strictly ascending offsets, gaps allowed (compaction
// leaves them, and Kafka clients handle them): BaseOffset is recs[0].Offset
// and each offset delta is the record's distance from it, FirstTimestamp is
// recs[0].Timestamp and MaxTimestamp the largest. On error dst is returned
// unchanged.
func (e *Encoder) AppendBatch(dst []byte, recs []record.Record, opts BuildOptions) ([]byte, error) {
	if len(recs) == 0 {
		return dst, errors.New("building record batch: no records")
	}
	if opts.Compression < None || opts.Compression > Zstd {
		return dst, fmt.Errorf("building record batch: compression codec %d: %w", opts.Compression, ErrUnsupported)
	}
	if !opts.HasProducer && (producerFieldSet(opts.ProducerID) || producerFieldSet(int64(opts.ProducerEpoch)) || producerFieldSet(int64(opts.BaseSequence))) {
		// Rather than silently write -1 over them.
		return dst, errors.New("building record batch: producer fields set without HasProducer")
	}
	if opts.Attributes&AttrCompressionMask != 0 {
		return dst, fmt.Errorf("building record batch: attributes %#x carry codec bits; use Compression", opts.Attributes)
	}
	base, first := recs[0].Offset, recs[0].Timestamp
	maxTS := first
	for i := 1; i < len(recs); i++ {
		r := &recs[i]
		if r.Offset <= recs[i-1].Offset {
			return dst, fmt.Errorf("building record batch: record %d offset %d after %d", i, r.Offset, recs[i-1].Offset)
		}
		// Ascending, so a difference that overflowed is negative.
		if d := r.Offset - base; d < 0 || d > math.MaxInt32 {
			return dst, fmt.Errorf("building record batch: record %d offset %d is too far from base %d", i, r.Offset, base)
		}
		maxTS = max(maxTS, r.Timestamp)
	}

	start := len(dst)
	var err error
	if opts.Compression == None {
		dst = slices.Grow(dst, BatchHeaderSize+uncompressedSize(recs, base, first))
		dst = dst[:start+BatchHeaderSize]
		dst = appendRecords(dst, recs, base, first)
	} else {
		e.scratch = appendRecords(slices.Grow(e.scratch[:0], uncompressedSize(recs, base, first)), recs, base, first)
		dst = slices.Grow(dst, BatchHeaderSize+len(e.scratch)/2)
		dst, err = e.compress(dst[:start+BatchHeaderSize], opts.Compression)
		if err != nil {
			return dst[:start], fmt.Errorf("building record batch: %s: %w", opts.Compression, err)
		}
	}
	length := len(dst) - start - offLeaderEp
	if length > math.MaxInt32 {
		return dst[:start], fmt.Errorf("building record batch: %d bytes overflow the batch length", length)
	}

	producerID, epoch, seq := int64(-1), int16(-1), int32(-1)
	if opts.HasProducer {
		producerID, epoch, seq = opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence
	}
	h := dst[start : start+BatchHeaderSize]
	be := binary.BigEndian
	be.PutUint64(h, uint64(base))
	be.PutUint32(h[offLength:], uint32(length))
	be.PutUint32(h[offLeaderEp:], uint32(opts.PartitionLeaderEpoch))
	h[offMagic] = magicV2
	be.PutUint16(h[offAttributes:], uint16(opts.Attributes|int16(opts.Compression)))
	be.PutUint32(h[offLastDelta:], uint32(recs[len(recs)-1].Offset-base))
	be.PutUint64(h[offFirstTS:], uint64(first))
	be.PutUint64(h[offMaxTS:], uint64(maxTS))
	be.PutUint64(h[offProducerID:], uint64(producerID))
	be.PutUint16(h[offProdEpoch:], uint16(epoch))
	be.PutUint32(h[offBaseSeq:], uint32(seq))
	be.PutUint32(h[offNumRecords:], uint32(len(recs)))
	be.PutUint32(h[offCRC:], crc32.Checksum(dst[start+offAttributes:], castagnoli))
	return dst, nil
}

// producerFieldSet reports whether a producer field holds a value other
// than the "none" a caller may write without HasProducer: 0 or -1.
func producerFieldSet(v int64) bool { return v != 0 && v != -1 }

// RecordEncodedSize is the size of r encoded in a batch with the given
// deltas from the batch's base offset and first timestamp, length prefix
// included. With BatchHeaderSize it sizes an uncompressed batch exactly.
func RecordEncodedSize(r *record.Record, offsetDelta int32, tsDelta int64) int {
	n := bodySize(r, offsetDelta, tsDelta)
	return varlongLen(int64(n)) + n
}

// bodySize is the size of r after its length prefix.
func bodySize(r *record.Record, offsetDelta int32, tsDelta int64) int {
	n := 1 + varlongLen(tsDelta) + varlongLen(int64(offsetDelta)) +
		bytesLen(r.Key) + bytesLen(r.Value) + varlongLen(int64(len(r.Headers)))
	for i := range r.Headers {
		h := &r.Headers[i]
		n += varlongLen(int64(len(h.Key))) + len(h.Key) + bytesLen(h.Value)
	}
	return n
}

func uncompressedSize(recs []record.Record, base, first int64) int {
	n := 0
	for i := range recs {
		r := &recs[i]
		n += RecordEncodedSize(r, int32(r.Offset-base), r.Timestamp-first)
	}
	return n
}

func appendRecords(dst []byte, recs []record.Record, base, first int64) []byte {
	for i := range recs {
		r := &recs[i]
		offDelta, tsDelta := int32(r.Offset-base), r.Timestamp-first
		dst = appendVarlong(dst, int64(bodySize(r, offDelta, tsDelta)))
		dst = append(dst, 0) // record attributes, unused
		dst = appendVarlong(dst, tsDelta)
		dst = appendVarint(dst, offDelta)
		dst = appendBytes(dst, r.Key)
		dst = appendBytes(dst, r.Value)
		dst = appendVarlong(dst, int64(len(r.Headers)))
		for j := range r.Headers {
			h := &r.Headers[j]
			// A nil key is written empty: header keys are never null.
			dst = appendVarlong(dst, int64(len(h.Key)))
			dst = append(dst, h.Key...)
			dst = appendBytes(dst, h.Value)
		}
	}
	return dst
}

// compress appends e.scratch compressed with c to dst.
func (e *Encoder) compress(dst []byte, c Compression) ([]byte, error) {
	switch c {
	case Gzip:
		if e.gz == nil {
			e.gz = gzip.NewWriter(nil)
		}
		e.out.b = dst
		e.gz.Reset(&e.out)
		if _, err := e.gz.Write(e.scratch); err != nil {
			return dst, err
		}
		err := e.gz.Close()
		dst, e.out.b = e.out.b, nil
		return dst, err
	case Snappy:
		// Framed like the Java producer and broker write it: every client
		// reads this, while a raw block trips up some older ones.
		dst = append(dst, xerialHeader...)
		for src := e.scratch; len(src) > 0; {
			n := min(len(src), xerialBlockSize)
			at := len(dst)
			dst = slices.Grow(dst, 4+s2.MaxEncodedLen(n))
			block := s2.EncodeSnappy(dst[at+4:cap(dst)], src[:n])
			dst = binary.BigEndian.AppendUint32(dst, uint32(len(block)))
			dst = dst[:at+4+len(block)]
			src = src[n:]
		}
		return dst, nil
	case LZ4:
		if e.lz == nil {
			e.lz = lz4.NewWriter(nil)
			// 64 KiB blocks and no content checksum, as the Java
			// producer writes: its reader allocates a buffer of the
			// frame's block size, and the batch CRC already covers the
			// bytes.
			if err := e.lz.Apply(lz4.BlockSizeOption(lz4.Block64Kb), lz4.ChecksumOption(false), lz4.ConcurrencyOption(1)); err != nil {
				e.lz = nil
				return dst, fmt.Errorf("configuring lz4: %w", err)
			}
		}
		e.out.b = dst
		e.lz.Reset(&e.out)
		if _, err := e.lz.Write(e.scratch); err != nil {
			return dst, err
		}
		err := e.lz.Close()
		dst, e.out.b = e.out.b, nil
		return dst, err
	case Zstd:
		if e.zstd == nil {
			zw, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
			if err != nil {
				return dst, fmt.Errorf("creating zstd encoder: %w", err)
			}
			e.zstd = zw
		}
		return e.zstd.EncodeAll(e.scratch, dst), nil
	}
	return dst, fmt.Errorf("compression codec %d: %w", c, ErrUnsupported)
}

// appender is an io.Writer appending to b, for the streaming codecs to
// write straight into the batch.
type appender struct{ b []byte }

func (a *appender) Write(p []byte) (int, error) {
	a.b = append(a.b, p...)
	return len(p), nil
}
