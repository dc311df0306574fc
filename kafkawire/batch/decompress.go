package batch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// xerialMagic starts snappy data framed the way the Java client's
// snappy-java SnappyOutputStream writes it: the magic, a version and a
// minimum compatible version (4 bytes each), then blocks of a big endian
// length and a raw snappy block. Other clients send one raw snappy block.
const (
	xerialMagic      = "\x82SNAPPY\x00"
	xerialHeaderSize = 16
	xerialBlockSize  = 32 << 10 // what snappy-java writes
)

// xerialHeader is the magic, version 1 and minimum compatible version 1.
const xerialHeader = xerialMagic + "\x00\x00\x00\x01\x00\x00\x00\x01"

// decompress appends the decompressed src to d.buf, keeping the total for
// this call within limit, and returns it.
func (d *Decoder) decompress(c Compression, src []byte, limit int) ([]byte, error) {
	if len(src) == 0 {
		// Every codec writes at least a header, even for no data.
		return nil, fmt.Errorf("%w: empty %s payload", ErrCorrupt, c)
	}
	start := len(d.buf)
	room := limit - start
	var err error
	switch c {
	case Gzip:
		err = d.gunzip(src, room)
	case Snappy:
		if len(src) >= xerialHeaderSize && string(src[:len(xerialMagic)]) == xerialMagic {
			err = d.unxerial(src[xerialHeaderSize:], room)
		} else {
			err = d.unsnappy(src, room)
		}
	case LZ4:
		err = d.unlz4(src, room)
	case Zstd:
		err = d.unzstd(src, room)
	default:
		return nil, fmt.Errorf("%w: compression codec %d", ErrUnsupported, c)
	}
	if err != nil {
		if errors.Is(err, ErrTooLarge) {
			d.filled = cap(d.buf)
		}
		d.buf = d.buf[:start]
		return nil, fmt.Errorf("%s: %w", c, err)
	}
	end := len(d.buf)
	return d.buf[start:end:end], nil
}

func corrupt(err error) error { return fmt.Errorf("%w: %w", ErrCorrupt, err) }

func tooLarge(room int) error {
	return fmt.Errorf("%w: more than %d bytes", ErrTooLarge, room)
}

func (d *Decoder) gunzip(src []byte, room int) error {
	return d.inflate(src, room, func() (io.Reader, error) {
		d.src.Reset(src)
		if err := d.gz.Reset(&d.src); err != nil {
			return nil, corrupt(err)
		}
		return &d.gz, nil
	})
}

func (d *Decoder) unlz4(src []byte, room int) error {
	if d.lz == nil {
		d.lz = lz4.NewReader(nil)
	}
	return d.inflate(src, room, func() (io.Reader, error) {
		d.src.Reset(src)
		d.lz.Reset(&d.src)
		return d.lz, nil
	})
}

// eagerRatio is how many times its compressed size a payload may inflate
// to straight into the buffer; typical data compresses far less.
const eagerRatio = 32

// inflate appends what a streaming codec (open resets it over src) makes
// of src to d.buf, within room. Up to eagerRatio times the input (and at
// least 1 MiB) goes straight into the buffer. Output beyond that is only
// counted, keeping nothing, up to room; if it fits, src is decoded again
// into a buffer of exactly its size. So a decompression bomb costs about
// what the client sent, not room, and normal data is decoded once.
func (d *Decoder) inflate(src []byte, room int, open func() (io.Reader, error)) error {
	r, err := open()
	if err != nil {
		return err
	}
	eager := min(room, max(1<<20, eagerRatio*len(src)))
	start := len(d.buf)
	err = d.readAll(r, eager)
	if eager == room || !errors.Is(err, ErrTooLarge) {
		return err
	}
	// readAll stopped one byte past eager; count the rest, up to room.
	got := eager + 1
	n, err := io.CopyN(io.Discard, r, int64(room-got)+1)
	switch {
	case got+int(n) > room:
		d.filled = max(d.filled, cap(d.buf))
		d.buf = d.buf[:start]
		return tooLarge(room)
	case err != io.EOF:
		d.buf = d.buf[:start]
		return corrupt(err)
	}
	total := got + int(n)
	d.buf = slices.Grow(d.buf[:start], total+1) // +1: EOF is read without growing
	if r, err = open(); err != nil {
		return err
	}
	return d.readAll(r, total)
}

// readAll appends everything r produces to d.buf, failing once it passes
// room bytes.
func (d *Decoder) readAll(r io.Reader, room int) error {
	start := len(d.buf)
	for {
		if len(d.buf) == cap(d.buf) {
			// Double, but never past room and the one byte that tells
			// the output does not fit.
			d.buf = slices.Grow(d.buf, min(max(cap(d.buf), 16<<10), start+room+1-len(d.buf)))
		}
		// Ask for at most one byte past room: enough to tell the output
		// does not fit without inflating any more of it.
		end := cap(d.buf)
		if room < end-start {
			end = start + room + 1
		}
		n, err := r.Read(d.buf[len(d.buf):end])
		d.buf = d.buf[:len(d.buf)+n]
		if len(d.buf)-start > room {
			return tooLarge(room)
		}
		switch err {
		case nil:
		case io.EOF:
			return nil
		default:
			return corrupt(err)
		}
	}
}

