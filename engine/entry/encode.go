package entry

import (
	"strconv"

	"github.com/korvet/korvet/engine/record"
)

// Field names of the encoding; see the package comment.
const (
	fieldTS         = "__ts"
	fieldKey        = "__key"
	fieldValue      = "__value"
	fieldTxn        = "__txn"
	fieldCtl        = "__ctl"
	prefixHeader    = "__header."
	prefixNullValue = "__hnull."
)

// maxTSLen is the longest decimal int64, "-9223372036854775808".
const maxTSLen = 20

// maxKeptScratch bounds the scratch an Encoder keeps after one unusually
// large record, so a single outlier does not pin memory forever.
const maxKeptScratch = 64 << 10

// Writer receives the encoded fields and values in order. It must copy (or
// fully consume) the bytes before Append returns; resp.Pipeline satisfies it.
type Writer interface {
	Bulk(b []byte)
	String(s string)
}

// Encoder turns records into stream entry fields. It is reusable and keeps
// scratch space so that encoding does not allocate per record; it is not
// safe for concurrent use.
type Encoder struct {
	rec     *record.Record
	txn     []byte // the __txn value, nil for a record of no transaction
	control bool
	flat    bool
	f       flattener
	scratch []byte // the timestamp and the header field names of one Append

	// Zstd, when set, stores values compressed (see the package comment),
	// except values shorter than ZstdMin bytes; the caller sets both per
	// topic before Prepare.
	Zstd    *Compressor
	ZstdMin int
	packed  bool // the value goes compressed: out, in field zfield
	out     []byte
	zfield  string
	zbuf    []byte // the compressed value of one Append

	pre      *Compressor // UseFrame's, for the next Prepare
	preFrame []byte
}

// Prepare analyses r and returns the number of field-value pairs Append will
// write, which the caller needs to size the XADD command. r must not change
// until Append has run.
func (e *Encoder) Prepare(r *record.Record) int {
	return e.PrepareTxn(r, nil, false)
}

// PrepareTxn is Prepare for a record of a transactional batch (txn is its
// "<producer id>.<producer epoch>", see AppendTxn) or, with control, a
// transaction marker: __txn follows __ts, then __ctl, and a control
// record's value is always stored whole in __value. txn nil is Prepare.
func (e *Encoder) PrepareTxn(r *record.Record, txn []byte, control bool) int {
	e.rec = r
	e.txn, e.control = txn, control && txn != nil
	pairs := 1 + len(r.Headers)
	if txn != nil {
		pairs++
	}
	if e.control {
		pairs++
	}
	if r.Key != nil {
		pairs++
	}
	need := maxTSLen
	for i := range r.Headers {
		need += len(prefixHeader) + len(r.Headers[i].Key)
	}
	// Reserve everything now: Append hands out sub-slices of scratch and
	// must not reallocate it while a Writer may still refer to them.
	if cap(e.scratch) < need {
		e.scratch = make([]byte, 0, need)
	}
	e.packed = e.Zstd != nil && r.Value != nil && !e.control && e.compress(r.Value)
	e.pre, e.preFrame = nil, nil
	e.flat = !e.packed && r.Value != nil && !e.control && e.f.analyse(r.Value)
	switch {
	case e.packed:
		pairs++
	case e.flat:
		pairs += len(e.f.members)
		if len(e.f.marker) > 0 {
			pairs++ // __ws
		}
	case r.Value != nil:
		pairs++
	}
	return pairs
}

// Append writes the pairs of the record last passed to Prepare, exactly as
// many as Prepare returned. Each Prepare allows one Append.
func (e *Encoder) Append(w Writer) {
	r := e.rec
	if r == nil {
		panic("entry: Append without Prepare")
	}
	txn, out := e.txn, e.out
	e.rec, e.txn, e.out = nil, nil, nil // do not pin the caller's buffers

	s := e.scratch[:0]
	s = strconv.AppendInt(s, r.Timestamp, 10)
	w.String(fieldTS)
	w.Bulk(s)
	if txn != nil {
		w.String(fieldTxn)
		w.Bulk(txn)
		if e.control {
			w.String(fieldCtl)
			w.String("")
		}
	}
	if r.Key != nil {
		w.String(fieldKey)
		w.Bulk(r.Key)
	}
	for i := range r.Headers {
		h := &r.Headers[i]
		n := len(s)
		if h.Value == nil {
			s = append(s, prefixNullValue...)
			s = append(s, h.Key...)
			w.Bulk(s[n:])
			w.String("")
			continue
		}
		s = append(s, prefixHeader...)
		s = append(s, h.Key...)
		w.Bulk(s[n:])
		w.Bulk(h.Value)
	}
	switch {
	case e.packed:
		w.String(e.zfield)
		w.Bulk(out)
	case e.flat:
		if len(e.f.marker) > 0 {
			w.String(fieldWS)
			w.Bulk(e.f.marker)
		}
		for _, m := range e.f.members {
			w.Bulk(r.Value[m.nameStart:m.nameEnd])
			w.Bulk(r.Value[m.valStart:m.valEnd])
		}
	case r.Value != nil:
		w.String(fieldValue)
		w.Bulk(r.Value)
	}
	if cap(e.scratch) > maxKeptScratch {
		e.scratch = nil
	}
	if cap(e.zbuf) > maxKeptScratch {
		e.zbuf = nil
	}
}

// Per-element and per-entry overheads of the stream listpack, roughly.
const (
	elementOverhead = 2
	entryOverhead   = 16
)

// EncodedSize estimates the bytes r takes as a stream entry, for
// retention.bytes accounting. It does not analyse the value: a flattened
// value is costed as if stored whole in __value, which is close enough.
func EncodedSize(r *record.Record) int {
	n := entryOverhead + len(fieldTS) + 13 + 2*elementOverhead
	if r.Key != nil {
		n += len(fieldKey) + len(r.Key) + 2*elementOverhead
	}
	for i := range r.Headers {
		n += len(prefixHeader) + len(r.Headers[i].Key) + len(r.Headers[i].Value) + 2*elementOverhead
	}
	if r.Value != nil {
		n += len(fieldValue) + len(r.Value) + 2*elementOverhead
	}
	return n
}

// AppendTxn appends the __txn value of a producer's transactional records,
// "<producer id>.<producer epoch>" in decimal, to dst.
func AppendTxn(dst []byte, producerID int64, epoch int16) []byte {
	dst = strconv.AppendInt(dst, producerID, 10)
	dst = append(dst, '.')
	return strconv.AppendInt(dst, int64(epoch), 10)
}

// TxnEncodedSize is what the __txn field (and __ctl for a control record)
// adds to EncodedSize.
func TxnEncodedSize(control bool) int {
	n := len(fieldTxn) + 26 + 2*elementOverhead
	if control {
		n += len(fieldCtl) + 2*elementOverhead
	}
	return n
}
