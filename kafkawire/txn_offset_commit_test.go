package kafkawire_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/kafkawire"
)

func txnOffsetCommitReq(version int16, txnID, grp string, pid int64, gen int32, member string, offsets map[string]map[int32]int64) *kmsg.TxnOffsetCommitRequest {
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.Version = version
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = txnID, grp, pid, 0
	req.Generation, req.MemberID = gen, member
	for topic, ps := range offsets {
		rt := kmsg.NewTxnOffsetCommitRequestTopic()
		rt.Topic = topic
		for p, o := range ps {
			rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch = p, o, -1
			md := "md"
			rp.Metadata = &md
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	return req
}

// versionClient is a client that sends key at version v at most, as one
// that knows no higher would (kgo otherwise sends the highest both know).
func versionClient(b *broker, key kmsg.Key, v int16) *kgo.Client {
	vs := kversion.Stable()
	vs.SetMaxKeyVersion(int16(key), v)
	return b.client(kgo.MaxVersions(vs))
}

// txnCodes maps "topic/partition" to the error code answered.
func txnCodes(t *testing.T, b *broker, req *kmsg.TxnOffsetCommitRequest) map[string]int16 {
	t.Helper()
	cl := versionClient(b, kmsg.TxnOffsetCommit, req.Version)
	resp, err := req.RequestWith(ctxT(t, 10*time.Second), cl)
	if err != nil {
		t.Fatalf("TxnOffsetCommit v%d: %v", req.Version, err)
	}
	out := map[string]int16{}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			out[fmt.Sprintf("%s/%d", rt.Topic, rp.Partition)] = rp.ErrorCode
		}
	}
	return out
}

// fetchStable sends OffsetFetch at version v with RequireStable and maps
// "t/partition" to its offset, or to -2 when it answered
// UNSTABLE_OFFSET_COMMIT.
func fetchStable(t *testing.T, b *broker, v int16, grp string, parts ...int32) map[string]int64 {
	t.Helper()
	cl := versionClient(b, kmsg.OffsetFetch, v)
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version, req.RequireStable = v, true
	if v >= 8 {
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = grp
		rt := kmsg.NewOffsetFetchRequestGroupTopic()
		rt.Topic, rt.Partitions = "t", parts
		rg.Topics = append(rg.Topics, rt)
		req.Groups = append(req.Groups, rg)
	} else {
		req.Group = grp
		rt := kmsg.NewOffsetFetchRequestTopic()
		rt.Topic, rt.Partitions = "t", parts
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctxT(t, 10*time.Second), cl)
	if err != nil {
		t.Fatalf("OffsetFetch v%d: %v", v, err)
	}
	out := map[string]int64{}
	add := func(topic string, p int32, off int64, code int16) {
		switch code {
		case 0:
			out[fmt.Sprintf("%s/%d", topic, p)] = off
		case kerr.UnstableOffsetCommit.Code:
			if off != -1 {
				t.Fatalf("OffsetFetch v%d: unstable %s/%d answered offset %d", v, topic, p, off)
			}
			out[fmt.Sprintf("%s/%d", topic, p)] = -2
		default:
			t.Fatalf("OffsetFetch v%d: %s/%d: %v", v, topic, p, kerr.ErrorForCode(code))
		}
	}
	if v >= 8 {
		if len(resp.Groups) != 1 || resp.Groups[0].ErrorCode != 0 {
			t.Fatalf("OffsetFetch v%d: %+v", v, resp.Groups)
		}
		for _, rt := range resp.Groups[0].Topics {
			for _, rp := range rt.Partitions {
				add(rt.Topic, rp.Partition, rp.Offset, rp.ErrorCode)
			}
		}
		return out
	}
	if resp.ErrorCode != 0 {
		t.Fatalf("OffsetFetch v%d: %v", v, kerr.ErrorForCode(resp.ErrorCode))
	}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			add(rt.Topic, rp.Partition, rp.Offset, rp.ErrorCode)
		}
	}
	return out
}

