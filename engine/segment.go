package engine

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
)

// SegmentState is where a segment is in its life.
type SegmentState string

// Segment states: the open segment takes appends; a sealed one is
// complete; an archived one also has a file in the cold tier.
const (
	SegmentOpen     SegmentState = "open"
	SegmentSealed   SegmentState = "sealed"
	SegmentArchived SegmentState = "archived"
)

// Segment is one stream of a partition's log and, once archived, its cold
// file. The registry in Redis holds one per segment; the open segment's
// Last, MinTs, MaxTs and Bytes are filled in when it is sealed.
type Segment struct {
	ID         int64        `json:"id"`
	Base       int64        `json:"base"`
	Last       int64        `json:"last"` // -1 while open
	MinTs      int64        `json:"min_ts"`
	MaxTs      int64        `json:"max_ts"`
	StartBytes int64        `json:"start_bytes"` // the partition's byte counter at Base
	Bytes      int64        `json:"bytes"`
	State      SegmentState `json:"state"`
	Local      bool         `json:"local"` // the stream is (still) in Redis
	File       string       `json:"file,omitempty"`
	FileBytes  int64        `json:"file_bytes,omitempty"`
	Created    int64        `json:"created"`
	Sealed     int64        `json:"sealed,omitempty"`
}

func (s Segment) encode() []byte {
	b, _ := json.Marshal(s)
	return b
}

// parseSegments reads a registry hash (HGETALL reply as field/value pairs).
func parseSegments(pairs [][]byte) ([]Segment, error) {
	var out []Segment
	for i := 0; i+1 < len(pairs); i += 2 {
		var s Segment
		if err := json.Unmarshal(pairs[i+1], &s); err != nil {
			return nil, fmt.Errorf("segment %s: %w", pairs[i], err)
		}
		if id, err := strconv.ParseInt(string(pairs[i]), 10, 64); err != nil || id != s.ID {
			return nil, fmt.Errorf("segment field %q does not match id %d", pairs[i], s.ID)
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// segmentFor returns the index in segs of the segment holding offset: the
// last one whose base is at or below it.
func segmentFor(segs []Segment, offset int64) int {
	i := sort.Search(len(segs), func(i int) bool { return segs[i].Base > offset })
	return i - 1
}
