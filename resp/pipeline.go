package resp

import (
	"fmt"
	"strconv"

	"github.com/tidwall/redcon"
)

// Pipeline is a reusable buffer of encoded commands, sent by Exec in one
// write. The zero value is ready to use. Array plus Bulk/String/Int encode
// without allocating once the buffer has grown.
type Pipeline struct {
	buf     []byte
	n       int // commands
	pending int // arguments still owed to the last Array
	err     error
	mark    bool // MarkElements
}

// Reset empties the pipeline, keeping its buffer.
func (p *Pipeline) Reset() {
	p.buf = p.buf[:0]
	p.n = 0
	p.pending = 0
	p.err = nil
	p.mark = false
}

// MarkElements asks Exec to record where the elements of each reply are
// as it frames them (Replies.Marks), for a caller that would otherwise
// parse a big reply again to find them.
func (p *Pipeline) MarkElements() { p.mark = true }

// Cap is the size of the pipeline's buffer.
func (p *Pipeline) Cap() int { return cap(p.buf) }

// Len returns the number of commands.
func (p *Pipeline) Len() int { return p.n }

// Err returns the first encoding mistake (an unsupported argument type, or
// an Array whose arguments were not all given). Exec refuses to send a
// pipeline with an error, since it would desynchronise the connection.
func (p *Pipeline) Err() error {
	if p.err == nil && p.pending != 0 {
		return fmt.Errorf("%w: command %d is missing %d of its arguments", errPipeline, p.n, p.pending)
	}
	return p.err
}

// Array begins a command of n arguments, to be given by n calls of Bulk,
// String, Int or Uint.
func (p *Pipeline) Array(n int) {
	if p.pending != 0 && p.err == nil {
		p.err = fmt.Errorf("%w: command %d is missing %d of its arguments", errPipeline, p.n, p.pending)
	}
	if n <= 0 && p.err == nil {
		p.err = fmt.Errorf("%w: command %d has %d arguments", errPipeline, p.n+1, n)
	}
	p.buf = redcon.AppendArray(p.buf, n)
	p.n++
	p.pending = n
}

func (p *Pipeline) arg() {
	if p.pending == 0 && p.err == nil {
		p.err = fmt.Errorf("%w: argument outside a command (call Array first)", errPipeline)
	}
	p.pending--
}

// Bulk appends a binary-safe argument.
func (p *Pipeline) Bulk(b []byte) {
	p.arg()
	p.buf = redcon.AppendBulk(p.buf, b)
}

// String appends a string argument.
func (p *Pipeline) String(s string) {
	p.arg()
	p.buf = redcon.AppendBulkString(p.buf, s)
}

// Int appends an integer argument in decimal.
func (p *Pipeline) Int(v int64) {
	p.arg()
	var tmp [20]byte
	p.buf = redcon.AppendBulk(p.buf, strconv.AppendInt(tmp[:0], v, 10))
}

// Uint appends an unsigned integer argument in decimal.
func (p *Pipeline) Uint(v uint64) {
	p.arg()
	var tmp [20]byte
	p.buf = redcon.AppendBulk(p.buf, strconv.AppendUint(tmp[:0], v, 10))
}

// Cmd appends one command. Arguments may be string, []byte, int, int32,
// int64, uint, uint32 or uint64.
func (p *Pipeline) Cmd(args ...any) {
	p.Array(len(args))
	for _, a := range args {
		switch v := a.(type) {
		case string:
			p.String(v)
		case []byte:
			p.Bulk(v)
		case int:
			p.Int(int64(v))
		case int64:
			p.Int(v)
		case int32:
			p.Int(int64(v))
		case uint64:
			p.Uint(v)
		case uint:
			p.Uint(uint64(v))
		case uint32:
			p.Uint(uint64(v))
		default:
			if p.err == nil {
				p.err = fmt.Errorf("%w: command %d: unsupported argument type %T", errPipeline, p.n, a)
			}
			p.String("") // keep the encoding well-formed
		}
	}
}
