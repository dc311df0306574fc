package resp

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/tidwall/redcon"
)

// read parses want replies from in, fed one byte at a time when oneByte,
// to exercise resumption at every possible split point.
func read(in string, want, maxReply int, oneByte bool) (*Replies, bool, error) {
	var r io.Reader = strings.NewReader(in)
	if oneByte {
		r = iotest.OneByteReader(r)
	}
	rs := &Replies{}
	trailing, err := readReplies(r, rs, want, maxReply, nil, false)
	return rs, trailing, err
}

// replyShapes is one reply of every kind, nested arrays included; the
// reader's and the walker's shape tests read it.
const replyShapes = "+OK\r\n" +
	"-WRONGTYPE Operation against a key\r\n" +
	":-42\r\n" +
	"$5\r\na\r\n\x00b\r\n" +
	"$0\r\n\r\n" +
	"$-1\r\n" +
	"*0\r\n" +
	"*-1\r\n" +
	"*2\r\n*2\r\n$2\r\nid\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n:7\r\n"

func TestReadRepliesShapes(t *testing.T) {
	in := replyShapes
	for _, oneByte := range []bool{false, true} {
		rs, trailing, err := read(in, 9, 1<<20, oneByte)
		if err != nil || trailing {
			t.Fatalf("oneByte=%v: err %v trailing %v", oneByte, err, trailing)
		}
		if rs.Len() != 9 {
			t.Fatalf("got %d replies", rs.Len())
		}
		if s := string(rs.At(0).Bytes()); s != "OK" {
			t.Errorf("simple string %q", s)
		}
		var re *Error
		if !errors.As(rs.At(1).Err(), &re) || re.Prefix != "WRONGTYPE" || re.Msg != "Operation against a key" {
			t.Errorf("error reply %#v", rs.At(1).Err())
		}
		if v, err := rs.At(2).Int(); err != nil || v != -42 {
			t.Errorf("integer %d %v", v, err)
		}
		if b := rs.At(3).Bytes(); string(b) != "a\r\n\x00b" {
			t.Errorf("bulk %q", b)
		}
		if r := rs.At(4); r.IsNil() || r.Bytes() == nil || len(r.Bytes()) != 0 {
			t.Errorf("empty bulk: nil=%v bytes=%#v", r.IsNil(), r.Bytes())
		}
		if r := rs.At(5); !r.IsNil() || r.Bytes() != nil || r.IsNilArray() {
			t.Errorf("null bulk: nil=%v bytes=%#v", r.IsNil(), r.Bytes())
		}
		if r := rs.At(6); r.IsNil() || r.Len() != 0 {
			t.Errorf("empty array: nil=%v len=%d", r.IsNil(), r.Len())
		}
		if r := rs.At(7); !r.IsNil() || !r.IsNilArray() || r.Len() != 0 || len(r.Elems(nil)) != 0 {
			t.Errorf("null array: nil=%v len=%d", r.IsNil(), r.Len())
		}
		outer := rs.At(8).Elems(nil)
		if len(outer) != 2 || outer[0].Len() != 2 {
			t.Fatalf("nested array %v", outer)
		}
		entry := outer[0].Elems(nil)
		fv := entry[1].Elems(nil)
		if string(entry[0].Bytes()) != "id" || string(fv[0].Bytes()) != "f" || string(fv[1].Bytes()) != "v" {
			t.Errorf("nested contents %q %q %q", entry[0].Bytes(), fv[0].Bytes(), fv[1].Bytes())
		}
		if v, _ := outer[1].Int(); v != 7 {
			t.Errorf("nested int %d", v)
		}
	}
}