// snappyMaxRatio bounds what a snappy byte decodes to: the densest element
// is a copy of 64 bytes in a 3 byte tag.
const snappyMaxRatio = 22

// unsnappy decodes one raw snappy block.
func (d *Decoder) unsnappy(src []byte, room int) error {
	// The block starts with its decoded length: check it before sizing
	// the output by it.
	l, err := s2.DecodedLen(src)
	if err != nil {
		return corrupt(err)
	}
	if l > room {
		return tooLarge(room)
	}
	if l/snappyMaxRatio > len(src) {
		// Beyond what snappy can encode in src: a false claim, which is
		// not to size a buffer by.
		return fmt.Errorf("%w: snappy block of %d bytes claims %d", ErrCorrupt, len(src), l)
	}
	n := len(d.buf)
	d.buf = slices.Grow(d.buf, l)
	if _, err := s2.Decode(d.buf[n:n+l], src); err != nil {
		return corrupt(err)
	}
	d.buf = d.buf[:n+l]
	return nil
}

// unxerial decodes the blocks of xerial framed snappy, src being what
// follows the header.
func (d *Decoder) unxerial(src []byte, room int) error {
	// Walk the framing first, summing the blocks' stated decoded lengths:
	// that bounds the total before anything is decoded, and the buffer
	// grows once rather than block by block.
	total := 0
	for rest := src; len(rest) > 0; {
		block, next, err := xerialBlock(rest)
		if err != nil {
			return err
		}
		l, err := s2.DecodedLen(block)
		if err != nil {
			return corrupt(err)
		}
		if l > room-total {
			return tooLarge(room)
		}
		total += l
		rest = next
	}
	d.buf = slices.Grow(d.buf, total)
	for len(src) > 0 {
		block, next, _ := xerialBlock(src)
		if err := d.unsnappy(block, room); err != nil {
			return err
		}
		src = next
	}
	return nil
}

// xerialBlock splits the first block off xerial framed blocks.
func xerialBlock(src []byte) (block, rest []byte, err error) {
	if len(src) < 4 {
		return nil, nil, fmt.Errorf("%w: truncated xerial block length", ErrCorrupt)
	}
	l := binary.BigEndian.Uint32(src)
	src = src[4:]
	if uint64(l) > uint64(len(src)) {
		return nil, nil, fmt.Errorf("%w: xerial block length %d overruns the %d bytes left", ErrCorrupt, l, len(src))
	}
	return src[:l], src[l:], nil
}

// zstdBlockMax is the most a zstd block may decode to.
const zstdBlockMax = 128 << 10

func (d *Decoder) unzstd(src []byte, room int) error {
	if d.zstd == nil {
		// DecodeAll with the cap limit decodes into the spare capacity it
		// is given and fails past it: the output never outgrows what we
		// size, and the frame's declared window size, which only a
		// streaming decoder allocates, does not matter.
		zd, err := zstd.NewReader(nil,
			zstd.WithDecoderConcurrency(1),
			zstd.WithDecoderLowmem(true),
			zstd.WithDecodeAllCapLimit(true),
		)
		if err != nil {
			return fmt.Errorf("creating zstd decoder: %w", err)
		}
		d.zstd = zd
	}
	most, err := zstdSize(src, room)
	if err != nil {
		return err
	}
	// Past room, the output is cut at room and a failure is most likely
	// the cut, which the decoder reports as a generic error.
	capped := most > uint64(room)
	if capped {
		// The input could inflate past room (a decompression bomb looks
		// like this). DecodeAll would find out only by outgrowing its
		// buffer, which it does by allocating a larger one; the
		// streaming decoder writes into our buffer and stops at room.
		start := len(d.buf)
		err := d.unzstdStream(src, room)
		if !errors.Is(err, zstd.ErrWindowSizeExceeded) {
			return err
		}
		// A window too large to stream within zstdStreamMaxWindow
		// (ultra compression levels): DecodeAll, which needs none.
		d.buf = d.buf[:start]
	}
	want := int(min(most, uint64(room)))
	start := len(d.buf)
	d.buf = slices.Grow(d.buf, want)
	out, err := d.zstd.DecodeAll(src, d.buf[start:start:start+want])
	switch {
	case err == nil:
		d.buf = d.buf[:start+len(out)]
		if len(out) > 0 && &out[0] != &d.buf[start] {
			copy(d.buf[start:], out) // the cap limit makes this impossible; cheap to be sure
		}
		return nil
	case capped && (errors.Is(err, zstd.ErrDecoderSizeExceeded) || want-len(out) <= zstdBlockMax+64):
		return tooLarge(room)
	default:
		// Uncapped, the buffer holds whatever the frames can decode to,
		// so every failure is the data's.
		return corrupt(err)
	}
}

