package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/korvet/korvet/engine/index"
	"github.com/korvet/korvet/engine/record"
)

// KVRecord is the latest record of a key.
type KVRecord struct {
	TopicID   [16]byte
	Partition int32
	Offset    int64
	Timestamp int64
	Value     []byte
	Headers   []record.Header
}

// Header returns the value of the first header named name, or nil.
func (r *KVRecord) Header(name string) []byte {
	for _, h := range r.Headers {
		if string(h.Key) == name {
			return h.Value
		}
	}
	return nil
}

// Get returns the latest record of key in topic. Errors: ErrKVDisabled,
// ErrUnknownTopic, ErrKVNotIndexed, ErrKVNotFound (never written, or
// deleted by a tombstone), ErrKVGone (removed by retention),
// ErrKVUnavailable (the index could not answer within its budget). It never
// returns a record that does not carry key: a pointer that no longer
// matches the log is looked up again until the budget runs out.
func (k *KV) Get(ctx context.Context, topic string, key []byte) (KVRecord, error) {
	kt, err := k.topicFor(topic)
	if err != nil {
		return KVRecord{}, err
	}
	rec, outcome, err := k.live.get(ctx, kt, key)
	kt.reads[outcome].Add(1)
	return rec, err
}

func (kv *kvIndex) get(ctx context.Context, kt *kvTopic, key []byte) (KVRecord, int, error) {
	t := kt.t
	ctx, cancel := context.WithTimeout(ctx, kv.opts.StaleBudget)
	defer cancel()
	var last index.Pointer
	backoff := time.Millisecond
	for attempt := 0; ; attempt++ {
		ptr, ok, ready, err := kv.lookupReady(kt, key)
		if err != nil {
			return KVRecord{}, outcomeError, fmt.Errorf("%w: %v", ErrKVUnavailable, err)
		}
		if !ready {
			if err := kt.waitReady(ctx); err != nil {
				return KVRecord{}, outcomeStale, err
			}
			continue
		}
		if !ok {
			return KVRecord{}, outcomeMiss, fmt.Errorf("%w: never written to %s", ErrKVNotFound, t.name)
		}
		if ptr.Tombstone {
			return KVRecord{}, outcomeMiss, fmt.Errorf("%w: deleted by a tombstone at partition %d offset %d", ErrKVNotFound, ptr.Partition, ptr.Offset)
		}
		p := t.Partition(ptr.Partition)
		if p == nil {
			return KVRecord{}, outcomeError, fmt.Errorf("%w: pointer to partition %d, which %s does not have", ErrKVUnavailable, ptr.Partition, t.name)
		}
		if start := p.LogStart(); ptr.Offset < start {
			return KVRecord{}, outcomeGone, fmt.Errorf("%w: partition %d offset %d is below the log start %d", ErrKVGone, ptr.Partition, ptr.Offset, start)
		}
		rec, found, err := readKey(ctx, p, ptr.Offset, key)
		switch {
		case found:
			return rec, outcomeHit, nil
		case errors.Is(err, ErrOffsetOutOfRange) && ptr.Offset < p.LogStart():
			return KVRecord{}, outcomeGone, fmt.Errorf("%w: partition %d offset %d is below the log start %d", ErrKVGone, ptr.Partition, ptr.Offset, p.LogStart())
		case err != nil && !expired(ctx):
			return KVRecord{}, outcomeError, fmt.Errorf("%w: %v", ErrKVUnavailable, err)
		}
		// The pointer is stale (compaction removed the record after a
		// newer one was indexed, or the log changed under the index):
		// look again, waiting a little if the index has not moved.
		if attempt > 0 && ptr == last {
			select {
			case <-time.After(backoff):
				backoff = min(2*backoff, 50*time.Millisecond)
			case <-ctx.Done():
			}
		}
		if expired(ctx) {
			return KVRecord{}, outcomeStale, fmt.Errorf("%w: the record at partition %d offset %d no longer carries the key and the index did not move within %v", ErrKVUnavailable, ptr.Partition, ptr.Offset, kv.opts.StaleBudget)
		}
		last = ptr
	}
}

// expired says whether ctx's deadline has passed. A read's socket
// deadline is the same instant as ctx's and may fire a moment before
// ctx.Err() reports it; that read failed for want of time, not Redis.
func expired(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	dl, ok := ctx.Deadline()
	return ok && !time.Now().Before(dl)
}

// lookupReady reads a pointer if every partition of kt has caught up:
// checked under the same lock as the read, so that an online rebuild's
// swap (which leaves partitions catching up) cannot come in between.
func (kv *kvIndex) lookupReady(kt *kvTopic, key []byte) (p index.Pointer, ok, ready bool, err error) {
	kv.closeMu.RLock()
	defer kv.closeMu.RUnlock()
	if kv.closed {
		return p, false, false, errKVClosed
	}
	if !kt.caughtUp() {
		return p, false, false, nil
	}
	p, ok, err = kv.ix.Get(kt.t.id, key)
	return p, ok, true, err
}

// readKey reads the record at offset and returns it if it is there and
// carries key.
func readKey(ctx context.Context, p *Partition, offset int64, key []byte) (KVRecord, bool, error) {
	res, err := p.readAt(ctx, offset)
	if err != nil {
		return KVRecord{}, false, err
	}
	defer res.Release()
	if len(res.Records) == 0 {
		return KVRecord{}, false, nil
	}
	r := &res.Records[0]
	if r.Offset != offset || r.Key == nil || !bytes.Equal(r.Key, key) {
		return KVRecord{}, false, nil
	}
	if r.Value == nil {
		// A tombstone the index has not seen yet: the key is deleted,
		// and the re-resolve will say so once it has.
		return KVRecord{}, false, nil
	}
	out := KVRecord{TopicID: p.t.id, Partition: p.id, Offset: r.Offset, Timestamp: r.Timestamp, Value: bytes.Clone(r.Value)}
	if len(r.Headers) > 0 {
		out.Headers = make([]record.Header, len(r.Headers))
		for i, h := range r.Headers {
			out.Headers[i] = record.Header{Key: bytes.Clone(h.Key), Value: bytes.Clone(h.Value)}
		}
	}
	return out, true, nil
}