func TestReadRepliesErrors(t *testing.T) {
	tests := []struct {
		name, in string
		max      int
		want     string
	}{
		{"garbage", "HTTP/1.1 400\r\n", 1 << 20, "unexpected byte 'H'"},
		{"bare LF", "+OK\n", 1 << 20, "CRLF"},
		{"bad int", ":12a\r\n", 1 << 20, "bad integer"},
		{"bad len", "$abc\r\n", 1 << 20, "bad length"},
		{"neg len", "$-2\r\n", 1 << 20, "bad length"},
		{"plus len", "*+1\r\n:1\r\n", 1 << 20, "bad length"},
		{"bulk no CRLF", "$3\r\nabcXY", 1 << 20, "not terminated"},
		{"overflow len", "$9223372036854775807\r\nab", 1 << 20, "bad length"},
		{"too large bulk", "$2000\r\n", 1000, "MaxReplyBytes"},
		{"too large array", "*2000\r\n", 1000, "MaxReplyBytes"},
		{"too large line", "+" + strings.Repeat("x", 2000), 1000, "MaxReplyBytes"},
		{"too large total", "*3\r\n$400\r\n" + strings.Repeat("x", 400) + "\r\n$400\r\n" + strings.Repeat("x", 400) + "\r\n$400\r\n", 1000, "MaxReplyBytes"},
		{"too large whole", "*3" + strings.Repeat("\r\n$400\r\n"+strings.Repeat("x", 400), 3) + "\r\n", 1000, "MaxReplyBytes"},
		{"bulk bad CRLF whole", "*2\r\n$1\r\nab\r\n$1\r\nc\r\n", 1 << 20, "not terminated"},
		{"long header", "$" + strings.Repeat("1", 40), 1 << 20, "header line too long"},
		{"deep", strings.Repeat("*1\r\n", maxDepth+1) + ":1\r\n", 1 << 20, "nested deeper"},
		{"truncated", "*2\r\n:1\r\n", 1 << 20, "closed mid-reply"},
		{"empty", "", 1 << 20, "closed by server"},
	}
	for _, tt := range tests {
		for _, oneByte := range []bool{false, true} {
			_, _, err := read(tt.in, 1, tt.max, oneByte)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("%s (oneByte=%v): error %v, want %q", tt.name, oneByte, err, tt.want)
			}
		}
	}
	// Nesting up to the limit is fine.
	if _, _, err := read(strings.Repeat("*1\r\n", maxDepth)+":1\r\n", 1, 1<<20, false); err != nil {
		t.Errorf("depth %d: %v", maxDepth, err)
	}
}

func TestReadRepliesTrailing(t *testing.T) {
	rs, trailing, err := read("+OK\r\n+EXTRA\r\n", 1, 1<<20, false)
	if err != nil || !trailing || rs.Len() != 1 {
		t.Fatalf("err %v trailing %v len %d", err, trailing, rs.Len())
	}
}

// TestReadRepliesLarge reads a reply far bigger than one read chunk, split
// at awkward places, and checks the buffer grew geometrically.
func TestReadRepliesLarge(t *testing.T) {
	var b []byte
	const n = 50000
	b = redcon.AppendArray(b, n)
	for i := range n {
		b = redcon.AppendBulkString(b, strings.Repeat("v", i%97))
	}
	r := &chunkReader{data: b, sizes: []int{1, 3, 7000, 1, 65536, 13}}
	rs := &Replies{}
	if _, err := readReplies(r, rs, 1, 1<<30, nil, false); err != nil {
		t.Fatal(err)
	}
	i := 0
	rs.At(0).ForEach(func(e Reply) bool {
		if len(e.Bytes()) != i%97 {
			t.Fatalf("element %d has %d bytes", i, len(e.Bytes()))
		}
		i++
		return true
	})
	if i != n {
		t.Fatalf("%d elements", i)
	}
}

type chunkReader struct {
	data  []byte
	sizes []int
	i     int
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := min(len(p), len(r.data), r.sizes[r.i%len(r.sizes)])
	r.i++
	copy(p, r.data[:n])
	r.data = r.data[n:]
	return n, nil
}

func TestErrorParse(t *testing.T) {
	tests := []struct{ in, prefix, msg string }{
		{"WRONGTYPE Operation against a key", "WRONGTYPE", "Operation against a key"},
		{"ERR", "ERR", ""},
		{"NOSCRIPT_X2 y", "NOSCRIPT_X2", "y"},
		{"lower case text", "", "lower case text"},
		{"", "", ""},
	}
	for _, tt := range tests {
		e := parseError([]byte(tt.in))
		if e.Prefix != tt.prefix || e.Msg != tt.msg || e.Error() != tt.in {
			t.Errorf("parseError(%q) = %+v (%q)", tt.in, e, e.Error())
		}
	}
}

func TestPipelineEncoding(t *testing.T) {
	var p Pipeline
	p.Cmd("SET", []byte("k\r\n"), 42, int64(-1), uint64(7))
	p.Array(2)
	p.String("GET")
	p.Int(5)
	want := "*5\r\n$3\r\nSET\r\n$3\r\nk\r\n\r\n$2\r\n42\r\n$2\r\n-1\r\n$1\r\n7\r\n*2\r\n$3\r\nGET\r\n$1\r\n5\r\n"
	if string(p.buf) != want || p.Len() != 2 || p.Err() != nil {
		t.Fatalf("encoded %q len %d err %v", p.buf, p.Len(), p.Err())
	}
	p.Reset()
	p.Array(2)
	p.String("GET")
	if err := p.Err(); !errors.Is(err, errPipeline) {
		t.Fatalf("short command: %v", err)
	}
	p.Reset()
	p.Cmd("SET", 1.5)
	if err := p.Err(); err == nil || !strings.Contains(err.Error(), "float64") {
		t.Fatalf("unsupported type: %v", err)
	}
	p.Reset()
	p.String("x")
	if p.Err() == nil {
		t.Fatal("argument without Array accepted")
	}
	p.Reset()
	p.Cmd()
	if p.Err() == nil {
		t.Fatal("empty command accepted")
	}
}

