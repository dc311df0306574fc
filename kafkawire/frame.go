package kafkawire

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// frameChunk is the first allocation for a frame larger than the read
// buffer; it then doubles as bytes arrive.
const frameChunk = 64 << 10

// readFrame reads a frame body of size bytes. Memory follows the bytes
// that have arrived, not the size the client announced: a client that
// announces 100 MB and sends nothing costs nothing, one that sends half
// costs about that. touch is called whenever bytes arrive.
func readFrame(br *bufio.Reader, size int, touch func()) ([]byte, error) {
	if size <= br.Size() {
		body := make([]byte, size)
		_, err := io.ReadFull(br, body)
		return body, err
	}
	var body []byte
	for len(body) < size {
		if len(body) == cap(body) {
			// Wait for bytes before making room for them.
			if _, err := br.Peek(1); err != nil {
				return nil, unexpectedEOF(err)
			}
			body = slices.Grow(body, min(size-len(body), max(len(body), frameChunk)))
		}
		n, err := br.Read(body[len(body):min(cap(body), size)])
		body = body[:len(body)+n]
		if n > 0 {
			touch()
		}
		if err != nil && len(body) < size {
			return nil, unexpectedEOF(err)
		}
	}
	return body, nil
}

func unexpectedEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// header is a decoded request header.
type header struct {
	key, version int16
	correlation  int32
	clientID     string
	flexible     bool
}

// flexibleResponse says whether the response header carries tagged
// fields; ApiVersions never does, so that any client can read it.
func (h header) flexibleResponse() bool { return h.flexible && kmsg.Key(h.key) != kmsg.ApiVersions }

// parseRequest decodes the request header and, when the API and version
// are known to kmsg, the body. req is nil when kmsg does not know them.
func parseRequest(b []byte) (header, kmsg.Request, error) {
	var h header
	if len(b) < 10 {
		return h, nil, fmt.Errorf("request of %d bytes is shorter than a header", len(b))
	}
	h.key = int16(binary.BigEndian.Uint16(b))
	h.version = int16(binary.BigEndian.Uint16(b[2:]))
	h.correlation = int32(binary.BigEndian.Uint32(b[4:]))
	idLen := int16(binary.BigEndian.Uint16(b[8:]))
	b = b[10:]
	if idLen > 0 {
		if int(idLen) > len(b) {
			return h, nil, fmt.Errorf("client id length %d overruns request", idLen)
		}
		h.clientID = string(b[:idLen])
		b = b[idLen:]
	}
	req := kmsg.RequestForKey(h.key)
	if req == nil || h.version < 0 || h.version > req.MaxVersion() {
		return h, nil, nil
	}
	req.SetVersion(h.version)
	h.flexible = req.IsFlexible()
	if h.flexible {
		rest, err := skipTags(b)
		if err != nil {
			return h, nil, fmt.Errorf("request header tags: %w", err)
		}
		b = rest
	}
	if err := req.ReadFrom(b); err != nil {
		return h, nil, fmt.Errorf("decode %s v%d: %w", kmsg.NameForKey(h.key), h.version, err)
	}
	return h, req, nil
}

// skipTags skips a tagged-field section.
func skipTags(b []byte) ([]byte, error) {
	n, w := binary.Uvarint(b)
	if w <= 0 {
		return nil, errors.New("bad tag count")
	}
	b = b[w:]
	for i := uint64(0); i < n; i++ {
		_, w := binary.Uvarint(b)
		if w <= 0 {
			return nil, errors.New("bad tag")
		}
		b = b[w:]
		size, w := binary.Uvarint(b)
		if w <= 0 || size > uint64(len(b)-w) {
			return nil, errors.New("bad tag size")
		}
		b = b[w+int(size):]
	}
	return b, nil
}

// encodeResponse frames a response: size, correlation id, an empty tag
// section for flexible headers, then the body.
func encodeResponse(correlation int32, flexible bool, r kmsg.Response) []byte {
	return appendResponse(make([]byte, 0, responseSizeHint(r)), correlation, flexible, r)
}

// appendResponse is encodeResponse into buf, which must be empty.
func appendResponse(buf []byte, correlation int32, flexible bool, r kmsg.Response) []byte {
	buf = append(buf, 0, 0, 0, 0, 0, 0, 0, 0)
	binary.BigEndian.PutUint32(buf[4:], uint32(correlation))
	if flexible {
		buf = append(buf, 0)
	}
	buf = r.AppendTo(buf)
	binary.BigEndian.PutUint32(buf, uint32(len(buf)-4))
	return buf
}

// responseSizeHint is the buffer to encode r into: a fetch answer's
// record batches and room for the rest, so that megabytes of batches are
// copied once rather than into buffers doubling from 256 bytes.
func responseSizeHint(r kmsg.Response) int {
	fr, ok := r.(*kmsg.FetchResponse)
	if !ok {
		return 256
	}
	n := 256
	for i := range fr.Topics {
		t := &fr.Topics[i]
		n += 64 + len(t.Topic)
		for j := range t.Partitions {
			p := &t.Partitions[j]
			n += 96 + len(p.RecordBatches) + 32*len(p.AbortedTransactions)
		}
	}
	return n
}
