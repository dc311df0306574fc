package zstdict

import (
	"encoding/binary"
	"math/bits"
	"slices"

	"github.com/klauspost/compress/huff0"
)

// MaxValue is the largest value Encode takes: one block's worth. Larger
// values amortize a general encoder's per-frame costs anyway.
const MaxValue = 128 << 10

const (
	frameMagic = 0xFD2FB528
	minMatch   = 4
	// skipLog: in a stretch without matches the search steps further
	// apart, one more byte per 1<<skipLog bytes searched.
	skipLog = 6
	// hashPrime spreads the low six bytes of a word over a table index.
	hashPrime = 0x9E3779B185EBCA87
)

// sequence is one literal run and the match after it, with its codes.
type sequence struct {
	lit, match, off uint32 // literal length, match length, offset value (1: repeat, offset+3)
	llc, mlc, ofc   uint8
}

// encoder is the per-call state Encode reuses from the Dict's pool.
type encoder struct {
	huff  *huff0.Scratch // the dictionary's literals table
	table []uint32       // the value's own match table: position+1
	seqs  []sequence
	lits  []byte
}

// Encode appends to dst src as one zstd frame that needs d to decode, and
// reports false (dst as it was) for a value over MaxValue. A frame is
// always valid; when compressing does not pay it holds src whole, so the
// caller compares sizes.
func (d *Dict) Encode(dst, src []byte) ([]byte, bool) {
	if len(src) > MaxValue {
		return dst, false
	}
	e, err := d.encoder()
	if err != nil {
		return dst, false
	}
	defer d.encoders.Put(e)
	dst = d.frameHeader(dst, len(src))
	head := len(dst)
	dst = append(dst, 0, 0, 0) // the block header, once its size is known
	ok := false
	if len(src) >= 2*minMatch {
		e.parse(d, src)
		dst, ok = e.block(dst, d)
	}
	if size := len(dst) - head - 3; ok && size < len(src) {
		putBlockHeader(dst[head:], 2, size)
		return dst, true
	}
	// A raw block: smaller than what the search found, and never over
	// the block size a frame of this content size allows.
	dst = append(dst[:head+3], src...)
	putBlockHeader(dst[head:], 0, len(src))
	return dst, true
}

// putBlockHeader writes the header of the frame's last (only) block.
func putBlockHeader(b []byte, typ, size int) {
	v := 1 | typ<<1 | size<<3
	b[0], b[1], b[2] = byte(v), byte(v>>8), byte(v>>16)
}

// frameHeader appends a single-segment frame header: the content size,
// which bounds a reader's allocation, and the dictionary ID; no checksum.
func (d *Dict) frameHeader(dst []byte, n int) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, frameMagic)
	var fcs, did byte
	switch {
	case n < 256:
	case n < 256+1<<16:
		fcs = 1
	default:
		fcs = 2
	}
	switch {
	case d.id < 1<<8:
		did = 1
	case d.id < 1<<16:
		did = 2
	default:
		did = 3
	}
	dst = append(dst, fcs<<6|1<<5|did)
	switch did {
	case 1:
		dst = append(dst, byte(d.id))
	case 2:
		dst = binary.LittleEndian.AppendUint16(dst, uint16(d.id))
	default:
		dst = binary.LittleEndian.AppendUint32(dst, d.id)
	}
	switch fcs {
	case 0:
		dst = append(dst, byte(n))
	case 1:
		dst = binary.LittleEndian.AppendUint16(dst, uint16(n-256))
	default:
		dst = binary.LittleEndian.AppendUint32(dst, uint32(n))
	}
	return dst
}

// parse finds src's matches, greedily: against the last offset used,
// earlier in src, and in the dictionary (the newest position with the
// same hash in each). Positions in the dictionary come before src's: src[i] is at
// len(d.content)+i, and an offset counts back from there.
func (e *encoder) parse(d *Dict, src []byte) {
	dl := len(d.content)
	hl := min(max(bits.Len(uint(len(src))), 8), 13)
	if cap(e.table) < 1<<hl {
		e.table = make([]uint32, 1<<13)
	}
	table := e.table[:1<<hl]
	clear(table)
	e.seqs, e.lits = e.seqs[:0], e.lits[:0]
	reps := d.reps
	anchor, s := 0, 0
	limit := len(src) - 8
	for s <= limit {
		cv := load64(src, s)
		if s > anchor {
			if c := dl + s - int(reps[0]); c >= 0 {
				var n int
				if c+8 <= dl {
					n = sameBytes(load64(d.content, c), cv, d.content, src, c, s)
				} else {
					n = matchLen(d.content, src, c, s)
				}
				if n >= minMatch {
					e.emit(src, anchor, s, n, reps[0], &reps)
					s += n
					anchor = s
					continue
				}
			}
		}
		hv := (cv << 16) * hashPrime
		h := hv >> (64 - hl)
		best, from := 0, 0
		if c := int(table[h]) - 1; c >= 0 {
			best, from = sameBytes(load64(src, c), cv, d.content, src, dl+c, s), dl+c
		}
		table[h] = uint32(s + 1)
		if p := d.match[hv>>(64-dictHashLog)]; p != 0 {
			c := d.matchBase + int(p) - 1
			if n := sameBytes(load64(d.content, c), cv, d.content, src, c, s); n > best {
				best, from = n, c
			}
		}
		if best < minMatch {
			s += 1 + (s-anchor)>>skipLog
			continue
		}
		for s > anchor && from > 0 && historyByte(d.content, src, from-1) == src[s-1] {
			s--
			from--
			best++
		}
		e.emit(src, anchor, s, best, uint32(dl+s-from), &reps)
		s += best
		anchor = s
		if p := s - 2; p <= limit {
			table[(load64(src, p)<<16)*hashPrime>>(64-hl)] = uint32(p + 1)
		}
	}
	e.lits = append(e.lits, src[anchor:]...)
}

