package engine

import (
	"errors"
	"math"
	"reflect"
	"testing"
)

// After sequence MaxInt32 a producer goes on at 0, as Kafka's do.
func TestProducerSequenceWraps(t *testing.T) {
	var s *producerState
	s = s.with(0, math.MaxInt32-1, math.MaxInt32, 100)
	if dup, err := s.check(0, 0, 4); err != nil || dup != -1 {
		t.Fatalf("batch after MaxInt32: dup %d, err %v; want an append", dup, err)
	}
	if _, err := s.check(0, 1, 4); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("gap after MaxInt32: %v", err)
	}
	if dup, err := s.check(0, math.MaxInt32-1, math.MaxInt32); err != nil || dup != 100 {
		t.Fatalf("retry of the batch ending at MaxInt32: dup %d, err %v", dup, err)
	}
}

// The state's encoding in the meta hash reads back as it was written.
func TestProducerStateEncoding(t *testing.T) {
	var s *producerState
	for i := range int32(7) {
		s = s.with(4, 3*i, 3*i+2, int64(10*i))
	}
	if len(s.batches) != producerBatches {
		t.Fatalf("%d batches kept, want %d", len(s.batches), producerBatches)
	}
	enc := s.encode()
	if enc != "4;6,8,20;9,11,30;12,14,40;15,17,50;18,20,60" {
		t.Fatalf("encoded as %q", enc)
	}
	got, err := parseProducerState(enc)
	if err != nil || !reflect.DeepEqual(got, s) {
		t.Fatalf("parsed %+v, %v; want %+v", got, err, s)
	}
	for _, bad := range []string{"", "x", "70000", "1;2,3", "1;a,b,c"} {
		if _, err := parseProducerState(bad); err == nil {
			t.Errorf("parsed %q", bad)
		}
	}
}