// FuzzReadReply feeds arbitrary bytes to the reply reader: it must not
// panic, hang or grow memory past the reply limit, and whatever it accepts
// must be walkable and agree with redcon's parser.
func FuzzReadReply(f *testing.F) {
	for _, s := range []string{
		"+OK\r\n", "-ERR x\r\n", ":0\r\n", ":-9223372036854775808\r\n",
		"$3\r\nabc\r\n", "$0\r\n\r\n", "$-1\r\n", "*-1\r\n", "*0\r\n",
		"*2\r\n$1\r\na\r\n*1\r\n:1\r\n", "*3\r\n$1\r\na\r\n",
		"$9223372036854775807\r\n", "$9223372036854775790\r\nab",
		"*9223372036854775807\r\n", ":\r\n", ":-\r\n", "$-0\r\n", "*+1\r\n:1\r\n",
		"+OK\n", "\r\n", "hello", strings.Repeat("*1\r\n", 100),
		"*1\r\n*-1\r\n+a\r\n-b\r\n", "$2\r\nab\r\n$2\r\ncd\r\n",
	} {
		f.Add([]byte(s), uint8(1), false)
		f.Add([]byte(s), uint8(2), true)
	}
	// Log entries, whole and cut short: the framer's fast path; with
	// marks, and two replies.
	entries := logEntries(3)
	for _, n := range []int{len(entries), len(entries) - 1, len(entries) / 2, 40} {
		f.Add(entries[:n], uint8(0), false)
		f.Add(entries[:n], uint8(4), n%2 == 0)
	}
	f.Add(append(logEntries(2), "*2\r\n$1\r\na\r\n:1\r\n"...), uint8(5), false)
	f.Fuzz(func(t *testing.T, data []byte, want uint8, oneByte bool) {
		const maxReply = 1 << 16
		n := 1 + int(want%4)
		mark := want&4 != 0
		var r io.Reader = bytes.NewReader(data)
		if oneByte {
			r = iotest.OneByteReader(r)
		}
		rs := &Replies{}
		_, err := readReplies(r, rs, n, maxReply, nil, mark)
		if cap(rs.buf) > 4*(len(data)+minRead) {
			t.Fatalf("buffer grew to %d for %d input bytes", cap(rs.buf), len(data))
		}
		if err != nil {
			if errors.Is(err, errDisagree) {
				t.Fatal(err)
			}
			return
		}
		if rs.Len() != n {
			t.Fatalf("%d replies, want %d", rs.Len(), n)
		}
		total := 0
		for i := range rs.Len() {
			r := rs.At(i)
			total += len(r.Raw)
			if len(r.Raw) > maxReply {
				t.Fatalf("reply of %d bytes over the limit", len(r.Raw))
			}
			walk(t, r, 0)
			if m := rs.Marks(i); mark || m != nil {
				checkMarks(t, r.Raw, m)
			}
			// Arrays are decoded from their header only: as redcon would.
			if n, deep := redcon.ReadNextRESP(r.Raw); n != len(r.Raw) || deep.Type != r.Type || deep.Count != r.Count ||
				!bytes.Equal(deep.Data, r.Data) || len(deep.Data) != len(r.Data) {
				t.Fatalf("reply %q decoded as %+v, redcon says %+v", r.Raw, r.RESP, deep)
			}
		}
		if !bytes.HasPrefix(data, rs.buf[:total]) {
			t.Fatal("replies do not tile the input")
		}
	})
}

