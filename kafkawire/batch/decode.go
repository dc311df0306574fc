package batch

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"slices"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	"github.com/korvet/korvet/engine/record"
)

// Decoder decodes the records field of a produce request partition: one or
// more concatenated v2 batches.
//
// It is reusable and keeps its buffers across calls, so the records returned
// by one call are valid only until the next call on the same Decoder. Keys,
// values and headers point into the input (uncompressed batches) or into the
// Decoder's decompression buffer; they are capped at their length, so
// appending to one copies rather than overwriting its neighbour.
//
// A Decoder is not safe for concurrent use. The zero value is ready to use.
type Decoder struct {
	// MaxDecompressed bounds the total decompressed bytes of one Decode
	// call, against decompression bombs; beyond it Decode returns
	// ErrTooLarge. 0 means DefaultMaxDecompressed.
	MaxDecompressed int

	recs []record.Record // the records of every batch of the current call
	hdrs []record.Header // the headers of every record of the current call
	buf  []byte          // the decompressed records of every batch of the current call
	// filled is how much of buf a call that failed for its bound had
	// used: such a buffer is kept for the next call like a full one, so
	// that a client sending bomb after bomb makes korvet reuse one
	// buffer rather than allocate the bound anew each time.
	filled int

	src  bytes.Reader // feeds the streaming codecs
	gz   gzip.Reader
	lz   *lz4.Reader
	zstd *zstd.Decoder // expensive to create, so created once, on first use
	// zstdStream decodes zstd that may inflate past the bound (see
	// unzstd); also created on first use.
	zstdStream *zstd.Decoder
}

// Decode decodes the batches in b and appends them to dst. An empty b is no
// batches and no error; whether a produce request may carry that, or more
// than one batch, is the caller's policy.
//
// On error, dst is returned as it was given. The error wraps ErrCorrupt,
// ErrUnsupported or ErrTooLarge.
func (d *Decoder) Decode(b []byte, dst []Batch) ([]Batch, error) {
	d.recs, d.hdrs = reuse(d.recs, 1<<14), reuse(d.hdrs, 1<<15)
	d.buf = reuse(d.buf[:max(len(d.buf), d.filled)], 1<<20)
	d.filled = 0
	limit := d.MaxDecompressed
	if limit <= 0 {
		limit = DefaultMaxDecompressed
	}
	given := len(dst)
	for off := 0; off < len(b); {
		dst = append(dst, Batch{})
		n, err := d.decodeBatch(b[off:], &dst[len(dst)-1], limit)
		if err != nil {
			clear(dst[given:]) // drop references into b and our buffers
			return dst[:given], fmt.Errorf("record batch %d at byte %d: %w", len(dst)-1-given, off, err)
		}
		off += n
	}
	return dst, nil
}

// Decompressed is how many bytes the last Decode call decompressed into
// the Decoder's buffer: what the compressed batches it returned take in
// memory beyond their input.
func (d *Decoder) Decompressed() int { return len(d.buf) }

// decodeBatch decodes the batch at the start of b into bt and returns its
// size.
func (d *Decoder) decodeBatch(b []byte, bt *Batch, limit int) (int, error) {
	if len(b) <= offMagic {
		return 0, fmt.Errorf("%w: truncated batch header (%d bytes)", ErrCorrupt, len(b))
	}
	// The magic sits at the same place in the v0/v1 message format, so a
	// legacy message set is told apart before anything else is read.
	switch magic := int8(b[offMagic]); magic {
	case magicV2:
	case 0, 1:
		return 0, fmt.Errorf("%w: magic %d message set", ErrUnsupported, magic)
	default:
		return 0, fmt.Errorf("%w: magic %d", ErrCorrupt, magic)
	}
	if len(b) < BatchHeaderSize {
		return 0, fmt.Errorf("%w: truncated batch header (%d bytes)", ErrCorrupt, len(b))
	}
	length := int32(binary.BigEndian.Uint32(b[offLength:]))
	if length < minBatchLength {
		return 0, fmt.Errorf("%w: batch length %d", ErrCorrupt, length)
	}
	if int64(length) > int64(len(b)-offLeaderEp) {
		return 0, fmt.Errorf("%w: batch length %d overruns the %d bytes left", ErrCorrupt, length, len(b)-offLeaderEp)
	}
	end := offLeaderEp + int(length)
	if want, got := binary.BigEndian.Uint32(b[offCRC:]), crc32.Checksum(b[offAttributes:end], castagnoli); want != got {
		return 0, fmt.Errorf("%w: crc %#08x, computed %#08x", ErrCorrupt, want, got)
	}
	*bt = Batch{
		BaseOffset:           int64(binary.BigEndian.Uint64(b)),
		PartitionLeaderEpoch: int32(binary.BigEndian.Uint32(b[offLeaderEp:])),
		Attributes:           int16(binary.BigEndian.Uint16(b[offAttributes:])),
		LastOffsetDelta:      int32(binary.BigEndian.Uint32(b[offLastDelta:])),
		FirstTimestamp:       int64(binary.BigEndian.Uint64(b[offFirstTS:])),
		MaxTimestamp:         int64(binary.BigEndian.Uint64(b[offMaxTS:])),
		ProducerID:           int64(binary.BigEndian.Uint64(b[offProducerID:])),
		ProducerEpoch:        int16(binary.BigEndian.Uint16(b[offProdEpoch:])),
		BaseSequence:         int32(binary.BigEndian.Uint32(b[offBaseSeq:])),
		NumRecords:           int32(binary.BigEndian.Uint32(b[offNumRecords:])),
	}
	if bt.NumRecords < 0 {
		return 0, fmt.Errorf("%w: record count %d", ErrCorrupt, bt.NumRecords)
	}
	data := b[BatchHeaderSize:end]
	if c := bt.Compression(); c != None {
		var err error
		if data, err = d.decompress(c, data, limit); err != nil {
			return 0, err
		}
	}
	if err := d.decodeRecords(data, bt); err != nil {
		return 0, err
	}
	return end, nil
}

