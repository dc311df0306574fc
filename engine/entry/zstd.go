package entry

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/klauspost/compress/zstd"

	"github.com/korvet/korvet/engine/zstdict"
)

// prefixZstd names the compressed value field: "__zstd.<version>", the
// version of the topic's dictionary the frame was written with (0: none).
const prefixZstd = "__zstd."

// MaxDecompressed bounds the content size a compressed value may declare
// when the Decoder has no smaller MaxValue: a frame claiming more is
// refused before anything is allocated for it.
const MaxDecompressed = 64 << 20

// ErrNoDictionary means an entry names a dictionary version its topic's
// Dicts cannot provide.
var ErrNoDictionary = errors.New("zstd dictionary not found")

// Dicts gives the Decoder the zstd decoder of a dictionary version of the
// topic whose entries it reads (version 0: no dictionary). The decoders
// it returns must be safe for concurrent DecodeAll and never change for a
// version.
type Dicts interface {
	ZstdDecoder(version uint32) (*zstd.Decoder, error)
}

// IsValueField reports whether a field name holds (part of) an entry's
// value, for readers that walk fields themselves and only need to tell a
// tombstone from a record with a value.
func IsValueField(name []byte) bool {
	if len(name) < 2 || name[0] != '_' || name[1] != '_' {
		return true // a flattened member
	}
	return string(name) == fieldValue || hasPrefix(name, prefixZstd)
}

// Compressor compresses the values of one topic with one dictionary
// version. It is safe for concurrent use; apart from the Observe counters
// it is immutable.
type Compressor struct {
	version uint32
	field   string // "__zstd.<version>"
	enc     *zstd.Encoder
	// fast compresses the values up to zstdict.MaxValue when there is a
	// dictionary: it reuses the dictionary's tables where enc rebuilds
	// them for every value (2.9 µs a 700-byte JSON value, not 11.8).
	fast *zstdict.Dict
	// in and out count value bytes offered and bytes stored for them
	// since the last Observed, for the owner's ratio sampling.
	in, out atomic.Int64
	// misses counts the values in a row that came out no smaller, probes
	// the values passed over since (see Compress).
	misses, probes atomic.Int64
}

// A topic whose values do not compress (media, encrypted or random
// bytes, values compressed by the producer's application) would pay a
// zstd attempt per value for nothing: after futileRun values in a row
// came out no smaller, only one value in futileProbe is tried, until one
// compresses again. Measured on 256-byte random values: the attempt cost
// more than the rest of the append (bench-memory.sh, workload (c)).
const futileRun, futileProbe = 64, 64

// NewCompressor returns a Compressor for dictionary version (0 with dict
// nil: no dictionary). dict is a zstd dictionary whose ID is version.
func NewCompressor(version uint32, dict []byte, level zstd.EncoderLevel) (*Compressor, error) {
	if (version == 0) != (dict == nil) {
		return nil, fmt.Errorf("zstd compressor: version %d with %d dictionary bytes", version, len(dict))
	}
	opts := []zstd.EOption{
		zstd.WithEncoderLevel(level),
		zstd.WithEncoderCRC(false), // Redis's own persistence checksums
		zstd.WithZeroFrames(true),
		zstd.WithLowerEncoderMem(true),
		zstd.WithSingleSegment(true), // always write the content size: reads are bounded by it
	}
	if dict != nil {
		opts = append(opts, zstd.WithEncoderDict(dict))
	}
	enc, err := zstd.NewWriter(nil, opts...)
	if err != nil {
		return nil, fmt.Errorf("zstd compressor, dictionary version %d: %w", version, err)
	}
	c := &Compressor{version: version, field: prefixZstd + strconv.FormatUint(uint64(version), 10), enc: enc}
	if dict != nil {
		// Dictionaries trained before their tables were tuned for the
		// fast encoder (zstdict.Tune) stay with enc, which fits tables
		// per frame; both write the same format.
		if d, err := zstdict.New(dict); err == nil && d.Complete() {
			c.fast = d
		}
	}
	return c, nil
}