// checkMarks checks the marks of a reply against a walk of it: one per
// element, in order, saying what the Walker reads; none (nil) exactly
// when the reply has a scalar, a null or an empty array.
func checkMarks(t *testing.T, raw []byte, marks []Mark) {
	t.Helper()
	w := NewWalker(raw)
	var want []Value
	markable := true
	for due := 1; due > 0; due-- {
		v, err := w.Next()
		if err != nil {
			t.Fatalf("walk of a framed reply %q: %v", raw, err)
		}
		due += v.Len
		want = append(want, v)
		markable = markable && (v.Kind == KindBulk || v.Kind == KindArray && v.Len > 0)
	}
	if !markable {
		if marks != nil {
			t.Fatalf("%d marks for %q, which has elements without", len(marks), raw)
		}
		return
	}
	if len(marks) != len(want) {
		t.Fatalf("%d marks for the %d elements of %q", len(marks), len(want), raw)
	}
	for i, v := range want {
		m := marks[i]
		if m.IsArray() != (v.Kind == KindArray) || m.IsArray() && m.Len() != v.Len ||
			!m.IsArray() && (!bytes.Equal(m.Bulk(raw), v.Data) || m.Len() != len(v.Data) || cap(m.Bulk(raw)) != len(v.Data) ||
				len(v.Data) > 0 && &m.Bulk(raw)[0] != &v.Data[0]) {
			t.Fatalf("mark %d of %q: array %v len %d bulk %q; the walk says %+v", i, raw, m.IsArray(), m.Len(), m.Bulk(raw), v)
		}
	}
}

// Marks are recorded when asked for, per reply, whether a reply comes in
// one read or byte by byte, and a reply with elements a Mark cannot say
// has none.
func TestReadRepliesMarks(t *testing.T) {
	in := string(logEntries(20)) + "*2\r\n$1\r\na\r\n:1\r\n" + "$3\r\nabc\r\n" + "*1\r\n*0\r\n" + "-ERR x\r\n" + string(logEntries(1))
	for _, oneByte := range []bool{false, true} {
		var r io.Reader = strings.NewReader(in)
		if oneByte {
			r = iotest.OneByteReader(r)
		}
		rs := &Replies{}
		if _, err := readReplies(r, rs, 6, 1<<20, nil, true); err != nil {
			t.Fatal(err)
		}
		for i, want := range []int{1 + 20*11, 0, 1, 0, 0, 1 + 11} {
			m := rs.Marks(i)
			if len(m) != want {
				t.Fatalf("oneByte %v: reply %d has %d marks, want %d", oneByte, i, len(m), want)
			}
			if want > 0 {
				checkMarks(t, rs.At(i).Raw, m)
			}
		}
		// Not asked for: none.
		if _, err := readReplies(strings.NewReader(in), rs, 6, 1<<20, nil, false); err != nil {
			t.Fatal(err)
		}
		for i := range 6 {
			if m := rs.Marks(i); m != nil {
				t.Fatalf("reply %d has %d marks, none asked for", i, len(m))
			}
		}
	}
}

func walk(t *testing.T, r Reply, depth int) {
	if depth > maxDepth {
		t.Fatalf("depth %d", depth)
	}
	_ = r.Err()
	_, _ = r.Int()
	_ = r.Bytes()
	if r.IsNil() && (r.Len() != 0 || r.Bytes() != nil) {
		t.Fatalf("nil reply with len %d bytes %q", r.Len(), r.Bytes())
	}
	elems := r.Elems(nil)
	if len(elems) != r.Len() {
		t.Fatalf("Elems %d, Len %d", len(elems), r.Len())
	}
	_ = r.clone()
	for _, e := range elems {
		walk(t, e, depth+1)
	}
}

// logEntries is an XRANGE reply of n entries shaped as korvet's log
// entries: a timestamp, a 16-byte key, a 256-byte value and one header.
func logEntries(n int) []byte {
	var b []byte
	b = fmt.Appendf(b, "*%d\r\n", n)
	val := strings.Repeat("v", 256)
	for i := range n {
		id := fmt.Sprintf("%d-0", 1000000+i)
		b = fmt.Appendf(b, "*2\r\n$%d\r\n%s\r\n*8\r\n", len(id), id)
		for _, f := range []string{"__ts", "1765000000000", "__key", fmt.Sprintf("key-%012d", i), "__value", val, "__header.h", "v"} {
			b = fmt.Appendf(b, "$%d\r\n%s\r\n", len(f), f)
		}
	}
	return b
}

// BenchmarkReadXRANGE measures framing one XRANGE reply of 1000 log
// entries of 256-byte values (a rebuild's read), arriving 64 KiB at a
// time, without and with Marks.
func BenchmarkReadXRANGE(b *testing.B) {
	raw := logEntries(1000)
	for _, mark := range []bool{false, true} {
		b.Run(map[bool]string{false: "plain", true: "marks"}[mark], func(b *testing.B) {
			rs := &Replies{}
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := readReplies(&chunkReader{data: raw, sizes: []int{64 << 10}}, rs, 1, DefaultMaxReplyBytes, nil, mark); err != nil || rs.At(0).Len() != 1000 {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*1000)/b.Elapsed().Seconds(), "entries/s")
		})
	}
}