// decodeRecords decodes the bt.NumRecords records that must exactly fill
// data.
func (d *Decoder) decodeRecords(data []byte, bt *Batch) error {
	n := int(bt.NumRecords)
	if n > len(data)/minRecordSize {
		return fmt.Errorf("%w: %d records cannot fit in %d bytes", ErrCorrupt, n, len(data))
	}
	if n == 0 {
		if len(data) != 0 {
			return fmt.Errorf("%w: %d bytes in a batch of no records", ErrCorrupt, len(data))
		}
		return nil
	}
	start := len(d.recs)
	d.recs = slices.Grow(d.recs, n)
	pos := 0
	for i := range n {
		next, err := d.decodeRecord(data, pos, bt)
		if err != nil {
			return fmt.Errorf("record %d at byte %d: %w", i, pos, err)
		}
		pos = next
	}
	if pos != len(data) {
		return fmt.Errorf("%w: %d bytes after the last of %d records", ErrCorrupt, len(data)-pos, n)
	}
	end := len(d.recs)
	bt.Records = d.recs[start:end:end]
	return nil
}

// decodeRecord appends the record at data[pos:] to d.recs and returns the
// position after it.
func (d *Decoder) decodeRecord(data []byte, pos int, bt *Batch) (int, error) {
	l, at, ok := readVarint(data, pos)
	if !ok {
		return 0, fmt.Errorf("%w: bad record length", ErrCorrupt)
	}
	if l < 0 || int(l) > len(data)-at {
		return 0, fmt.Errorf("%w: record length %d overruns the %d bytes left", ErrCorrupt, l, len(data)-at)
	}
	// Everything below reads from r alone, so no field can reach past the
	// record's own length.
	r := data[at : at+int(l)]
	if len(r) == 0 {
		return 0, fmt.Errorf("%w: empty record", ErrCorrupt)
	}
	i := 1 // record attributes: unused, and ignored as Kafka does
	tsDelta, i, ok := readVarlong(r, i)
	if !ok {
		return 0, fmt.Errorf("%w: bad timestamp delta", ErrCorrupt)
	}
	offDelta, i, ok := readVarint(r, i)
	if !ok {
		return 0, fmt.Errorf("%w: bad offset delta", ErrCorrupt)
	}
	key, i, ok := readBytes(r, i)
	if !ok {
		return 0, fmt.Errorf("%w: bad key length", ErrCorrupt)
	}
	value, i, ok := readBytes(r, i)
	if !ok {
		return 0, fmt.Errorf("%w: bad value length", ErrCorrupt)
	}
	nh, i, ok := readVarint(r, i)
	if !ok || nh < 0 || int(nh) > (len(r)-i)/minHeaderSize {
		return 0, fmt.Errorf("%w: header count %d in %d bytes", ErrCorrupt, nh, len(r)-i)
	}
	h0 := len(d.hdrs)
	for h := range int(nh) {
		var hk, hv []byte
		hk, i, ok = readBytes(r, i)
		if !ok || hk == nil { // Kafka header keys are never null
			return 0, fmt.Errorf("%w: header %d: bad key length", ErrCorrupt, h)
		}
		if hv, i, ok = readBytes(r, i); !ok {
			return 0, fmt.Errorf("%w: header %d: bad value length", ErrCorrupt, h)
		}
		d.hdrs = append(d.hdrs, record.Header{Key: hk, Value: hv})
	}
	if i != len(r) {
		return 0, fmt.Errorf("%w: %d bytes after the record's fields", ErrCorrupt, len(r)-i)
	}
	rec := record.Record{
		Offset:    bt.BaseOffset + int64(offDelta),
		Timestamp: bt.FirstTimestamp + tsDelta,
		Key:       key,
		Value:     value,
	}
	if h1 := len(d.hdrs); h1 > h0 {
		// If d.hdrs grew since, earlier records keep the old array, which
		// is never written again, so every sub-slice stays right.
		rec.Headers = d.hdrs[h0:h1:h1]
	}
	d.recs = append(d.recs, rec)
	return at + int(l), nil
}

// readBytes reads a nullable length-prefixed byte string at r[i:]: length -1
// is nil, 0 a non-nil empty slice (r is non-nil, so r[i:i:i] is too).
func readBytes(r []byte, i int) (b []byte, next int, ok bool) {
	l, j, ok := readVarint(r, i)
	switch {
	case !ok || l < -1 || int(l) > len(r)-j:
		return nil, i, false
	case l == -1:
		return nil, j, true
	}
	end := j + int(l)
	return r[j:end:end], end, true
}

// reuse empties a buffer for the next call, dropping it instead when it
// holds more than big elements of which the last call used under a
// quarter: one outsized request should not pin its memory for the
// Decoder's lifetime, while steady traffic keeps reusing its buffers.
func reuse[T any](s []T, big int) []T {
	if cap(s) > big && len(s) < cap(s)/4 {
		return nil
	}
	return s[:0]
}
