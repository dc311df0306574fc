package resp

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/tidwall/redcon"
)

const (
	// minRead is the smallest free space handed to Read: big chunks keep
	// syscalls few for large replies.
	minRead = 64 << 10
	// maxDepth bounds array nesting. Redis replies nest a handful of levels;
	// the bound keeps redcon's recursive parsing off deep stacks.
	maxDepth = 64
	// maxHeader bounds the line of an integer, bulk or array header.
	maxHeader = 32
	// maxPregrow caps how much a bulk length announced by the server may
	// grow the buffer ahead of the data actually arriving.
	maxPregrow = 64 << 20
)

// errDisagree means redcon.ReadNextRESP rejected a reply the framer
// accepted: a bug in the framer, which the fuzz test watches for.
var errDisagree = errors.New("reply framing disagrees with redcon")

// errProtocol is a reply that breaks RESP2.
type errProtocol struct{ msg string }

func (e *errProtocol) Error() string { return "protocol error: " + e.msg }

// framer finds where top-level replies end, incrementally: each byte is
// examined once however many reads a reply takes, so a huge reply costs
// O(n), and invalid input is told apart from incomplete input (which
// redcon.ReadNextRESP cannot do). It is at least as strict as
// ReadNextRESP, so ReadNextRESP never fails or panics (it does on bulk
// lengths near MaxInt64) on a frame the framer accepted.
type framer struct {
	max   int // largest top-level reply, bytes
	start int // offset of the unfinished top-level reply
	pos   int // next byte to examine
	scan  int // where the search for '\n' resumes in the current line
	body  int // >0: bytes of bulk payload+CRLF still to skip
	depth int
	left  [maxDepth]int // elements still due in each open array

	// With mark, every element is recorded in marks as it is framed
	// (Replies.Marks); spans holds, per reply, where its marks are, or
	// {-1, -1} when it has an element a Mark cannot say (see Mark).
	mark     bool
	unmarked bool // the unfinished reply has such an element
	markFrom int  // where its marks start
	marks    []Mark
	spans    [][2]int
}

func (f *framer) reset(max int, mark bool) {
	marks, spans := f.marks[:0], f.spans[:0]
	*f = framer{max: max, mark: mark, marks: marks, spans: spans}
}

// Mark is one element of a reply as the framer found it (Replies.Marks):
// a bulk string (its payload's offset in the reply's Raw, and length) or
// an array (its number of elements, which follow it). Scalars, nulls and
// empty arrays have none.
type Mark uint64

const (
	markArray = Mark(1) << 63
	markMax   = 1<<31 - 1 // offsets and lengths a Mark can hold
)

// IsArray reports an array; Len is then its number of elements.
func (m Mark) IsArray() bool { return m&markArray != 0 }

// Len is a bulk string's length, or an array's number of elements.
func (m Mark) Len() int { return int(m & (1<<32 - 1)) }

// Bulk returns the bulk string m marks in raw, the Raw of its reply,
// capped; nil for an array (or a Mark of another reply).
func (m Mark) Bulk(raw []byte) []byte {
	off, n := int(m>>32&markMax), m.Len()
	if m.IsArray() || off+n > len(raw) {
		return nil
	}
	return raw[off : off+n : off+n]
}

// markBulk records a bulk string whose payload of n bytes starts at off
// in its reply.
func (f *framer) markBulk(off, n int) {
	if off > markMax || n > markMax {
		f.unmarked = true
	} else {
		f.marks = append(f.marks, Mark(off)<<32|Mark(n))
	}
}

// markArray records an array of n > 0 elements.
func (f *framer) markArray(n int) {
	if n > markMax {
		f.unmarked = true
	} else {
		f.marks = append(f.marks, markArray|Mark(n))
	}
}

// markEnd closes the marks of the reply that just ended.
func (f *framer) markEnd() {
	span := [2]int{f.markFrom, len(f.marks)}
	if f.unmarked {
		f.marks = f.marks[:f.markFrom]
		span = [2]int{-1, -1}
	}
	f.spans = append(f.spans, span)
	f.markFrom, f.unmarked = len(f.marks), false
}

// need reports how many bytes beyond buffered ones the unfinished reply
// is known to need: the rest of a bulk payload.
func (f *framer) need(buffered int) int {
	if f.body == 0 {
		return 0
	}
	return max(0, f.pos+f.body-buffered)
}

// advance examines buf[f.pos:] and appends the end offset of each
// top-level reply completed to ends.
func (f *framer) advance(buf []byte, ends []int) ([]int, error) {
	for {
		if f.body == 0 {
			ends = f.fast(buf, ends)
		}
		if f.body > 0 {
			if len(buf)-f.pos < f.body {
				return ends, f.checkSize(len(buf))
			}
			f.pos += f.body
			f.body = 0
			if buf[f.pos-2] != '\r' || buf[f.pos-1] != '\n' {
				return ends, &errProtocol{"bulk string not terminated by CRLF"}
			}
		} else {
			if f.pos >= len(buf) {
				return ends, nil
			}
			done, err := f.element(buf)
			if err != nil || !done {
				return ends, err
			}
			if f.body > 0 {
				continue
			}
		}
		if err := f.checkSize(f.pos); err != nil {
			return ends, err
		}
		// An element ended: close every array it completes.
		for f.depth > 0 {
			f.left[f.depth-1]--
			if f.left[f.depth-1] > 0 {
				break
			}
			f.depth--
		}
		if f.depth == 0 {
			ends = append(ends, f.pos)
			f.start = f.pos
			if f.mark {
				f.markEnd()
			}
		}
	}
}

