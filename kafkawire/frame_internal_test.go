package kafkawire

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"runtime"
	"testing"
	"testing/iotest"
)

// chunky hands out its data in reads of random sizes, as a network does.
type chunky struct {
	data []byte
	rng  *rand.Rand
}

func (c *chunky) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := min(len(p), len(c.data), 1+c.rng.IntN(200<<10))
	copy(p, c.data[:n])
	c.data = c.data[n:]
	return n, nil
}

// readFrame returns exactly the frame's bytes, however they arrive.
func TestReadFrame(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, size := range []int{0, 1, 100, readBufSize, readBufSize + 1, frameChunk + 7, 3 << 20} {
		frame := make([]byte, size)
		for i := range frame {
			frame[i] = byte(rng.IntN(256))
		}
		next := []byte("next frame")
		br := bufio.NewReaderSize(&chunky{data: append(bytes.Clone(frame), next...), rng: rng}, readBufSize)
		touched := 0
		got, err := readFrame(br, size, func() { touched++ })
		if err != nil || !bytes.Equal(got, frame) {
			t.Fatalf("size %d: %d bytes, %v", size, len(got), err)
		}
		if size > readBufSize && (touched == 0 || cap(got) > 2*size) {
			t.Fatalf("size %d: touched %d times, capacity %d", size, touched, cap(got))
		}
		rest, _ := io.ReadAll(br)
		if !bytes.Equal(rest, next) {
			t.Fatalf("size %d: read into the next frame: %q left", size, rest)
		}
	}
}

// A frame announced as 100 MB of which 100 KB arrive costs about what
// arrived, and the early end is io.ErrUnexpectedEOF.
func TestReadFrameAllocatesWhatArrives(t *testing.T) {
	const announced, sent = 100 << 20, 100 << 10
	br := bufio.NewReaderSize(iotest.HalfReader(bytes.NewReader(make([]byte, sent))), readBufSize)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := readFrame(br, announced, func() {})
	runtime.ReadMemStats(&after)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("error %v, want io.ErrUnexpectedEOF", err)
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	if alloc > 4*sent {
		t.Fatalf("allocated %d KiB for %d KiB received of a %d MiB frame", alloc>>10, sent>>10, announced>>20)
	}
	t.Logf("a %d MiB frame cut off after %d KiB: %d KiB allocated", announced>>20, sent>>10, alloc>>10)
}