// zstdStreamMaxWindow bounds the window of a frame decoded as a stream:
// the streaming decoder keeps a window of history, allocated once and
// reused. zstd levels up to 19 use at most 8 MiB.
const zstdStreamMaxWindow = 8 << 20

// unzstdStream decodes src, which may inflate past room. It inflates it
// first through the streaming decoder keeping nothing, only counting, and
// stops one byte past room: a bomb costs the decoder's window and some
// CPU, not a buffer of room bytes. Output that fits is then decoded into
// a buffer of exactly its size, which DecodeAll fills without growing.
func (d *Decoder) unzstdStream(src []byte, room int) error {
	if d.zstdStream == nil {
		// Concurrency 1 decodes synchronously, in Read: no goroutines.
		zd, err := zstd.NewReader(nil,
			zstd.WithDecoderConcurrency(1),
			zstd.WithDecoderLowmem(true),
			zstd.WithDecoderMaxWindow(zstdStreamMaxWindow),
		)
		if err != nil {
			return fmt.Errorf("creating zstd decoder: %w", err)
		}
		d.zstdStream = zd
	}
	d.src.Reset(src)
	if err := d.zstdStream.Reset(&d.src); err != nil {
		return corrupt(err)
	}
	n, err := io.CopyN(io.Discard, d.zstdStream, int64(room)+1)
	_ = d.zstdStream.Reset(nil) // let go of src
	switch {
	case n > int64(room):
		return tooLarge(room)
	case err != io.EOF:
		return corrupt(err)
	}
	start := len(d.buf)
	d.buf = slices.Grow(d.buf, int(n))
	out, err := d.zstd.DecodeAll(src, d.buf[start:start:start+int(n)])
	if err != nil || len(out) != int(n) {
		return fmt.Errorf("%w: zstd decoded to %d bytes, then %d: %v", ErrCorrupt, n, len(out), err)
	}
	d.buf = d.buf[:start+len(out)]
	return nil
}

// zstdSize walks the frame and block headers of src, decoding nothing, and
// returns the most src can decode to: a frame's content size when it
// states one, else its raw and RLE blocks' sizes plus zstdBlockMax per
// compressed block. That sizes the output buffer from the input rather
// than from a guess or from room. What raw and RLE blocks decode to is
// certain, so past room it is ErrTooLarge before any decoding.
func zstdSize(src []byte, room int) (uint64, error) {
	var most, least uint64
	var h zstd.Header
	for len(src) > 0 {
		rest, err := h.DecodeAndStrip(src)
		if err != nil {
			return 0, corrupt(err)
		}
		if h.Skippable {
			if uint64(h.SkippableSize) > uint64(len(rest)) {
				return 0, fmt.Errorf("%w: truncated skippable zstd frame", ErrCorrupt)
			}
			src = rest[h.SkippableSize:]
			continue
		}
		var frameMost, frameLeast uint64
		for last := false; !last; {
			if len(rest) < 3 {
				return 0, fmt.Errorf("%w: truncated zstd block header", ErrCorrupt)
			}
			bh := uint32(rest[0]) | uint32(rest[1])<<8 | uint32(rest[2])<<16
			rest = rest[3:]
			last = bh&1 != 0
			size := int(bh >> 3)
			var in int
			switch bh >> 1 & 3 {
			case 0: // raw
				in, frameMost, frameLeast = size, frameMost+uint64(size), frameLeast+uint64(size)
			case 1: // RLE: one byte, repeated size times
				in, frameMost, frameLeast = 1, frameMost+uint64(size), frameLeast+uint64(size)
			case 2:
				in, frameMost = size, frameMost+zstdBlockMax
			default:
				return 0, fmt.Errorf("%w: reserved zstd block type", ErrCorrupt)
			}
			if in > len(rest) {
				return 0, fmt.Errorf("%w: truncated zstd block", ErrCorrupt)
			}
			rest = rest[in:]
		}
		if h.HasCheckSum {
			if len(rest) < 4 {
				return 0, fmt.Errorf("%w: truncated zstd checksum", ErrCorrupt)
			}
			rest = rest[4:]
		}
		if h.HasFCS {
			// A frame decoding to other than its content size fails to
			// decode, so the content size is the size.
			frameMost, frameLeast = h.FrameContentSize, h.FrameContentSize
		}
		// Both stay small until past room, where we stop: no overflow.
		if least += frameLeast; frameLeast > uint64(room) || least > uint64(room) {
			return 0, tooLarge(room)
		}
		most += min(frameMost, uint64(room)+1)
		src = rest
	}
	return most, nil
}
