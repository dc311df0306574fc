package txn

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/korvet/korvet/resp"
)

// State is a transaction's state, named as Kafka names it
// (DescribeTransactions and ListTransactions answer these strings).
type State string

// The states of a transactional id. Dead is never stored: an expired id
// is deleted.
const (
	Empty          State = "Empty"
	Ongoing        State = "Ongoing"
	PrepareCommit  State = "PrepareCommit"
	PrepareAbort   State = "PrepareAbort"
	CompleteCommit State = "CompleteCommit"
	CompleteAbort  State = "CompleteAbort"
	Dead           State = "Dead"
)

// TopicPartition names one partition of a transaction.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// Marker is a transaction's end in one partition (design16's
// engine.Marker).
type Marker struct {
	ProducerID       int64
	Epoch            int16
	Commit           bool
	CoordinatorEpoch int32
}

// Markers writes a transaction's markers in its partitions; the engine
// implements it (engine.WriteTxnMarkers). It must be idempotent: a
// completion is retried after a failure or a crash.
type Markers interface {
	WriteTxnMarkers(ctx context.Context, m Marker, parts []TopicPartition) error
}

// Offsets completes the offsets a transaction committed for a group
// (TxnOffsetCommit): committed on commit, dropped on abort. Idempotent.
type Offsets interface {
	CompleteTxn(ctx context.Context, group string, pid int64, commit bool) error
}

// record is the stored state of one transactional id, as JSON in the
// keys.Transactions hash. pid, epoch and state are read by partition
// leaders resolving open transactions (design16): keep their names.
type record struct {
	// Ver grows with every write, so no two stored values are equal and
	// the compare-and-set cannot be fooled by an old value coming back.
	Ver       int64 `json:"ver"`
	PID       int64 `json:"pid"`
	Epoch     int16 `json:"epoch"`
	PrevPID   int64 `json:"prev_pid"`
	PrevEpoch int16 `json:"prev_epoch"`
	TimeoutMs int32 `json:"timeout_ms"`
	State     State `json:"state"`
	// TxnPID and TxnEpoch are what the transaction's records carry and
	// its markers are written with: pid and epoch until an EndTxn of the
	// KIP-890 flow bumps the epoch (or rotates the id) at its Prepare.
	TxnPID     int64    `json:"txn_pid"`
	TxnEpoch   int16    `json:"txn_epoch"`
	Partitions []string `json:"partitions"`
	Groups     []string `json:"groups"`
	StartMs    int64    `json:"start_ms"`
	UpdateMs   int64    `json:"update_ms"`
	V2         bool     `json:"v2"`
}

// exhausted: an epoch that may not be bumped further for a new
// producer; the last one is kept for fencing, as in Kafka.
func exhausted(epoch int16) bool { return epoch >= math.MaxInt16-1 }

func partKey(tp TopicPartition) string {
	return tp.Topic + ":" + strconv.FormatInt(int64(tp.Partition), 10)
}

// parsePart splits "topic:partition" at its last colon (Kafka topic names
// hold no colon, but the split does not depend on it).
func parsePart(s string) (TopicPartition, error) {
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return TopicPartition{}, fmt.Errorf("partition %q: no colon", s)
	}
	n, err := strconv.ParseInt(s[i+1:], 10, 32)
	if err != nil {
		return TopicPartition{}, fmt.Errorf("partition %q: %w", s, err)
	}
	return TopicPartition{Topic: s[:i], Partition: int32(n)}, nil
}

func (r *record) hasPart(tp TopicPartition) bool {
	k := partKey(tp)
	for _, p := range r.Partitions {
		if p == k {
			return true
		}
	}
	return false
}

func (r *record) hasGroup(g string) bool {
	for _, x := range r.Groups {
		if x == g {
			return true
		}
	}
	return false
}

// parts decodes the partitions; a bad entry (never written by korvet) is
// skipped rather than blocking the completion.
func (r *record) parts() []TopicPartition {
	out := make([]TopicPartition, 0, len(r.Partitions))
	for _, s := range r.Partitions {
		if tp, err := parsePart(s); err == nil {
			out = append(out, tp)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out
}

func (r record) clone() record {
	r.Partitions = append([]string(nil), r.Partitions...)
	r.Groups = append([]string(nil), r.Groups...)
	return r
}

func decodeRecord(b []byte) (record, error) {
	var r record
	if err := json.Unmarshal(b, &r); err != nil {
		return record{}, err
	}
	switch r.State {
	case Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort:
	default:
		return record{}, fmt.Errorf("unknown state %q", r.State)
	}
	return r, nil
}

// casScript replaces (or, given an empty new value, deletes) one field
// of the state hash only if it still holds the value the caller last
// read ("" for absent).
const casScript = `local cur = redis.call('HGET', KEYS[1], ARGV[1])
if cur == false then cur = '' end
if cur ~= ARGV[2] then return 0 end
if ARGV[3] == '' then redis.call('HDEL', KEYS[1], ARGV[1]) else redis.call('HSET', KEYS[1], ARGV[1], ARGV[3]) end
return 1`

// cas stores next for id if Redis still holds old; false (and no error)
// when another coordinator wrote first. next nil deletes.
func (c *Coordinator) cas(ctx context.Context, id, old string, next *record) (string, bool, error) {
	val := ""
	if next != nil {
		b, err := json.Marshal(next)
		if err != nil {
			return "", false, fmt.Errorf("encode transaction %q: %w", id, err)
		}
		val = string(b)
	}
	r, err := c.rc.Do(ctx, "EVAL", casScript, 1, c.k.Transactions(), id, old, val)
	if err == nil {
		err = r.Err()
	}
	if err != nil {
		return "", false, fmt.Errorf("%w: store transaction %q: %v", ErrCoordinatorNotAvailable, id, err)
	}
	n, _ := r.Int()
	return val, n == 1, nil
}

// read returns the stored state of id; found false when there is none.
func (c *Coordinator) read(ctx context.Context, id string) (rec record, raw string, found bool, err error) {
	r, err := c.rc.Do(ctx, "HGET", c.k.Transactions(), id)
	if err == nil {
		err = r.Err()
	}
	if err != nil {
		return record{}, "", false, fmt.Errorf("%w: read transaction %q: %v", ErrCoordinatorNotAvailable, id, err)
	}
	if r.IsNil() {
		return record{}, "", false, nil
	}
	raw = string(r.Bytes())
	rec, err = decodeRecord(r.Bytes())
	if err != nil {
		return record{}, "", false, fmt.Errorf("%w: transaction %q in %s: %v", ErrCoordinatorNotAvailable, id, c.k.Transactions(), err)
	}
	return rec, raw, true, nil
}

// parseAll maps the reply of HGETALL on the state hash.
func parseAll(r resp.Reply) map[string]string {
	var elems []resp.Reply
	elems = r.Elems(elems)
	out := make(map[string]string, len(elems)/2)
	for i := 0; i+1 < len(elems); i += 2 {
		out[string(elems[i].Bytes())] = string(elems[i+1].Bytes())
	}
	return out
}
