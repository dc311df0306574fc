package engine

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// producerBatches is how many of a producer's last batches a partition
// remembers to answer retries, as Kafka does.
const producerBatches = 5

type producerBatch struct {
	firstSeq, lastSeq int32
	base              int64
}

// producerState is what a partition knows of one idempotent producer. It
// is stored in the partition's meta hash, written in the same transaction
// as the records, so a crash can neither lose nor duplicate a retried batch.
type producerState struct {
	epoch   int16
	batches []producerBatch // oldest first, at most producerBatches
}

// check decides what to do with a batch: append it (nil error), answer it
// as a duplicate of an earlier append (dupBase >= 0), or refuse it.
func (s *producerState) check(epoch int16, firstSeq, lastSeq int32) (dupBase int64, err error) {
	if s == nil {
		if firstSeq != 0 {
			return -1, fmt.Errorf("%w: first batch has sequence %d", ErrUnknownProducerID, firstSeq)
		}
		return -1, nil
	}
	switch {
	case epoch < s.epoch:
		return -1, fmt.Errorf("%w: %d < %d", ErrInvalidProducerEpoch, epoch, s.epoch)
	case epoch > s.epoch:
		if firstSeq != 0 {
			return -1, fmt.Errorf("%w: new epoch %d starts at %d, not 0", ErrOutOfOrderSequence, epoch, firstSeq)
		}
		return -1, nil
	}
	for _, b := range s.batches {
		if b.firstSeq == firstSeq && b.lastSeq == lastSeq {
			return b.base, nil
		}
	}
	if len(s.batches) == 0 {
		return -1, nil
	}
	last := s.batches[len(s.batches)-1].lastSeq
	want := last + 1
	if last == math.MaxInt32 {
		want = 0
	}
	if firstSeq == want {
		return -1, nil
	}
	if firstSeq < want && firstSeq >= s.batches[0].firstSeq-1_000_000 {
		return -1, fmt.Errorf("%w: %d, expected %d", ErrDuplicateSequence, firstSeq, want)
	}
	return -1, fmt.Errorf("%w: %d, expected %d", ErrOutOfOrderSequence, firstSeq, want)
}

// with returns the state after appending a batch.
func (s *producerState) with(epoch int16, firstSeq, lastSeq int32, base int64) *producerState {
	n := &producerState{epoch: epoch}
	if s != nil && s.epoch == epoch {
		n.batches = append(n.batches, s.batches...)
	}
	n.batches = append(n.batches, producerBatch{firstSeq, lastSeq, base})
	if len(n.batches) > producerBatches {
		n.batches = n.batches[len(n.batches)-producerBatches:]
	}
	return n
}

// encode writes "epoch;first,last,base;..." for the meta hash.
func (s *producerState) encode() string {
	var b strings.Builder
	b.WriteString(strconv.Itoa(int(s.epoch)))
	for _, x := range s.batches {
		fmt.Fprintf(&b, ";%d,%d,%d", x.firstSeq, x.lastSeq, x.base)
	}
	return b.String()
}

func parseProducerState(v string) (*producerState, error) {
	parts := strings.Split(v, ";")
	ep, err := strconv.ParseInt(parts[0], 10, 16)
	if err != nil {
		return nil, fmt.Errorf("bad producer state %q", v)
	}
	s := &producerState{epoch: int16(ep)}
	for _, p := range parts[1:] {
		var b producerBatch
		if _, err := fmt.Sscanf(p, "%d,%d,%d", &b.firstSeq, &b.lastSeq, &b.base); err != nil {
			return nil, fmt.Errorf("bad producer state %q", v)
		}
		s.batches = append(s.batches, b)
	}
	return s, nil
}

// producerField is the meta hash field of a producer's state.
func producerField(id int64) string { return "pid:" + strconv.FormatInt(id, 10) }