// emit records the literals src[anchor:s] and a match of n at offset off,
// as a repeat of the last offset where the format allows (a literal run
// before it), else as a new offset that the repeats shift down for.
func (e *encoder) emit(src []byte, anchor, s, n int, off uint32, reps *[3]uint32) {
	lit := uint32(s - anchor)
	e.lits = append(e.lits, src[anchor:s]...)
	ov := uint32(1)
	if lit == 0 || off != reps[0] {
		ov = off + 3
		reps[0], reps[1], reps[2] = off, reps[0], reps[1]
	}
	m := uint32(n)
	e.seqs = append(e.seqs, sequence{lit: lit, match: m, off: ov,
		llc: llCode(lit), mlc: mlCode(m - 3), ofc: uint8(bits.Len32(ov) - 1)})
}

// block appends the compressed block's content: the literals section,
// then the sequences section; false when a table cannot express it.
func (e *encoder) block(dst []byte, d *Dict) ([]byte, bool) {
	dst = e.literals(dst)
	n := len(e.seqs)
	switch {
	case n < 128:
		dst = append(dst, byte(n))
	case n < 0x7F00:
		dst = append(dst, byte(n>>8)+128, byte(n))
	default:
		dst = append(dst, 255, byte(n-0x7F00), byte((n-0x7F00)>>8))
	}
	if n == 0 {
		return dst, true
	}
	var llUsed, mlUsed, ofUsed uint64
	for i := range e.seqs {
		sq := &e.seqs[i]
		llUsed |= 1 << sq.llc
		mlUsed |= 1 << sq.mlc
		ofUsed |= 1 << sq.ofc
	}
	// Repeat mode (3) reuses the dictionary's table; a stream with a code
	// that table gives no probability takes the predefined one (0).
	ll, ml, of := d.ll, d.ml, d.of
	var modes byte = 3<<6 | 3<<4 | 3<<2
	if llUsed&^ll.has != 0 {
		ll, modes = predef().ll, modes&^(3<<6)
	}
	if ofUsed&^of.has != 0 {
		of, modes = predef().of, modes&^(3<<4)
	}
	if mlUsed&^ml.has != 0 {
		ml, modes = predef().ml, modes&^(3<<2)
	}
	if llUsed&^ll.has != 0 || mlUsed&^ml.has != 0 || ofUsed&^of.has != 0 {
		return dst, false // beyond even the predefined tables: never for one block's lengths
	}
	dst = append(dst, modes)
	// A sequence takes at most 26 bits of states and 63 extra: room for
	// 12 bytes each means no flush ever grows the buffer.
	// The writer is a local so that its state stays in registers.
	w := bitWriter{out: slices.Grow(dst, 12*n+16)}
	last := &e.seqs[n-1]
	sll, sml, sof := ll.init(last.llc), ml.init(last.mlc), of.init(last.ofc)
	extraBits(&w, last)
	for i := n - 2; i >= 0; i-- {
		sq := &e.seqs[i]
		sof = of.encode(&w, sof, sq.ofc)
		sml = ml.encode(&w, sml, sq.mlc)
		sll = ll.encode(&w, sll, sq.llc)
		extraBits(&w, sq)
	}
	ml.final(&w, sml)
	of.final(&w, sof)
	ll.final(&w, sll)
	w.close()
	return w.out, true
}

// extraBits writes a sequence's bits beyond its codes, in the reverse of
// the order a decoder reads them (offset, match length, literal length).
// With at most 7 bits held and 26 of states before: two flushes.
func extraBits(w *bitWriter, sq *sequence) {
	w.add(uint64(sq.lit-llBase[sq.llc]), uint32(llBits[sq.llc]))
	w.flush()
	w.add(uint64(sq.match-3-mlBase[sq.mlc]), uint32(mlBits[sq.mlc]))
	w.add(uint64(sq.off-1<<sq.ofc), uint32(sq.ofc))
	w.flush()
}

