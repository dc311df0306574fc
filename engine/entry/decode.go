package entry

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/korvet/korvet/engine/record"
)

// ErrMalformed means a stream entry does not follow the encoding.
var ErrMalformed = errors.New("malformed stream entry")

// Decoder rebuilds records from the pairs of stream entries. It is reusable
// and not safe for concurrent use. Records it returns point into the field
// bytes passed to Field or into the Decoder's arenas, and stay valid until
// Reset; arenas only grow between Resets, so earlier records are never
// overwritten. Rebuilt flattened values are not re-validated: entries
// written by the Encoder rebuild exactly, and checking would cost every read.
type Decoder struct {
	// Dicts provides the zstd dictionaries of compressed values; MaxValue,
	// when positive, lowers the largest content size a compressed value
	// may declare below MaxDecompressed. The caller sets them per topic.
	Dicts    Dicts
	MaxValue int

	values  []byte          // arena for rebuilt flattened values
	headers []record.Header // arena for header slices

	// State of the entry being decoded.
	err        error
	ts         int64
	key, value []byte
	hasTS      bool
	hasKey     bool
	hasValue   bool // __value seen
	txn        record.Txn
	hasTxn     bool
	members    int    // flattened members seen
	ws         layout // __ws of this entry; unset = compact
	valStart   int    // start of this entry's rebuilt value in values
	hdrStart   int    // start of this entry's headers in headers
}

// Held is the bytes of the decoder's arenas.
func (d *Decoder) Held() int {
	return cap(d.values) + cap(d.headers)*int(unsafe.Sizeof(record.Header{}))
}

// Reset releases every record returned so far and reuses the arenas.
func (d *Decoder) Reset() {
	d.values = d.values[:0]
	clear(d.headers)             // drop references into old inputs
	d.ws = layout{buf: d.ws.buf} // keep only the scratch
	d.headers = d.headers[:0]
	d.Begin()
}

// Begin starts a new entry.
func (d *Decoder) Begin() {
	d.err = nil
	d.ts, d.key, d.value = 0, nil, nil
	d.hasTS, d.hasKey, d.hasValue = false, false, false
	d.txn, d.hasTxn = record.Txn{ProducerID: -1}, false
	d.members = 0
	d.ws.set = false
	d.valStart = len(d.values)
	d.hdrStart = len(d.headers)
}

// Field consumes one field-value pair, in stream order. Errors are kept and
// reported by Finish, so that callers can feed a reply without checking
// each pair.
func (d *Decoder) Field(name, value []byte) {
	if d.err != nil {
		return
	}
	if value == nil {
		value = []byte{} // a present field is never null; this does not allocate
	}
	if len(name) < 2 || name[0] != '_' || name[1] != '_' {
		d.member(name, value)
		return
	}
	switch {
	case string(name) == fieldTS:
		if d.hasTS {
			d.err = fmt.Errorf("%w: duplicate field %s", ErrMalformed, fieldTS)
			return
		}
		ts, ok := parseInt(value)
		if !ok {
			d.err = fmt.Errorf("%w: field %s: bad timestamp %q", ErrMalformed, fieldTS, value)
			return
		}
		d.ts, d.hasTS = ts, true
	case string(name) == fieldTxn:
		if d.hasTxn {
			d.err = fmt.Errorf("%w: duplicate field %s", ErrMalformed, fieldTxn)
			return
		}
		pid, epoch, ok := parseTxn(value)
		if !ok {
			d.err = fmt.Errorf("%w: field %s: bad producer %q", ErrMalformed, fieldTxn, value)
			return
		}
		d.txn.ProducerID, d.txn.Epoch, d.hasTxn = pid, epoch, true
	case string(name) == fieldCtl:
		if d.txn.Control || len(value) != 0 {
			d.err = fmt.Errorf("%w: field %s repeated or not empty", ErrMalformed, fieldCtl)
			return
		}
		d.txn.Control = true
	case string(name) == fieldKey:
		if d.hasKey {
			d.err = fmt.Errorf("%w: duplicate field %s", ErrMalformed, fieldKey)
			return
		}
		d.key, d.hasKey = value, true
	case string(name) == fieldValue:
		if d.hasValue || d.members > 0 || d.ws.set {
			d.err = fmt.Errorf("%w: field %s next to another value field", ErrMalformed, fieldValue)
			return
		}
		d.value, d.hasValue = value, true
	case string(name) == fieldWS:
		if d.ws.set || d.hasValue || d.members > 0 {
			d.err = fmt.Errorf("%w: field %s repeated or not before the members", ErrMalformed, fieldWS)
			return
		}
		if !d.ws.parse(value) {
			d.err = fmt.Errorf("%w: field %s: bad layout %q", ErrMalformed, fieldWS, value)
		}
	case hasPrefix(name, prefixZstd):
		d.zstdField(name, value)
	case hasPrefix(name, prefixHeader):
		d.headers = append(d.headers, record.Header{Key: name[len(prefixHeader):], Value: value})
	case hasPrefix(name, prefixNullValue):
		if len(value) != 0 {
			d.err = fmt.Errorf("%w: field %q has a value", ErrMalformed, name)
			return
		}
		d.headers = append(d.headers, record.Header{Key: name[len(prefixNullValue):]})
	default:
		d.err = fmt.Errorf("%w: unknown field %q", ErrMalformed, name)
	}
}