// digits reads the decimal number of a header line "<type><digits>\r\n"
// at buf[at:], whole in buf: n and the offset after its CRLF, ok false
// for anything else (a null, a line cut short or malformed: element
// sorts those out). It accepts what parseLen does but "-1".
func digits(buf []byte, at int) (n, next int, ok bool) {
	i := at + 1
	for ; i < len(buf) && buf[i]-'0' <= 9 && i-at <= 18; i++ {
		n = n*10 + int(buf[i]-'0')
	}
	if i == at+1 || i+1 >= len(buf) || buf[i] != '\r' || buf[i+1] != '\n' {
		return 0, 0, false
	}
	return n, i + 2, true
}

// fast is advance for the common case, in a tight loop: bulk strings
// whole in buf, header and payload, and headers of non-empty arrays,
// well-formed and within the limits. It stops, having changed nothing of
// the element at f.pos, at anything else (a null, a scalar, a line cut
// short, a malformed one), which advance then takes the long way (and
// reports). Most elements of big replies (XRANGE's fields and values)
// are such bulk strings.
func (f *framer) fast(buf []byte, ends []int) []int {
	pos, depth, start, limit := f.pos, f.depth, f.start, f.max
	for pos < len(buf) {
		typ := buf[pos]
		if typ != redcon.Bulk && typ != redcon.Array {
			break
		}
		n, i, ok := digits(buf, pos)
		if !ok || n > limit {
			break
		}
		if typ == redcon.Array {
			if n == 0 || depth == maxDepth || i-start > limit {
				break
			}
			if f.mark {
				f.markArray(n)
			}
			f.left[depth] = n
			depth++
			pos = i
			continue
		}
		if n > len(buf)-i-2 {
			break
		}
		end := i + n + 2
		if end-start > limit || buf[end-2] != '\r' || buf[end-1] != '\n' {
			break
		}
		if f.mark {
			f.markBulk(i-start, n)
		}
		pos = end
		// An element ended: close every array it completes.
		for depth > 0 {
			f.left[depth-1]--
			if f.left[depth-1] > 0 {
				break
			}
			depth--
		}
		if depth == 0 {
			ends = append(ends, pos)
			start = pos
			if f.mark {
				f.markEnd()
			}
		}
	}
	f.pos, f.depth, f.start = pos, depth, start
	return ends
}

func (f *framer) checkSize(end int) error {
	if end-f.start > f.max {
		return fmt.Errorf("reply larger than MaxReplyBytes (%d)", f.max)
	}
	return nil
}

// element parses header lines from f.pos, pushing a level for each
// non-empty array header, until it reaches a scalar, a bulk header (its
// payload, f.body bytes, then follows), a null or an empty array: then
// done is true. done is false when the input ends mid-line.
func (f *framer) element(buf []byte) (done bool, err error) {
	for {
		if f.pos >= len(buf) {
			return false, nil
		}
		typ := buf[f.pos]
		switch typ {
		case redcon.String, redcon.Error, redcon.Integer, redcon.Bulk, redcon.Array:
		default:
			return false, &errProtocol{fmt.Sprintf("unexpected byte %q at start of reply", typ)}
		}
		if f.scan <= f.pos {
			f.scan = f.pos + 1
		}
		nl := bytes.IndexByte(buf[f.scan:], '\n')
		if nl < 0 {
			f.scan = len(buf)
			if typ != redcon.String && typ != redcon.Error && len(buf)-f.pos > maxHeader {
				return false, &errProtocol{"header line too long"}
			}
			return false, f.checkSize(len(buf))
		}
		eol := f.scan + nl // index of '\n'
		if eol-1 <= f.pos || buf[eol-1] != '\r' {
			return false, &errProtocol{"line not terminated by CRLF"}
		}
		line := buf[f.pos+1 : eol-1]
		next := eol + 1
		switch typ {
		case redcon.String, redcon.Error:
			f.pos = next
			f.unmarked = true
			return true, nil
		case redcon.Integer:
			if !validInt(line) {
				return false, &errProtocol{fmt.Sprintf("bad integer %q", line)}
			}
			f.pos = next
			f.unmarked = true
			return true, nil
		}
		n, ok := parseLen(line)
		if !ok {
			return false, &errProtocol{fmt.Sprintf("bad length %q", line)}
		}
		if n > f.max {
			return false, fmt.Errorf("reply larger than MaxReplyBytes (%d): length %d", f.max, n)
		}
		f.pos = next
		if typ == redcon.Bulk {
			if n >= 0 {
				f.body = n + 2
				if err := f.checkSize(f.pos + f.body); err != nil {
					return false, err
				}
				if f.mark {
					f.markBulk(f.pos-f.start, n)
				}
			} else {
				f.unmarked = true
			}
			return true, nil
		}
		if n <= 0 { // null or empty array
			f.unmarked = true
			return true, nil
		}
		if f.depth == maxDepth {
			return false, &errProtocol{fmt.Sprintf("arrays nested deeper than %d", maxDepth)}
		}
		if f.mark {
			f.markArray(n)
		}
		f.left[f.depth] = n
		f.depth++
		if err := f.checkSize(f.pos); err != nil {
			return false, err
		}
	}
}

