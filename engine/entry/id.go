package entry

import (
	"errors"
	"fmt"
	"strconv"
)

// MaxCodec is the largest compression codec an entry ID records (Kafka's
// attribute bits: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd).
const MaxCodec int8 = 4

// ErrBadID means a stream entry ID is not "<offset>-<1+codec>".
var ErrBadID = errors.New("bad stream entry id")

// AppendID appends the stream entry ID of the record at offset, produced
// with codec, to dst (see the package doc). Offsets are never negative and
// callers bound codecs to 0..MaxCodec, so anything else is a bug: AppendID
// panics rather than write an ID ParseID would refuse.
func AppendID(dst []byte, offset int64, codec int8) []byte {
	if offset < 0 || codec < 0 || codec > MaxCodec {
		panic(fmt.Sprintf("entry: no stream entry id for offset %d, codec %d", offset, codec))
	}
	dst = strconv.AppendInt(dst, offset, 10)
	return append(dst, '-', '1'+byte(codec))
}

// ParseID splits a stream entry ID written by AppendID into its offset and
// codec. It accepts exactly what AppendID writes: a decimal offset without
// sign or leading zeros, '-', and one digit 1..1+MaxCodec. It does not
// allocate unless it fails.
func ParseID(b []byte) (offset int64, codec int8, err error) {
	n := len(b)
	if n < 3 || b[n-2] != '-' {
		return 0, 0, badID(b, `want "<offset>-<1+codec>"`)
	}
	digits := b[:n-2]
	if digits[0] == '0' && len(digits) > 1 {
		return 0, 0, badID(b, "offset has a leading zero")
	}
	if digits[0] == '-' {
		return 0, 0, badID(b, "negative offset")
	}
	offset, ok := parseInt(digits)
	if !ok {
		return 0, 0, badID(b, "offset is not a decimal int64")
	}
	seq := b[n-1]
	if seq < '1' || seq > '1'+byte(MaxCodec) {
		return 0, 0, badID(b, fmt.Sprintf("sequence is not 1 + a codec (1 to %d)", 1+MaxCodec))
	}
	return offset, int8(seq - '1'), nil
}

// badID copies b into the error, so that b does not escape on the
// successful path.
func badID(b []byte, why string) error {
	return fmt.Errorf("%w %q: %s", ErrBadID, string(b), why)
}
