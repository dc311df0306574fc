package share

import "fmt"

// Acknowledge types (KIP-932; RENEW is KIP-1222, ShareFetch/Acknowledge
// v2).
const (
	AckGap     int8 = 0
	AckAccept  int8 = 1
	AckRelease int8 = 2
	AckReject  int8 = 3
	AckRenew   int8 = 4
)

// AckRun is a run of offsets acknowledged the same way.
type AckRun struct {
	First, Last int64
	Type        int8
}

// AckBatch is one acknowledgement batch as the client sends it: a range
// and either one type for all of it or one type per offset.
type AckBatch struct {
	First, Last int64
	Types       []int8
}

// ParseAcks validates a partition's acknowledgement batches and turns them
// into runs of one type. Batches must be in offset order without overlap,
// each type list must hold one type or one per offset, and the offsets
// counted over all batches are at most maxOffsets (checked before anything
// is allocated per offset). maxType is the largest type allowed (AckReject,
// or AckRenew with v2 renew requests).
func ParseAcks(batches []AckBatch, maxOffsets int64, maxType int8) ([]AckRun, error) {
	var total int64
	prev := int64(-1)
	for _, b := range batches {
		if b.First < 0 || b.Last < b.First {
			return nil, fmt.Errorf("%w: acknowledgement batch [%d, %d]", ErrInvalidRequest, b.First, b.Last)
		}
		if b.First <= prev {
			return nil, fmt.Errorf("%w: acknowledgement batches overlap or are out of order at %d", ErrInvalidRequest, b.First)
		}
		prev = b.Last
		n := b.Last - b.First + 1
		if total += n; total > maxOffsets {
			return nil, fmt.Errorf("%w: more than %d offsets", ErrTooManyAcknowledged, maxOffsets)
		}
		if len(b.Types) != 1 && int64(len(b.Types)) != n {
			return nil, fmt.Errorf("%w: batch [%d, %d] has %d acknowledge types", ErrInvalidRequest, b.First, b.Last, len(b.Types))
		}
		for _, t := range b.Types {
			if t < AckGap || t > maxType {
				return nil, fmt.Errorf("%w: %d", ErrInvalidAcknowledgeTy, t)
			}
		}
	}
	var runs []AckRun
	add := func(off int64, t int8) {
		if n := len(runs); n > 0 && runs[n-1].Type == t && runs[n-1].Last == off-1 {
			runs[n-1].Last = off
			return
		}
		runs = append(runs, AckRun{First: off, Last: off, Type: t})
	}
	for _, b := range batches {
		if len(b.Types) == 1 {
			if n := len(runs); n > 0 && runs[n-1].Type == b.Types[0] && runs[n-1].Last == b.First-1 {
				runs[n-1].Last = b.Last
			} else {
				runs = append(runs, AckRun{First: b.First, Last: b.Last, Type: b.Types[0]})
			}
			continue
		}
		for i, t := range b.Types {
			add(b.First+int64(i), t)
		}
	}
	return runs, nil
}
