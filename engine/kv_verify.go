package engine

import (
	"bytes"
	"context"
	"fmt"

	"github.com/korvet/korvet/engine/index"
)

// IndexDiff is one key on which the index and the log disagree. A nil
// pointer means "absent".
type IndexDiff struct {
	Topic string
	Key   []byte
	Index *index.Pointer // what the index says
	Log   *index.Pointer // what the log says
}

// VerifyResult sums up a verification.
type VerifyResult struct {
	Topics int
	Keys   int64 // keys compared
	Diffs  int64
	// Notes are findings other than key differences: checkpoints behind
	// the log, topics the index holds that are gone.
	Notes []string
}

// Verify compares ix with the log: it loads a fresh index in scratchDir
// from the log up to ix's checkpoints and reports every key on which the
// two differ. Like Rebuild, it works without a live index.
func (k *KV) Verify(ctx context.Context, ix *index.Index, scratchDir string, topics []string, report func(IndexDiff)) (VerifyResult, error) {
	e := k.e
	var res VerifyResult
	ref, err := index.Open(scratchDir, index.Options{Bulk: true, Logger: e.log})
	if err != nil {
		return res, err
	}
	defer ref.Close()
	ids, err := ix.Topics()
	if err != nil {
		return res, err
	}
	for _, id := range ids {
		if t := e.TopicByID(id); t == nil || !t.indexed() {
			res.Notes = append(res.Notes, fmt.Sprintf("the index holds keys of topic id %x, which is gone or no longer indexed (korvet drops them at start)", id))
		}
	}
	upto := func(topic string, partition int32) (int64, bool) {
		t := e.Topic(topic)
		next, ok, err := ix.Checkpoint(t.id, partition)
		if err != nil || !ok {
			res.Notes = append(res.Notes, fmt.Sprintf("%s/%d: never indexed", topic, partition))
			return 0, true
		}
		if lso := t.Partition(partition).kvTarget(); next < lso {
			res.Notes = append(res.Notes, fmt.Sprintf("%s/%d: checkpoint %d is %d records behind the log's last stable offset (korvet catches up at start); compared up to the checkpoint", topic, partition, next, lso-next))
		}
		return next, true
	}
	if _, err := k.Rebuild(ctx, ref, RebuildOptions{Topics: topics, Upto: upto}); err != nil {
		return res, err
	}
	ts, err := k.indexedTopics(topics)
	if err != nil {
		return res, err
	}
	for _, t := range ts {
		res.Topics++
		if err := compareTopic(t, ix, ref, &res, report); err != nil {
			return res, err
		}
	}
	return res, nil
}

// compareTopic merges the two indexes' key orders.
func compareTopic(t *Topic, ix, ref *index.Index, res *VerifyResult, report func(IndexDiff)) error {
	a, err := ix.NewIter(t.id)
	if err != nil {
		return err
	}
	b, err := ref.NewIter(t.id)
	if err != nil {
		a.Close()
		return err
	}
	okA, okB := a.Next(), b.Next()
	diff := func(key []byte, pa, pb *index.Pointer) {
		res.Diffs++
		if report != nil {
			report(IndexDiff{Topic: t.name, Key: bytes.Clone(key), Index: pa, Log: pb})
		}
	}
	for okA || okB {
		res.Keys++
		c := 0
		switch {
		case !okA:
			c = 1
		case !okB:
			c = -1
		default:
			c = bytes.Compare(a.Key(), b.Key())
		}
		switch c {
		case 0:
			if pa, pb := a.Pointer(), b.Pointer(); pa != pb {
				diff(a.Key(), &pa, &pb)
			}
			okA, okB = a.Next(), b.Next()
		case -1:
			pa := a.Pointer()
			diff(a.Key(), &pa, nil)
			okA = a.Next()
		default:
			pb := b.Pointer()
			diff(b.Key(), nil, &pb)
			okB = b.Next()
		}
	}
	errA, errB := a.Close(), b.Close()
	if errA != nil {
		return errA
	}
	return errB
}