func equalMap[K comparable, V comparable](a, b map[K]V) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestTxnOffsetCommitWire: TxnOffsetCommit v0-4 stores pending offsets;
// OffsetFetch with RequireStable (v7, and v8+ per partition as Kafka
// answers) says UNSTABLE_OFFSET_COMMIT for them and a plain OffsetFetch
// does not see them, until the transaction's end moves them; the
// transaction coordinator's hook refuses with its own code; KIP-447's
// generation check fences.
func TestTxnOffsetCommitWire(t *testing.T) {
	var mu sync.Mutex
	var checked []string
	endsCalls := 0
	hook := func(_ context.Context, txnID string, pid int64, epoch int16, grp string) error {
		mu.Lock()
		checked = append(checked, fmt.Sprintf("%s/%d/%d/%s", txnID, pid, epoch, grp))
		mu.Unlock()
		switch txnID {
		case "zombie":
			return fmt.Errorf("transaction %q: %w", txnID, kerr.ProducerFenced)
		case "ends":
			// Ongoing at the first check, timed out by the recheck.
			if endsCalls++; endsCalls > 1 {
				return fmt.Errorf("transaction %q: %w", txnID, kerr.InvalidTxnState)
			}
		}
		return nil
	}
	b := startBrokerWith(t, engine.Options{AutoCreateTopics: true}, kafkawire.Options{CheckTxnOffsets: hook})
	cl := b.client()
	ctx := ctxT(t, 30*time.Second)
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 4, 1, nil, "t"); err != nil {
		t.Fatal(err)
	}

	for v := int16(0); v <= 4; v++ {
		grp := fmt.Sprintf("g%d", v)
		got := txnCodes(t, b, txnOffsetCommitReq(v, "tx", grp, 10+int64(v), -1, "",
			map[string]map[int32]int64{"t": {0: 100, 1: 101}, "missing": {0: 1}}))
		want := map[string]int16{"t/0": 0, "t/1": 0, "missing/0": kerr.UnknownTopicOrPartition.Code}
		if !equalMap(got, want) {
			t.Fatalf("TxnOffsetCommit v%d: %v, want %v", v, got, want)
		}
		for _, fv := range []int16{7, 8, 9} {
			if got := fetchStable(t, b, fv, grp, 0, 1, 2); !equalMap(got, map[string]int64{"t/0": -2, "t/1": -2, "t/2": -1}) {
				t.Fatalf("v%d commit, OffsetFetch v%d RequireStable: %v", v, fv, got)
			}
		}
		committed, err := kadm.NewClient(cl).FetchOffsets(ctx, grp)
		if err != nil || len(committed.Sorted()) != 0 {
			t.Fatalf("plain OffsetFetch sees pending offsets: %v %v", committed.Sorted(), err)
		}
		if err := b.eng.Groups().CompleteTxn(ctx, grp, 10+int64(v), true); err != nil {
			t.Fatal(err)
		}
		for _, fv := range []int16{7, 9} {
			if got := fetchStable(t, b, fv, grp, 0, 1, 2); !equalMap(got, map[string]int64{"t/0": 100, "t/1": 101, "t/2": -1}) {
				t.Fatalf("v%d commit completed, OffsetFetch v%d: %v", v, fv, got)
			}
		}
	}
	mu.Lock()
	if len(checked) != 10 || checked[0] != "tx/10/0/g0" || checked[1] != checked[0] {
		t.Errorf("hook calls %q, want each twice: before and after the offsets are stored", checked)
	}
	mu.Unlock()
	// The transaction ends between the check and the write: the recheck
	// refuses, and the offsets do not stay pending.
	got := txnCodes(t, b, txnOffsetCommitReq(3, "ends", "ge", 30, -1, "", map[string]map[int32]int64{"t": {0: 5}}))
	if !equalMap(got, map[string]int16{"t/0": kerr.InvalidTxnState.Code}) {
		t.Fatalf("refused by the recheck: %v", got)
	}
	mu.Lock()
	if endsCalls != 2 {
		t.Errorf("the hook was asked %d times about a commit it let through and then refused, want 2", endsCalls)
	}
	mu.Unlock()
	if got := fetchStable(t, b, 7, "ge", 0); !equalMap(got, map[string]int64{"t/0": -1}) {
		t.Fatalf("offsets of a transaction ended before the recheck: %v", got)
	}

	// The hook's refusal, with its code.
	got = txnCodes(t, b, txnOffsetCommitReq(3, "zombie", "gz", 20, -1, "", map[string]map[int32]int64{"t": {0: 5, 1: 6}}))
	if !equalMap(got, map[string]int16{"t/0": kerr.ProducerFenced.Code, "t/1": kerr.ProducerFenced.Code}) {
		t.Fatalf("refused by the transaction coordinator: %v", got)
	}
	if got := fetchStable(t, b, 7, "gz", 0); !equalMap(got, map[string]int64{"t/0": -1}) {
		t.Fatalf("a refused commit left %v", got)
	}
	// KIP-447: a member of a generation the group never had.
	got = txnCodes(t, b, txnOffsetCommitReq(3, "tx", "gk", 21, 4, "m-old", map[string]map[int32]int64{"t": {0: 5}}))
	if !equalMap(got, map[string]int16{"t/0": kerr.IllegalGeneration.Code}) {
		t.Fatalf("unknown generation: %v", got)
	}
	// Before v3 the generation is not on the wire: the same request is a
	// producer outside group management.
	got = txnCodes(t, b, txnOffsetCommitReq(2, "tx", "gk", 21, 4, "m-old", map[string]map[int32]int64{"t": {0: 5}}))
	if !equalMap(got, map[string]int16{"t/0": 0}) {
		t.Fatalf("v2 commit: %v", got)
	}
	// The group exists now, Empty, as Kafka lists a group made by a
	// transactional commit; an abort leaves no offset.
	groups, err := kadm.NewClient(cl).ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if lg, ok := groups["gk"]; !ok || lg.State != "Empty" {
		t.Fatalf("ListGroups: %+v", groups)
	}
	if err := b.eng.Groups().CompleteTxn(ctx, "gk", 21, false); err != nil {
		t.Fatal(err)
	}
	if got := fetchStable(t, b, 9, "gk", 0); !equalMap(got, map[string]int64{"t/0": -1}) {
		t.Fatalf("after abort: %v", got)
	}
}