// validInt accepts what Redis sends for integers: -?[0-9]{1,20}.
func validInt(b []byte) bool {
	if len(b) > 0 && b[0] == '-' {
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 20 {
		return false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// parseLen accepts "-1" (null) or a non-negative decimal short enough not
// to overflow.
func parseLen(b []byte) (int, bool) {
	if len(b) == 2 && b[0] == '-' && b[1] == '1' {
		return -1, true
	}
	if len(b) == 0 || len(b) > 18 {
		return 0, false
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// readReplies reads exactly want top-level replies from r into rs, with
// the Marks of their elements when mark is set. Bytes
// past the last reply are reported by trailing=true (the caller must not
// reuse the connection: it is out of step).
//
// With carry set, the bytes in *carry (read earlier past another
// pipeline's replies) come first, and the bytes past the last reply are
// kept in *carry for the next read instead of being reported: the
// connection has more pipelines in flight.
func readReplies(r io.Reader, rs *Replies, want, maxReply int, carry *[]byte, mark bool) (trailing bool, err error) {
	rs.buf = rs.buf[:0]
	rs.ends = rs.ends[:0]
	rs.list = rs.list[:0]
	f := &rs.fr
	f.reset(maxReply, mark)
	if carry != nil && len(*carry) > 0 {
		rs.grow(len(*carry) + minRead)
		rs.buf = append(rs.buf, *carry...)
		*carry = (*carry)[:0]
		if rs.ends, err = f.advance(rs.buf, rs.ends); err != nil {
			return false, err
		}
	}
	for len(rs.ends) < want {
		free := cap(rs.buf) - len(rs.buf)
		if need := min(f.need(len(rs.buf)), maxPregrow); free < minRead || free < need {
			rs.grow(max(minRead, need))
		}
		n, rerr := r.Read(rs.buf[len(rs.buf):cap(rs.buf)])
		if n > 0 {
			rs.buf = rs.buf[:len(rs.buf)+n]
			if rs.ends, err = f.advance(rs.buf, rs.ends); err != nil {
				return false, err
			}
		}
		if rerr != nil && len(rs.ends) < want {
			if rerr == io.EOF {
				if len(rs.buf) == 0 {
					return false, fmt.Errorf("connection closed by server: %w", io.EOF)
				}
				return false, fmt.Errorf("connection closed mid-reply: %w", io.ErrUnexpectedEOF)
			}
			return false, rerr
		}
	}
	last := 0
	if want > 0 {
		last = rs.ends[want-1]
	}
	trailing = len(rs.ends) > want || len(rs.buf) > last
	if carry != nil {
		*carry = append(*carry, rs.buf[last:]...)
		rs.buf, trailing = rs.buf[:last], false
	}
	rs.ends = rs.ends[:want]
	if cap(rs.list) < want {
		rs.list = make([]Reply, 0, max(want, 2*cap(rs.list)))
	}
	start := 0
	for _, end := range rs.ends {
		frame := rs.buf[start:end:end]
		var n int
		var resp redcon.RESP
		if frame[0] == '*' {
			n, resp = shallowArray(frame)
		} else {
			n, resp = redcon.ReadNextRESP(frame)
		}
		if n != len(frame) {
			return false, fmt.Errorf("%w at %q", errDisagree, frame[:min(len(frame), 64)])
		}
		rs.list = append(rs.list, Reply{resp})
		start = end
	}
	return trailing, nil
}

// shallowArray is redcon.ReadNextRESP for an array frame the framer
// accepted, reading only its header: the framer has checked the elements
// already, and walking them again cost as much as the framer on big
// XRANGE replies (a rebuild's). FuzzReadReply checks it against
// ReadNextRESP.
func shallowArray(frame []byte) (int, redcon.RESP) {
	i := bytes.IndexByte(frame, '\n')
	if i < 3 || frame[i-1] != '\r' {
		return 0, redcon.RESP{}
	}
	count, err := strconv.Atoi(string(frame[1 : i-1]))
	if err != nil {
		return 0, redcon.RESP{}
	}
	return len(frame), redcon.RESP{Type: redcon.Array, Raw: frame, Data: frame[i+1:], Count: count}
}
