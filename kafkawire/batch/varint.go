package batch

import (
	"encoding/binary"
	"math"
	"math/bits"
)

// readVarlong reads a zigzag varint at b[i:], returning the value and the
// position after it; ok is false when it is truncated or overflows 64 bits.
// The one-byte case, most lengths and deltas, is small enough to inline.
func readVarlong(b []byte, i int) (v int64, next int, ok bool) {
	if uint(i) < uint(len(b)) && b[i] < 0x80 {
		u := int64(b[i])
		return u>>1 ^ -(u & 1), i + 1, true
	}
	return readVarlongSlow(b, i)
}

func readVarlongSlow(b []byte, i int) (v int64, next int, ok bool) {
	if i >= len(b) {
		return 0, i, false
	}
	u, n := binary.Uvarint(b[i:])
	if n <= 0 {
		return 0, i, false
	}
	return int64(u>>1) ^ -int64(u&1), i + n, true
}

// readVarint is readVarlong for int32 fields: Java writes them in at most
// five bytes, so a value outside int32 is not something a client sent.
func readVarint(b []byte, i int) (v int32, next int, ok bool) {
	if uint(i) < uint(len(b)) && b[i] < 0x80 {
		u := int32(b[i])
		return u>>1 ^ -(u & 1), i + 1, true
	}
	return readVarintSlow(b, i)
}

func readVarintSlow(b []byte, i int) (v int32, next int, ok bool) {
	l, next, ok := readVarlongSlow(b, i)
	if !ok || l < math.MinInt32 || l > math.MaxInt32 {
		return 0, i, false
	}
	return int32(l), next, true
}

func appendVarlong(b []byte, v int64) []byte {
	return binary.AppendUvarint(b, uint64(v<<1^v>>63))
}

func appendVarint(b []byte, v int32) []byte { return appendVarlong(b, int64(v)) }

// varlongLen is the encoded size of v.
func varlongLen(v int64) int {
	u := uint64(v<<1 ^ v>>63)
	return (bits.Len64(u|1) + 6) / 7
}

// bytesLen is the encoded size of a length-prefixed, nullable byte string.
func bytesLen(b []byte) int {
	if b == nil {
		return 1 // -1
	}
	return varlongLen(int64(len(b))) + len(b)
}

func appendBytes(dst, b []byte) []byte {
	if b == nil {
		return append(dst, 1) // zigzag(-1)
	}
	dst = appendVarlong(dst, int64(len(b)))
	return append(dst, b...)
}
