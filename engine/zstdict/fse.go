package zstdict

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
)

// The sequence codes' alphabets (RFC 8878 3.1.1.3.2.1) and the largest
// accuracy logs a table of each may have.
const (
	maxLLCode, maxMLCode, maxOFCode = 35, 52, 31
	maxLLLog, maxMLLog, maxOFLog    = 9, 9, 8
)

// The format's predefined distributions (RFC 8878 3.1.1.3.2.2), for a
// stream whose codes the dictionary's table cannot all express.
var (
	predefLL = []int16{4, 3, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 1, 1, 1,
		2, 2, 2, 2, 2, 2, 2, 2, 2, 3, 2, 1, 1, 1, 1, 1, -1, -1, -1, -1}
	predefML = []int16{1, 4, 3, 2, 2, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1,
		1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
		1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, -1, -1, -1, -1, -1, -1, -1}
	predefOF = []int16{1, 1, 1, 1, 1, 1, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1,
		1, 1, 1, 1, 1, 1, 1, 1, -1, -1, -1, -1, -1}
)

const predefLLLog, predefMLLog, predefOFLog = 6, 6, 5

// fseTable encodes the symbols of one normalized distribution. It is
// immutable once built.
type fseTable struct {
	log    uint8
	has    uint64   // bit s: symbol s has a non-zero probability
	states []uint16 // next states, grouped by symbol
	tt     []symbolTransform
}

// symbolTransform turns an encoder state into the bits it writes for a
// symbol and the index of the state that follows.
type symbolTransform struct {
	deltaBits  uint32 // (bits << 16) - the least state that writes bits
	deltaState int32  // where the symbol's states start in states, less its count
}

// newFSETable builds the encoding table of distribution norm (a count per
// symbol, -1 for "less than one") at accuracy log. The spread of symbols
// over states is the one the format's decoders build, so the two agree.
func newFSETable(norm []int16, log uint8) (*fseTable, error) {
	size := 1 << log
	var total int
	for _, c := range norm {
		if c < -1 {
			return nil, fmt.Errorf("fse table: count %d", c)
		}
		total += max(int(c), -int(c))
	}
	if total != size || len(norm) > 64 {
		return nil, fmt.Errorf("fse table: %d symbols whose counts sum to %d, want %d", len(norm), total, size)
	}
	t := &fseTable{log: log, states: make([]uint16, size), tt: make([]symbolTransform, len(norm))}
	symbols := make([]uint8, size)
	high := size - 1
	cumul := make([]int, len(norm)+1)
	for s, c := range norm {
		if c == -1 {
			symbols[high] = uint8(s)
			high--
			cumul[s+1] = cumul[s] + 1
		} else {
			cumul[s+1] = cumul[s] + int(c)
		}
		if c != 0 {
			t.has |= 1 << s
		}
	}
	step := size>>1 + size>>3 + 3
	pos := 0
	for s, c := range norm {
		for range max(int(c), 0) {
			symbols[pos] = uint8(s)
			for pos = (pos + step) & (size - 1); pos > high; pos = (pos + step) & (size - 1) {
			}
		}
	}
	if pos != 0 {
		return nil, errors.New("fse table: the symbols do not spread over the table")
	}
	next := cumul[:len(norm)]
	for u, s := range symbols {
		t.states[next[s]] = uint16(size + u)
		next[s]++
	}
	total = 0
	for s, c := range norm {
		switch c {
		case 0:
		case -1, 1:
			t.tt[s] = symbolTransform{deltaBits: uint32(log)<<16 - uint32(size), deltaState: int32(total - 1)}
			total++
		default:
			out := uint32(log) - uint32(bits.Len32(uint32(c-1))-1)
			t.tt[s] = symbolTransform{deltaBits: out<<16 - uint32(c)<<out, deltaState: int32(total - int(c))}
			total += int(c)
		}
	}
	return t, nil
}

// init returns the first state for symbol s: one that decodes to s,
// written by final after every other symbol.
func (t *fseTable) init(s uint8) uint32 {
	tt := t.tt[s]
	n := (tt.deltaBits + 1<<15) >> 16
	v := n<<16 - tt.deltaBits
	return uint32(t.states[int32(v>>n)+tt.deltaState])
}

// encode gathers the bits that take state to symbol s's (at most the
// table's log) and returns the new state.
func (t *fseTable) encode(w *bitWriter, state uint32, s uint8) uint32 {
	tt := t.tt[s]
	n := (state + tt.deltaBits) >> 16
	w.add(uint64(state&(1<<n-1)), n)
	return uint32(t.states[int32(state>>n)+tt.deltaState])
}