// Observe adds in value bytes that were stored as out bytes (compressed,
// or whole when that was not smaller) to c's counters.
func (c *Compressor) Observe(in, out int) {
	c.in.Add(int64(in))
	c.out.Add(int64(out))
}

// Observed returns and resets the counters of Observe. The two resets are
// not one atomic step: a concurrent Observe may land half in this window
// and half in the next, which a ratio over many values does not notice.
func (c *Compressor) Observed() (in, out int64) {
	return c.in.Swap(0), c.out.Swap(0)
}

// Pending returns the value bytes Observe counted since the last Observed.
func (c *Compressor) Pending() int64 { return c.in.Load() }

// Tuned reports whether c's dictionary has tables tuned for the fast
// encoder (zstdict.Tune), which c then uses for values up to
// zstdict.MaxValue.
func (c *Compressor) Tuned() bool { return c.fast != nil }

// Version is the dictionary version c compresses with.
func (c *Compressor) Version() uint32 { return c.version }

// NewDictDecoder returns a zstd decoder for dictionary version (0 with
// dict nil: no dictionary), for a Dicts implementation.
func NewDictDecoder(version uint32, dict []byte) (*zstd.Decoder, error) {
	opts := []zstd.DOption{
		zstd.WithDecoderConcurrency(0),
		zstd.WithDecoderMaxMemory(MaxDecompressed),
		zstd.WithDecodeAllCapLimit(true),
		zstd.WithDecoderLowmem(true),
	}
	if dict != nil {
		opts = append(opts, zstd.WithDecoderDicts(dict))
	}
	d, err := zstd.NewReader(nil, opts...)
	if err != nil {
		return nil, fmt.Errorf("zstd decoder, dictionary version %d: %w", version, err)
	}
	return d, nil
}

// DictCache is a Dicts that loads each version once with load and keeps
// its decoder. Safe for concurrent use.
type DictCache struct {
	load func(version uint32) ([]byte, error)
	mu   sync.Mutex
	decs map[uint32]*zstd.Decoder
}

// NewDictCache returns a DictCache; load returns the dictionary bytes of
// a version (never called for 0), or an error wrapping ErrNoDictionary
// when there is none.
func NewDictCache(load func(version uint32) ([]byte, error)) *DictCache {
	return &DictCache{load: load, decs: map[uint32]*zstd.Decoder{}}
}

// ZstdDecoder implements Dicts.
func (c *DictCache) ZstdDecoder(version uint32) (*zstd.Decoder, error) {
	c.mu.Lock()
	d := c.decs[version]
	c.mu.Unlock()
	if d != nil {
		return d, nil
	}
	var dict []byte
	if version != 0 {
		var err error
		if dict, err = c.load(version); err != nil {
			return nil, err
		}
	}
	d, err := NewDictDecoder(version, dict)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.decs[version]; old != nil {
		d.Close() // loaded meanwhile by another reader
		return old, nil
	}
	c.decs[version] = d
	return d, nil
}

// Close releases the cached decoders.
func (c *DictCache) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for v, d := range c.decs {
		d.Close()
		delete(c.decs, v)
	}
}

// Compress appends value compressed by c to dst and reports whether that
// is smaller than value: only then does the Encoder store it compressed.
// While the topic's values keep coming out no smaller, most are not tried
// (futileRun): then it reports false at once.
func (c *Compressor) Compress(dst, value []byte) ([]byte, bool) {
	if c.misses.Load() >= futileRun && c.probes.Add(1)%futileProbe != 0 {
		return dst, false
	}
	n := len(dst)
	ok := false
	if c.fast != nil {
		dst, ok = c.fast.Encode(dst, value)
	}
	if !ok {
		dst = c.enc.EncodeAll(value, dst)
	}
	if len(dst)-n < len(value) {
		if c.misses.Load() != 0 {
			c.misses.Store(0)
		}
		return dst, true
	}
	c.misses.Add(1)
	return dst, false
}