// TestTxnOffsetCommitACLs: TxnOffsetCommit needs WRITE on the
// transactional id before anything else, as in Kafka.
func TestTxnOffsetCommitACLs(t *testing.T) {
	b := startSecure(t, secureOpts{plain: true, plainSASL: []string{kafkawire.MechScramSHA256}, acls: true, super: []string{"User:admin"}})
	for _, u := range []string{"admin", "alice"} {
		b.addUser(u, "pw-"+u+"-1234")
	}
	as := func(u string) *kgo.Client {
		return b.client(b.plainAddr, scram256(u, "pw-"+u+"-1234"), kgo.RequestRetries(1))
	}
	ctx := ctxT(t, 30*time.Second)
	admin := kadm.NewClient(as("admin"))
	if _, err := admin.CreateTopics(ctx, 1, 1, nil, "t"); err != nil {
		t.Fatal(err)
	}
	if res, err := admin.CreateACLs(ctx, kadm.NewACLs().Groups("g").Allow("User:alice").Operations(kadm.OpRead)); err != nil || res[0].Err != nil {
		t.Fatalf("create ACL: %v %v", err, res)
	}
	if res, err := admin.CreateACLs(ctx, kadm.NewACLs().Topics("t").Allow("User:alice").Operations(kadm.OpRead)); err != nil || res[0].Err != nil {
		t.Fatalf("create ACL: %v %v", err, res)
	}
	req := func() *kmsg.TxnOffsetCommitRequest {
		return txnOffsetCommitReq(3, "tx", "g", 1, -1, "", map[string]map[int32]int64{"t": {0: 5}})
	}
	resp, err := req().RequestWith(ctx, as("alice"))
	if err != nil {
		t.Fatal(err)
	}
	if c := resp.Topics[0].Partitions[0].ErrorCode; c != kerr.TransactionalIDAuthorizationFailed.Code {
		t.Fatalf("alice without WRITE on the transactional id: %v", kerr.ErrorForCode(c))
	}
	resp, err = req().RequestWith(ctx, as("admin"))
	if err != nil {
		t.Fatal(err)
	}
	// Past the ACLs, the transaction coordinator answers: it never gave
	// out this producer id.
	if c := resp.Topics[0].Partitions[0].ErrorCode; c != kerr.InvalidProducerIDMapping.Code {
		t.Fatalf("super user: %v, want the coordinator's INVALID_PRODUCER_ID_MAPPING", kerr.ErrorForCode(c))
	}
}