// final gathers the last state, which a decoder reads first.
func (t *fseTable) final(w *bitWriter, state uint32) {
	w.add(uint64(state&(1<<t.log-1)), uint32(t.log))
}

// readNormalized reads an FSE table description (RFC 8878 4.1.1) of at
// most maxSym+1 symbols and accuracy log maxLog from b, returning the
// counts, the log and the bytes it took.
func readNormalized(b []byte, maxSym int, maxLog uint8) ([]int16, uint8, int, error) {
	r := bitReader{b: b}
	log := uint8(r.read(4)) + 5
	if log > maxLog {
		return nil, 0, 0, fmt.Errorf("fse table description: accuracy log %d, at most %d", log, maxLog)
	}
	remaining := 1<<log + 1
	threshold := 1 << log
	width := uint32(log) + 1
	var norm []int16
	for remaining > 1 {
		if len(norm) > maxSym {
			return nil, 0, 0, fmt.Errorf("fse table description: more than %d symbols", maxSym+1)
		}
		most := 2*threshold - 1 - remaining
		v := int(r.peek(width - 1))
		if v < most {
			r.skip(width - 1)
		} else {
			v = int(r.peek(width))
			r.skip(width)
			if v >= threshold {
				v -= most
			}
		}
		c := v - 1
		if c > remaining-1 {
			return nil, 0, 0, fmt.Errorf("fse table description: count %d of %d left", c, remaining-1)
		}
		norm = append(norm, int16(c))
		remaining -= max(c, -c)
		if c == 0 {
			for {
				rep := int(r.read(2))
				for range rep {
					norm = append(norm, 0)
				}
				if rep != 3 {
					break
				}
				if len(norm) > maxSym+1 {
					return nil, 0, 0, fmt.Errorf("fse table description: more than %d symbols", maxSym+1)
				}
			}
		}
		for remaining < threshold {
			width--
			threshold >>= 1
		}
		if r.over() {
			return nil, 0, 0, errors.New("fse table description: truncated")
		}
	}
	if remaining != 1 || len(norm) > maxSym+1 {
		return nil, 0, 0, errors.New("fse table description: counts do not add up")
	}
	return norm, log, r.bytes(), nil
}

// bitReader reads bits from the low end of a little-endian byte string,
// as FSE table descriptions are written; reading past the end gives zeros
// and marks the reader over.
type bitReader struct {
	b   []byte
	pos uint32 // in bits
}

func (r *bitReader) peek(n uint32) uint32 {
	var v uint32
	for i := range n {
		p := r.pos + i
		if int(p>>3) < len(r.b) {
			v |= uint32(r.b[p>>3]>>(p&7)&1) << i
		}
	}
	return v
}

func (r *bitReader) skip(n uint32)        { r.pos += n }
func (r *bitReader) read(n uint32) uint32 { v := r.peek(n); r.skip(n); return v }
func (r *bitReader) over() bool           { return int(r.pos) > 8*len(r.b) }
func (r *bitReader) bytes() int           { return int(r.pos+7) >> 3 }

// bitWriter appends bits from the low end, as the format's backward
// bitstreams are written: a decoder reads the last written first. add
// only gathers bits; flush stores whole bytes, at most 63 bits being held.
type bitWriter struct {
	out   []byte
	acc   uint64
	nbits uint32
}

// add gathers v, which must be under 1<<n, as the next n bits.
func (w *bitWriter) add(v uint64, n uint32) {
	w.acc |= v << w.nbits
	w.nbits += n
}

// flush stores the whole bytes gathered: one 8-byte store, of which the
// bytes past them are overwritten by the next.
func (w *bitWriter) flush() {
	w.out = binary.LittleEndian.AppendUint64(w.out, w.acc)
	k := w.nbits >> 3
	w.out = w.out[:len(w.out)-8+int(k)]
	w.acc >>= k << 3
	w.nbits &= 7
}

// put adds the low n bits of v and flushes.
func (w *bitWriter) put(v uint64, n uint32) {
	w.add(v&(1<<n-1), n)
	w.flush()
}

// close writes the end mark and the last partial byte.
func (w *bitWriter) close() {
	w.add(1, 1)
	w.flushBytes()
}

// flushBytes writes what is gathered, the last byte partial, and returns
// the output.
func (w *bitWriter) flushBytes() []byte {
	w.flush()
	if w.nbits > 0 {
		w.out = append(w.out, byte(w.acc))
		w.acc, w.nbits = 0, 0
	}
	return w.out
}