// literals appends the literals section: Huffman-coded with the
// dictionary's table where it has a code for every byte and that is
// smaller, else one repeated byte, else raw.
func (e *encoder) literals(dst []byte) []byte {
	lits := e.lits
	var out []byte
	var err error
	switch {
	case len(lits) == 0:
		err = huff0.ErrIncompressible
	case len(lits) <= 1023:
		out, _, err = huff0.Compress1X(lits, e.huff)
	default:
		out, _, err = huff0.Compress4X(lits, e.huff)
	}
	if err == nil {
		// Treeless literals (3): the dictionary's table.
		r, c := uint64(len(lits)), uint64(len(out))
		switch {
		case len(lits) <= 1023:
			v := 3 | r<<4 | c<<14
			dst = append(dst, byte(v), byte(v>>8), byte(v>>16))
		case r < 1<<14 && c < 1<<14:
			v := 3 | 2<<2 | r<<4 | c<<18
			dst = binary.LittleEndian.AppendUint32(dst, uint32(v))
		default:
			v := 3 | 3<<2 | r<<4 | c<<22
			dst = append(dst, byte(v), byte(v>>8), byte(v>>16), byte(v>>24), byte(v>>32))
		}
		return append(dst, out...)
	}
	typ := uint64(0) // raw
	if err == huff0.ErrUseRLE {
		typ = 1
	}
	switch n := uint64(len(lits)); {
	case n < 32:
		dst = append(dst, byte(typ|n<<3))
	case n < 4096:
		v := typ | 1<<2 | n<<4
		dst = append(dst, byte(v), byte(v>>8))
	default:
		v := typ | 3<<2 | n<<4
		dst = append(dst, byte(v), byte(v>>8), byte(v>>16))
	}
	if typ == 1 {
		return append(dst, lits[0])
	}
	return append(dst, lits...)
}

// Literal and match length codes (RFC 8878 3.1.1.3.2.1.1): baselines and
// extra bits. Match lengths are counted from 3, the least match.
var (
	llBits = [maxLLCode + 1]uint8{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
		1, 1, 1, 1, 2, 2, 3, 3, 4, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	mlBits = [maxMLCode + 1]uint8{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
		1, 1, 1, 1, 2, 2, 3, 3, 4, 4, 5, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	llBase = baselines(llBits[:])
	mlBase = baselines(mlBits[:])
)

// baselines are the least length of each code: each code's range follows
// the one before it.
func baselines(extra []uint8) []uint32 {
	b := make([]uint32, len(extra))
	for i := 1; i < len(extra); i++ {
		b[i] = b[i-1] + 1<<extra[i-1]
	}
	return b
}

// llCode and mlCode give a literal length's code and a match length's
// (counted from 3).
func llCode(n uint32) uint8 { return lengthCode(n, 16, 64, 19, llBase) }
func mlCode(n uint32) uint8 { return lengthCode(n, 32, 128, 36, mlBase) }

// lengthCode: lengths under direct are their own code; from wide on,
// where each code doubles the range, the code follows from the highest
// bit; between, it is the last code whose baseline is at most n.
func lengthCode(n, direct, wide uint32, delta uint8, base []uint32) uint8 {
	switch {
	case n < direct:
		return uint8(n)
	case n >= wide:
		return uint8(bits.Len32(n)-1) + delta
	}
	i := int(direct)
	for base[i+1] <= n {
		i++
	}
	return uint8(i)
}

// matchLen is the length of the common prefix of src[s:] and the history
// from virtual position c (the dictionary, then src), c before s.
func matchLen(dict, src []byte, c, s int) int {
	n := 0
	if c < len(dict) {
		n = prefixLen(dict[c:], src[s:])
		if c+n < len(dict) {
			return n
		}
	}
	return n + prefixLen(src[c+n-len(dict):], src[s+n:])
}

// sameBytes is matchLen(dict, src, c, s) given the 8 bytes at each, h
// from the history and v from src: most candidates differ in those.
func sameBytes(h, v uint64, dict, src []byte, c, s int) int {
	if x := h ^ v; x != 0 {
		return bits.TrailingZeros64(x) >> 3
	}
	if s+8 == len(src) {
		return 8
	}
	return 8 + matchLen(dict, src, c+8, s+8)
}

func historyByte(dict, src []byte, v int) byte {
	if v < len(dict) {
		return dict[v]
	}
	return src[v-len(dict)]
}

// prefixLen is the length of the common prefix of a and b.
func prefixLen(a, b []byte) int {
	n := min(len(a), len(b))
	i := 0
	for ; i+8 <= n; i += 8 {
		if x := binary.LittleEndian.Uint64(a[i:]) ^ binary.LittleEndian.Uint64(b[i:]); x != 0 {
			return i + bits.TrailingZeros64(x)>>3
		}
	}
	for ; i < n && a[i] == b[i]; i++ {
	}
	return i
}

func load64(b []byte, i int) uint64 { return binary.LittleEndian.Uint64(b[i:]) }

func hash(v uint64, log uint) int { return int((v << 16) * hashPrime >> (64 - log)) }