// UseFrame hands the Encoder the next record's value already compressed
// by c (Compress; frame nil when that was not smaller), so that Prepare
// need not compress it: appends compress on their producers' goroutines,
// off the serial flush loop. Used only when Zstd is set, and for the next
// Prepare only.
func (e *Encoder) UseFrame(c *Compressor, frame []byte) {
	e.pre, e.preFrame = c, frame
}

// compress sets e.out to the value compressed, by UseFrame's frame or
// e.Zstd, and reports whether the value goes compressed.
func (e *Encoder) compress(value []byte) bool {
	if e.pre != nil {
		e.out, e.zfield = e.preFrame, e.pre.field
		return e.preFrame != nil
	}
	if len(value) < e.ZstdMin {
		return false
	}
	var ok bool
	e.zbuf, ok = e.Zstd.Compress(e.zbuf[:0], value)
	e.out, e.zfield = e.zbuf, e.Zstd.field
	return ok
}

// zstdField decodes a "__zstd.<version>" field onto the value arena.
func (d *Decoder) zstdField(name, frame []byte) {
	if d.hasValue || d.members > 0 {
		d.err = fmt.Errorf("%w: field %q next to another value field", ErrMalformed, name)
		return
	}
	v, ok := parseInt(name[len(prefixZstd):])
	if !ok || v < 0 || v > 1<<32-1 || (len(name) > len(prefixZstd)+1 && name[len(prefixZstd)] == '0') {
		d.err = fmt.Errorf("%w: field %q: bad dictionary version", ErrMalformed, name)
		return
	}
	version := uint32(v)
	var h zstd.Header
	if err := h.Decode(frame); err != nil {
		d.err = fmt.Errorf("%w: field %q: %v", ErrMalformed, name, err)
		return
	}
	limit := uint64(MaxDecompressed)
	if d.MaxValue > 0 && uint64(d.MaxValue) < limit {
		limit = uint64(d.MaxValue)
	}
	switch {
	case h.Skippable || !h.HasFCS:
		d.err = fmt.Errorf("%w: field %q: frame without a content size", ErrMalformed, name)
		return
	case h.FrameContentSize > limit:
		d.err = fmt.Errorf("%w: field %q: content size %d over the limit of %d", ErrMalformed, name, h.FrameContentSize, limit)
		return
	case h.DictionaryID != version:
		d.err = fmt.Errorf("%w: field %q: frame of dictionary %d", ErrMalformed, name, h.DictionaryID)
		return
	}
	if d.Dicts == nil {
		d.err = fmt.Errorf("%w: field %q: version %d, and the reader has no dictionaries", ErrNoDictionary, name, version)
		return
	}
	dec, err := d.Dicts.ZstdDecoder(version)
	if err != nil {
		d.err = fmt.Errorf("field %q: %w", name, err)
		return
	}
	start := len(d.values)
	n := int(h.FrameContentSize)
	d.values = slices.Grow(d.values, n)
	// The capacity limit makes DecodeAll stop at the declared size: a
	// frame that decodes to more is refused, not buffered.
	out, err := dec.DecodeAll(frame, d.values[:start:start+n])
	if err != nil || len(out) != start+n {
		if err == nil {
			err = fmt.Errorf("%d bytes, the frame declares %d", len(out)-start, n)
		}
		d.err = fmt.Errorf("%w: field %q: %v", ErrMalformed, name, err)
		return
	}
	switch {
	case n == 0:
	case &out[start] == &d.values[:start+n][start]:
		d.values = d.values[:start+n]
	default: // DecodeAll moved the bytes: keep them in the arena
		d.values = append(d.values[:start], out[start:]...)
	}
	d.value, d.hasValue = d.values[start:start+n:start+n], true
	if d.value == nil {
		d.value = []byte{}
	}
}
