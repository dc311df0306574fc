package engine

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Read-your-writes across brokers. A producer acknowledged at (partition
// P, offset O) hands the pair to a reader, which passes it to any
// broker's KV view as a token "P:O[,P:O...]"; the broker answers only
// once its index has applied offset O of partition P (on the leader at
// once: the commit path indexes before acknowledging; elsewhere as soon
// as the tail has brought the record in). A reader that keeps passing the
// largest token it has seen gets monotonic reads across brokers too.

// MaxKVWait bounds how long a read waits for its token.
const MaxKVWait = 2 * time.Second

// ErrKVBadToken is a malformed read-your-writes token.
var ErrKVBadToken = errors.New("bad read-your-writes token")

// KVBehindError: the index had not applied the token's offsets when the
// wait ended.
type KVBehindError struct {
	Topic     string
	Partition int32
	Behind    int64 // records of the partition still to index
}

func (e *KVBehindError) Error() string {
	return fmt.Sprintf("%v: the key index of %s partition %d is behind the token by %d records", ErrKVUnavailable, e.Topic, e.Partition, e.Behind)
}

func (e *KVBehindError) Unwrap() error { return ErrKVUnavailable }

// ParseKVToken parses "P:O[,P:O...]" for a topic of partitions
// partitions: at most that many pairs (counted before anything is
// allocated), each partition in range, offsets not negative. A partition
// named twice keeps its largest offset.
func ParseKVToken(s string, partitions int) (map[int32]int64, error) {
	if s == "" {
		return nil, fmt.Errorf("%w: empty; use partition:offset[,partition:offset...]", ErrKVBadToken)
	}
	if n := strings.Count(s, ",") + 1; n > partitions {
		return nil, fmt.Errorf("%w: %d pairs for a topic of %d partitions", ErrKVBadToken, n, partitions)
	}
	out := make(map[int32]int64, strings.Count(s, ",")+1)
	for pair := range strings.SplitSeq(s, ",") {
		ps, os, ok := strings.Cut(strings.TrimSpace(pair), ":")
		if !ok {
			return nil, fmt.Errorf("%w: %q is not partition:offset", ErrKVBadToken, pair)
		}
		p, err := strconv.ParseInt(ps, 10, 32)
		if err != nil || p < 0 || p >= int64(partitions) {
			return nil, fmt.Errorf("%w: partition %q is not one of the topic's 0..%d", ErrKVBadToken, ps, partitions-1)
		}
		o, err := strconv.ParseInt(os, 10, 64)
		if err != nil || o < 0 {
			return nil, fmt.Errorf("%w: offset %q is not a number >= 0", ErrKVBadToken, os)
		}
		if cur, ok := out[int32(p)]; !ok || o > cur {
			out[int32(p)] = o
		}
	}
	return out, nil
}

// WaitToken parses tokens for topic (each as ParseKVToken; a partition
// in several counts at its largest offset) and waits until the index has
// applied each offset they name, for at most MaxKVWait (less if ctx ends
// sooner). It fails with ErrKVBadToken on a malformed token and a
// *KVBehindError when time runs out.
func (k *KV) WaitToken(ctx context.Context, topic string, tokens ...string) error {
	kt, err := k.topicFor(topic)
	if err != nil {
		return err
	}
	want := map[int32]int64{}
	for _, tok := range tokens {
		m, err := ParseKVToken(tok, len(kt.t.Partitions()))
		if err != nil {
			return err
		}
		for p, o := range m {
			if cur, ok := want[p]; !ok || o > cur {
				want[p] = o
			}
		}
	}
	ctx, cancel := context.WithTimeout(ctx, MaxKVWait)
	defer cancel()
	for p, o := range want {
		if err := k.live.waitApplied(ctx, kt, p, o); err != nil {
			return err
		}
	}
	return nil
}

// waitApplied waits until kt's partition p has offset o in the index.
func (kv *kvIndex) waitApplied(ctx context.Context, kt *kvTopic, p int32, o int64) error {
	if kt.numParts() <= int(p) {
		// Grown since the index saw the topic: add the new partitions.
		if _, err := kv.topic(kt.t); err != nil {
			return err
		}
	}
	kp := kt.part(p)
	if kp == nil {
		return fmt.Errorf("%w: partition %d of %s", ErrKVBadToken, p, kt.t.name)
	}
	for {
		kp.mu.Lock()
		applied := kp.applied
		if applied > o {
			kp.mu.Unlock()
			return nil
		}
		if kp.adv == nil {
			kp.adv = make(chan struct{})
		}
		ch := kp.adv
		kp.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return &KVBehindError{Topic: kt.t.name, Partition: p, Behind: o + 1 - applied}
		}
	}
}

// advanced wakes the waiters of kp's progress; kp.mu must be held.
func (kp *kvPart) advanced() {
	if kp.adv != nil {
		close(kp.adv)
		kp.adv = nil
	}
}

// KVPartitionLag is how far one partition's index trails its log on this
// broker.
type KVPartitionLag struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Lag is the last stable offset as this broker knows it (the log
	// end offset unless a transaction is open) minus the indexed offset.
	Lag    int64 `json:"lag"`
	Leader bool  `json:"leader"` // this broker leads it (no tail needed)
}

// KVLag lists the index lag of every indexed partition on this broker,
// sorted by topic and partition, and their total: for the status page
// and metrics. Nil without an index.
func (e *Engine) KVLag() (total int64, parts []KVPartitionLag) {
	for _, ts := range e.kv.Stats().Topics {
		t := e.Topic(ts.Topic)
		for _, ps := range ts.Partitions {
			leader := false
			if t != nil {
				if p := t.Partition(ps.Partition); p != nil {
					leader = p.IsLeader()
				}
			}
			parts = append(parts, KVPartitionLag{Topic: ts.Topic, Partition: ps.Partition, Lag: ps.Lag, Leader: leader})
			total += ps.Lag
		}
	}
	return total, parts
}