// member appends `"name":value` to the value being rebuilt.
func (d *Decoder) member(name, value []byte) {
	if d.hasValue {
		d.err = fmt.Errorf("%w: member field %q next to %s", ErrMalformed, name, fieldValue)
		return
	}
	if d.ws.set {
		var ok1, ok2 bool
		d.values, ok1 = d.ws.appendOpen(d.values, d.members)
		d.values = append(d.values, name...)
		d.values, ok2 = d.ws.appendColon(d.values, d.members)
		d.values = append(d.values, value...)
		d.members++
		if !ok1 || !ok2 {
			d.err = fmt.Errorf("%w: field %s has fewer runs than the members need", ErrMalformed, fieldWS)
		}
		return
	}
	sep := byte(',')
	if d.members == 0 {
		sep = '{'
	}
	d.members++
	d.values = append(d.values, sep, '"')
	d.values = append(d.values, name...)
	d.values = append(d.values, '"', ':')
	d.values = append(d.values, value...)
}

// Finish fills rec's Timestamp, Key, Value and Headers from the entry begun
// last; Offset is left alone. Slices in rec are capped so that appending to
// them cannot overwrite another record's data.
func (d *Decoder) Finish(rec *record.Record) error {
	return d.FinishTxn(rec, nil)
}

// FinishTxn is Finish that also reports, when txn is not nil, the entry's
// transaction: ProducerID -1 for a record of no transaction.
func (d *Decoder) FinishTxn(rec *record.Record, txn *record.Txn) error {
	if d.err == nil && !d.hasTS {
		d.err = fmt.Errorf("%w: missing field %s", ErrMalformed, fieldTS)
	}
	if d.err == nil && d.txn.Control && (!d.hasTxn || !d.hasKey || !d.hasValue) {
		d.err = fmt.Errorf("%w: control entry needs %s, %s and %s", ErrMalformed, fieldTxn, fieldKey, fieldValue)
	}
	if d.err == nil && d.members > 0 {
		var ok bool
		if d.values, ok = d.ws.appendClose(d.values, d.members); !ok {
			d.err = fmt.Errorf("%w: field %s has more or fewer runs than the members need", ErrMalformed, fieldWS)
		}
	} else if d.err == nil && d.ws.set {
		d.err = fmt.Errorf("%w: field %s without members", ErrMalformed, fieldWS)
	}
	if d.err != nil {
		// Drop this entry's partial data; earlier records stay intact.
		d.values = d.values[:d.valStart]
		clear(d.headers[d.hdrStart:])
		d.headers = d.headers[:d.hdrStart]
		return d.err
	}
	rec.Timestamp = d.ts
	rec.Key = nil
	if d.hasKey {
		rec.Key = d.key
	}
	rec.Value = d.value // nil for a tombstone
	if d.members > 0 {
		rec.Value = d.values[d.valStart:len(d.values):len(d.values)]
	}
	rec.Headers = nil
	if n := len(d.headers); n > d.hdrStart {
		rec.Headers = d.headers[d.hdrStart:n:n]
	}
	if txn != nil {
		*txn = record.Txn{ProducerID: -1}
		if d.hasTxn {
			*txn = d.txn
		}
	}
	d.Begin() // a second Finish must not append the closing brace again
	return nil
}

// ParseTxn parses a __txn value, "<producer id>.<producer epoch>" (both
// non-negative), for readers that walk entries' fields themselves.
func ParseTxn(b []byte) (producerID int64, epoch int16, ok bool) { return parseTxn(b) }

// parseTxn parses "<producer id>.<producer epoch>", both non-negative.
func parseTxn(b []byte) (int64, int16, bool) {
	i := 0
	for i < len(b) && b[i] != '.' {
		i++
	}
	if i == len(b) || i == 0 || b[0] == '-' || i+1 == len(b) || b[i+1] == '-' {
		return 0, 0, false
	}
	pid, ok1 := parseInt(b[:i])
	ep, ok2 := parseInt(b[i+1:])
	if !ok1 || !ok2 || ep > 1<<15-1 {
		return 0, 0, false
	}
	return pid, int16(ep), true
}

func hasPrefix(b []byte, p string) bool {
	return len(b) >= len(p) && string(b[:len(p)]) == p
}

// parseInt parses a decimal int64 without the string conversion
// strconv.ParseInt would need.
func parseInt(b []byte) (int64, bool) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 {
		return 0, false
	}
	if len(b) <= 18 {
		// Cannot overflow (a millisecond timestamp has 13 digits).
		var n int64
		for _, c := range b {
			if c < '0' || c > '9' {
				return 0, false
			}
			n = n*10 + int64(c-'0')
		}
		if neg {
			return -n, true
		}
		return n, true
	}
	limit := uint64(1<<63 - 1)
	if neg {
		limit = 1 << 63
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		dig := uint64(c - '0')
		if n > (limit-dig)/10 {
			return 0, false
		}
		n = n*10 + dig
	}
	if neg {
		return int64(-n), true
	}
	return int64(n), true
}
