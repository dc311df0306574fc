package zstdict

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/klauspost/compress/huff0"
)

// Table sizes of tuned dictionaries: the format's largest, so rare codes
// cost their share and no more.
const tunedLLLog, tunedMLLog, tunedOFLog = 9, 9, 8

// tuneSampleBytes bounds the sample Tune parses.
const tuneSampleBytes = 4 << 20

// Tune returns dictionary raw with entropy tables fitted to how Encode
// compresses samples with it: the literal bytes and the sequence codes it
// produces. Encode uses a dictionary's tables for every frame instead of
// fitting its own, so they must describe its output; a trainer's tables
// describe the trainer's. Every code a frame can need gets a probability
// (no stream falls back to the predefined tables), and every byte a
// Huffman code. Content, ID and repeat offsets stay as they are.
func Tune(raw []byte, samples [][]byte) ([]byte, error) {
	d, err := New(raw)
	if err != nil {
		return nil, err
	}
	e, err := d.encoder()
	if err != nil {
		return nil, err
	}
	var ll [maxLLCode + 1]int
	var ml [maxMLCode + 1]int
	var of [maxOFCode + 1]int
	var lits []byte
	budget := tuneSampleBytes
	for _, s := range samples {
		if len(s) > MaxValue || len(s) < 2*minMatch {
			continue
		}
		if budget -= len(s); budget < 0 {
			break
		}
		e.parse(d, s)
		for _, sq := range e.seqs {
			ll[sq.llc]++
			ml[sq.mlc]++
			of[sq.ofc]++
		}
		if len(lits)+len(e.lits) < huff0.BlockSizeMax-256 {
			lits = append(lits, e.lits...)
		}
	}
	// Floors: a code no sample needed still gets the least probability.
	maxOF := d.maxOF()
	for i := range ll {
		ll[i]++
	}
	for i := range ml {
		ml[i]++
	}
	for i := range of[:maxOF+1] {
		of[i]++
	}
	for b := range 256 {
		lits = append(lits, byte(b))
	}

	out := binary.LittleEndian.AppendUint32(nil, dictMagic)
	out = binary.LittleEndian.AppendUint32(out, d.id)
	hs := &huff0.Scratch{Reuse: huff0.ReusePolicyNone}
	if _, _, err := huff0.Compress4X(lits, hs); err == nil {
		out = append(out, hs.OutTable...)
	} else {
		out = append(out, d.huffDesc...) // literals Huffman cannot shrink: the trainer's table
	}
	for _, t := range []struct {
		counts []int
		log    uint8
	}{{of[:maxOF+1], tunedOFLog}, {ml[:], tunedMLLog}, {ll[:], tunedLLLog}} {
		norm, err := normalize(t.counts, t.log)
		if err != nil {
			return nil, fmt.Errorf("zstd dictionary %d: %w", d.id, err)
		}
		out = writeNormalized(out, norm, t.log)
	}
	for _, r := range d.reps {
		out = binary.LittleEndian.AppendUint32(out, r)
	}
	out = append(out, d.content...)
	if _, err := New(out); err != nil {
		return nil, fmt.Errorf("zstd dictionary %d: tuned tables: %w", d.id, err)
	}
	return out, nil
}

// normalize scales counts (every one at least 1) to sum to 1<<log, each
// at least 1, rounding to nearest and settling the difference on the most
// frequent symbols.
func normalize(counts []int, log uint8) ([]int16, error) {
	size := 1 << log
	total := 0
	for _, c := range counts {
		if c < 1 {
			return nil, errors.New("normalize: a count under 1")
		}
		total += c
	}
	if len(counts) > size {
		return nil, fmt.Errorf("normalize: %d symbols in a table of %d", len(counts), size)
	}
	norm := make([]int16, len(counts))
	sum := 0
	for i, c := range counts {
		n := max(1, (2*c*size+total)/(2*total))
		norm[i] = int16(n)
		sum += n
	}
	// Rounding leaves sum off by at most a few per symbol: settle it one
	// at a time on the largest, which it changes least in proportion.
	for sum != size {
		i := -1
		for j, n := range norm {
			if (sum < size || n > 1) && (i < 0 || n > norm[i]) {
				i = j
			}
		}
		if i < 0 {
			return nil, errors.New("normalize: cannot fit the counts")
		}
		if sum > size {
			norm[i]--
			sum--
		} else {
			norm[i]++
			sum++
		}
	}
	return norm, nil
}

// writeNormalized appends the FSE table description of norm (RFC 8878
// 4.1.1), the inverse of readNormalized.
func writeNormalized(dst []byte, norm []int16, log uint8) []byte {
	w := bitWriter{out: dst}
	w.put(uint64(log-5), 4)
	remaining := 1<<log + 1
	threshold := 1 << log
	width := uint32(log) + 1
	for s := 0; remaining > 1 && s < len(norm); {
		c := int(norm[s])
		s++
		v := c + 1
		most := 2*threshold - 1 - remaining
		switch {
		case v < most:
			w.put(uint64(v), width-1)
		case v >= threshold:
			w.put(uint64(v+most), width)
		default:
			w.put(uint64(v), width)
		}
		remaining -= max(c, -c)
		if c == 0 {
			z := 0
			for s+z < len(norm) && norm[s+z] == 0 {
				z++
			}
			s += z
			for ; z >= 3; z -= 3 {
				w.put(3, 2)
			}
			w.put(uint64(z), 2)
		}
		for remaining < threshold {
			width--
			threshold >>= 1
		}
	}
	return w.flushBytes()
}
