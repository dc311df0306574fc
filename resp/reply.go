package resp

import (
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/tidwall/redcon"
)

// Reply is one RESP2 reply. Its slices point into the buffer of the
// Replies it came from (Client.Do returns copies).
type Reply struct{ redcon.RESP }

// Err returns the reply as an *Error if it is an error reply, else nil.
func (r Reply) Err() error {
	if r.Type != redcon.Error {
		return nil
	}
	return parseError(r.Data)
}

// IsNil reports a null bulk string ($-1) or a null array (*-1), as opposed
// to an empty one ($0, *0).
func (r Reply) IsNil() bool {
	return (r.Type == redcon.Bulk || r.Type == redcon.Array) && len(r.Raw) > 1 && r.Raw[1] == '-'
}

// IsNilArray reports a null array (*-1): EXEC aborted by WATCH, or a
// blocking read that timed out.
func (r Reply) IsNilArray() bool {
	return r.Type == redcon.Array && r.Count < 0
}

// Int returns an integer reply, or a bulk or simple string holding a
// decimal integer.
func (r Reply) Int() (int64, error) {
	switch r.Type {
	case redcon.Integer, redcon.Bulk, redcon.String:
		if r.IsNil() {
			return 0, errors.New("resp: nil reply is not an integer")
		}
		v, err := strconv.ParseInt(string(r.Data), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("resp: reply is not an integer: %w", err)
		}
		return v, nil
	case redcon.Error:
		return 0, r.Err()
	}
	return 0, fmt.Errorf("resp: %s reply is not an integer", typeName(r.Type))
}

// Bytes returns the payload of a bulk, simple string, integer or error
// reply; nil for a null.
func (r Reply) Bytes() []byte {
	if r.Type == redcon.Array {
		return nil
	}
	return r.Data
}

// Len returns the number of elements of an array reply; 0 for a null or
// a non-array.
func (r Reply) Len() int {
	if r.Type != redcon.Array || r.Count < 0 {
		return 0
	}
	return r.Count
}

// ForEach calls fn with each element of an array reply until fn returns
// false.
func (r Reply) ForEach(fn func(Reply) bool) {
	data := r.Data
	for i := 0; i < r.Len(); i++ {
		n, e := redcon.ReadNextRESP(data)
		if n == 0 {
			return // only for a Reply not made by this package
		}
		if !fn(Reply{e}) {
			return
		}
		data = data[n:]
	}
}

// First returns the first element of a non-empty array reply; ok is
// false for anything else.
func (r Reply) First() (Reply, bool) {
	if r.Len() == 0 {
		return Reply{}, false
	}
	n, e := redcon.ReadNextRESP(r.Data)
	return Reply{e}, n > 0
}

// Elems appends the elements of an array reply to dst.
func (r Reply) Elems(dst []Reply) []Reply {
	r.ForEach(func(e Reply) bool {
		dst = append(dst, e)
		return true
	})
	return dst
}

func typeName(t redcon.Type) string {
	if t == 0 {
		return "empty"
	}
	return Kind(t).String()
}

// clone returns a copy of r that shares no memory with the read buffer.
func (r Reply) clone() Reply {
	if r.Type == 0 {
		return r
	}
	raw := append([]byte(nil), r.Raw...)
	_, c := redcon.ReadNextRESP(raw)
	return Reply{c}
}

// Replies holds the replies of one Exec and the buffer they point into.
type Replies struct {
	buf  []byte
	ends []int // end offset of each reply in buf
	list []Reply
	fr   framer
	pool *sync.Pool
	// released makes a second Release a no-op instead of pooling r twice.
	released bool
}

// maxPooledBuf keeps a rare huge reply from pinning its buffer in the pool.
const maxPooledBuf = 4 << 20

// Len returns the number of replies, one per command.
func (r *Replies) Len() int { return len(r.list) }

// At returns the reply to command i.
func (r *Replies) At(i int) Reply { return r.list[i] }

// MarkReply frames b, which must hold exactly one whole reply, and
// returns the Marks of its elements as Replies.Marks would (nil when it
// has elements a Mark cannot say): for replies held elsewhere.
func MarkReply(b []byte) ([]Mark, error) {
	var f framer
	f.reset(len(b), true)
	ends, err := f.advance(b, nil)
	switch {
	case err != nil:
		return nil, err
	case len(ends) == 0:
		return nil, errors.New("resp: the reply is cut short")
	case ends[0] != len(b):
		return nil, errors.New("resp: bytes past the reply")
	}
	if s := f.spans[0]; s[0] >= 0 {
		return f.marks[s[0]:s[1]:s[1]], nil
	}
	return nil, nil
}

// Marks returns the elements of reply i in order, as the framer found
// them, when the pipeline asked for them (Pipeline.MarkElements) and each
// is a bulk string or a non-empty array (the reply itself is the first);
// nil otherwise (walk it with a Walker). Mark.Bulk takes a bulk string
// out of At(i).Raw. The framer checked the reply: the marks tile it.
func (r *Replies) Marks(i int) []Mark {
	if i >= len(r.fr.spans) || i >= len(r.list) {
		return nil
	}
	s := r.fr.spans[i]
	if s[0] < 0 {
		return nil
	}
	return r.fr.marks[s[0]:s[1]:s[1]]
}

// Release hands the buffers back for reuse. Neither r nor any Reply taken
// from it may be used afterwards.
func (r *Replies) Release() {
	if r == nil || r.pool == nil || r.released {
		return
	}
	r.released = true
	if cap(r.buf) > maxPooledBuf {
		r.buf = nil
		r.list = nil
		r.ends = nil
		r.fr.marks, r.fr.spans = nil, nil
	}
	clear(r.list) // drop references into buf early
	r.list = r.list[:0]
	r.pool.Put(r)
}

// grow makes room for at least n more bytes.
func (r *Replies) grow(n int) {
	if cap(r.buf)-len(r.buf) >= n {
		return
	}
	nb := make([]byte, len(r.buf), max(2*cap(r.buf), len(r.buf)+n))
	copy(nb, r.buf)
	r.buf = nb
}
