package kafkawire_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/kafkawire"
)

// txnCall sends req at its version on a raw connection and returns the
// answer: the tests below pin versions (PRODUCER_FENCED vs
// INVALID_PRODUCER_EPOCH, the KIP-890 flow) that a client would pick.
func txnCall(t *testing.T, c net.Conn, corr *int32, req kmsg.Request) kmsg.Response {
	t.Helper()
	*corr++
	if _, err := c.Write(request(*corr, req)); err != nil {
		t.Fatal(err)
	}
	return readResponse(t, c, req)
}

func initTxn(t *testing.T, c net.Conn, corr *int32, id string, timeoutMs int32) *kmsg.InitProducerIDResponse {
	t.Helper()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.Version = 4
	req.TransactionalID, req.TransactionTimeoutMillis = kmsg.StringPtr(id), timeoutMs
	return txnCall(t, c, corr, req).(*kmsg.InitProducerIDResponse)
}

func addParts(t *testing.T, c net.Conn, corr *int32, version int16, id string, pid int64, epoch int16, topic string, parts ...int32) []int16 {
	t.Helper()
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.Version = version
	req.TransactionalID, req.ProducerID, req.ProducerEpoch = id, pid, epoch
	rt := kmsg.NewAddPartitionsToTxnRequestTopic()
	rt.Topic, rt.Partitions = topic, parts
	req.Topics = append(req.Topics, rt)
	resp := txnCall(t, c, corr, req).(*kmsg.AddPartitionsToTxnResponse)
	var codes []int16
	for _, st := range resp.Topics {
		for _, sp := range st.Partitions {
			codes = append(codes, sp.ErrorCode)
		}
	}
	return codes
}

func endTxn(t *testing.T, c net.Conn, corr *int32, version int16, id string, pid int64, epoch int16, commit bool) *kmsg.EndTxnResponse {
	t.Helper()
	req := kmsg.NewPtrEndTxnRequest()
	req.Version = version
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = id, pid, epoch, commit
	return txnCall(t, c, corr, req).(*kmsg.EndTxnResponse)
}

func txnState(t *testing.T, c net.Conn, corr *int32, id string) kmsg.DescribeTransactionsResponseTransactionState {
	t.Helper()
	req := kmsg.NewPtrDescribeTransactionsRequest()
	req.TransactionalIDs = []string{id}
	resp := txnCall(t, c, corr, req).(*kmsg.DescribeTransactionsResponse)
	if len(resp.TransactionStates) != 1 {
		t.Fatalf("describe %s: %d states", id, len(resp.TransactionStates))
	}
	return resp.TransactionStates[0]
}

func codeName(code int16) string {
	if code == 0 {
		return "NONE"
	}
	return kerr.ErrorForCode(code).Error()
}

// TestTxnCoordinatorAPIs goes through a transaction's life on the wire:
// find the coordinator, InitProducerId, AddPartitionsToTxn,
// AddOffsetsToTxn, Describe/ListTransactions, EndTxn (v4, then v5's
// epoch bump), fencing of an older producer with the version-dependent
// error code.
func TestTxnCoordinatorAPIs(t *testing.T) {
	b := startBroker(t, engine.Options{AutoCreateTopics: true})
	ctx := ctxT(t, 30*time.Second)
	if _, err := b.admin().CreateTopic(ctx, 2, 1, nil, "tx-out"); err != nil {
		t.Fatal(err)
	}
	c := rawConn(t, b.addr)
	var corr int32

	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.Version, fc.CoordinatorType, fc.CoordinatorKeys = 4, 1, []string{"app-1"}
	fcr := txnCall(t, c, &corr, fc).(*kmsg.FindCoordinatorResponse)
	if len(fcr.Coordinators) != 1 || fcr.Coordinators[0].ErrorCode != 0 || fcr.Coordinators[0].NodeID != b.eng.NodeID() {
		t.Fatalf("FindCoordinator: %+v", fcr.Coordinators)
	}

	if r := initTxn(t, c, &corr, "app-1", int32((16 * time.Minute).Milliseconds())); r.ErrorCode != kerr.InvalidTransactionTimeout.Code {
		t.Fatalf("a timeout above kafka.transaction_max_timeout: %s", codeName(r.ErrorCode))
	}
	ir := initTxn(t, c, &corr, "app-1", 60000)
	if ir.ErrorCode != 0 || ir.ProducerID < 0 || ir.ProducerEpoch != 0 {
		t.Fatalf("InitProducerId: %s %d/%d", codeName(ir.ErrorCode), ir.ProducerID, ir.ProducerEpoch)
	}
	pid, epoch := ir.ProducerID, ir.ProducerEpoch
	if got := addParts(t, c, &corr, 3, "app-1", pid, epoch, "tx-out", 0, 7); fmt.Sprint(got) != fmt.Sprint([]int16{kerr.OperationNotAttempted.Code, kerr.UnknownTopicOrPartition.Code}) {
		t.Fatalf("a partition that does not exist: %v", got)
	}
	if got := addParts(t, c, &corr, 3, "app-1", pid, epoch, "tx-out", 0, 1); fmt.Sprint(got) != "[0 0]" {
		t.Fatalf("AddPartitionsToTxn: %v", got)
	}
	ao := kmsg.NewPtrAddOffsetsToTxnRequest()
	ao.Version, ao.TransactionalID, ao.ProducerID, ao.ProducerEpoch, ao.Group = 3, "app-1", pid, epoch, "app-group"
	if r := txnCall(t, c, &corr, ao).(*kmsg.AddOffsetsToTxnResponse); r.ErrorCode != 0 {
		t.Fatalf("AddOffsetsToTxn: %s", codeName(r.ErrorCode))
	}
	st := txnState(t, c, &corr, "app-1")
	if st.ErrorCode != 0 || st.State != "Ongoing" || st.ProducerID != pid || len(st.Topics) != 1 || len(st.Topics[0].Partitions) != 2 || st.TimeoutMillis != 60000 {
		t.Fatalf("DescribeTransactions: %+v", st)
	}
	if st := txnState(t, c, &corr, "nobody"); st.ErrorCode != kerr.TransactionalIDNotFound.Code {
		t.Fatalf("describe an unknown id: %s", codeName(st.ErrorCode))
	}
	lt := kmsg.NewPtrListTransactionsRequest()
	lt.Version, lt.StateFilters = 1, []string{"Ongoing", "Bogus"}
	lr := txnCall(t, c, &corr, lt).(*kmsg.ListTransactionsResponse)
	if lr.ErrorCode != 0 || len(lr.TransactionStates) != 1 || lr.TransactionStates[0].TransactionalID != "app-1" || fmt.Sprint(lr.UnknownStateFilters) != "[Bogus]" {
		t.Fatalf("ListTransactions: %+v", lr)
	}

	// A verification from a partition leader (v4, VerifyOnly).
	vr := kmsg.NewPtrAddPartitionsToTxnRequest()
	vr.Version = 4
	vt := kmsg.NewAddPartitionsToTxnRequestTransaction()
	vt.TransactionalID, vt.ProducerID, vt.ProducerEpoch, vt.VerifyOnly = "app-1", pid, epoch, true
	vtt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
	vtt.Topic, vtt.Partitions = "tx-out", []int32{1}
	vt.Topics = append(vt.Topics, vtt)
	vr.Transactions = append(vr.Transactions, vt)
	vresp := txnCall(t, c, &corr, vr).(*kmsg.AddPartitionsToTxnResponse)
	if vresp.ErrorCode != 0 || len(vresp.Transactions) != 1 || vresp.Transactions[0].Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("verify: %+v", vresp)
	}

	if r := endTxn(t, c, &corr, 4, "app-1", pid, epoch, true); r.ErrorCode != 0 {
		t.Fatalf("EndTxn: %s", codeName(r.ErrorCode))
	}
	testbed.Eventually(t, 10*time.Second, "CompleteCommit", func() (bool, string) {
		st := txnState(t, c, &corr, "app-1")
		return st.State == "CompleteCommit", st.State
	})
	if r := endTxn(t, c, &corr, 4, "app-1", pid, epoch, false); r.ErrorCode != kerr.InvalidTxnState.Code {
		t.Fatalf("abort after commit: %s", codeName(r.ErrorCode))
	}

	// The KIP-890 flow: EndTxn v5 answers the bumped epoch.
	if got := addParts(t, c, &corr, 3, "app-1", pid, epoch, "tx-out", 1); fmt.Sprint(got) != "[0]" {
		t.Fatalf("second transaction: %v", got)
	}
	er := endTxn(t, c, &corr, 5, "app-1", pid, epoch, false)
	if er.ErrorCode != 0 || er.ProducerID != pid || er.ProducerEpoch != epoch+1 {
		t.Fatalf("EndTxn v5: %s %d/%d", codeName(er.ErrorCode), er.ProducerID, er.ProducerEpoch)
	}
	epoch = er.ProducerEpoch

	// A new producer with the same id fences this one: PRODUCER_FENCED
	// from the versions that have it, INVALID_PRODUCER_EPOCH before.
	testbed.Eventually(t, 10*time.Second, "CompleteAbort", func() (bool, string) {
		st := txnState(t, c, &corr, "app-1")
		return st.State == "CompleteAbort", st.State
	})
	ir2 := initTxn(t, c, &corr, "app-1", 60000)
	if ir2.ErrorCode != 0 || ir2.ProducerID != pid || ir2.ProducerEpoch != epoch+1 {
		t.Fatalf("second producer: %s %d/%d", codeName(ir2.ErrorCode), ir2.ProducerID, ir2.ProducerEpoch)
	}
	for _, tc := range []struct {
		version int16
		want    int16
	}{{1, kerr.InvalidProducerEpoch.Code}, {3, kerr.ProducerFenced.Code}} {
		if got := addParts(t, c, &corr, tc.version, "app-1", pid, epoch, "tx-out", 0); got[0] != tc.want {
			t.Errorf("fenced AddPartitionsToTxn v%d: %s, want %s", tc.version, codeName(got[0]), codeName(tc.want))
		}
		if r := endTxn(t, c, &corr, tc.version, "app-1", pid, epoch, true); r.ErrorCode != tc.want {
			t.Errorf("fenced EndTxn v%d: %s, want %s", tc.version, codeName(r.ErrorCode), codeName(tc.want))
		}
	}
	if got := addParts(t, c, &corr, 3, "app-1", pid+1000, ir2.ProducerEpoch, "tx-out", 0); got[0] != kerr.InvalidProducerIDMapping.Code {
		t.Fatalf("another producer id: %s", codeName(got[0]))
	}
}

// TestTxnTimeoutFences: a producer that begins and vanishes is aborted
// after its timeout, with its epoch bumped: it is fenced when it comes
// back.
func TestTxnTimeoutFences(t *testing.T) {
	b := startBroker(t, engine.Options{AutoCreateTopics: true, Transactions: engine.TxnOptions{CheckInterval: 50 * time.Millisecond}})
	ctx := ctxT(t, 30*time.Second)
	if _, err := b.admin().CreateTopic(ctx, 1, 1, nil, "tx-slow"); err != nil {
		t.Fatal(err)
	}
	c := rawConn(t, b.addr)
	var corr int32
	ir := initTxn(t, c, &corr, "slow", 500)
	if got := addParts(t, c, &corr, 3, "slow", ir.ProducerID, ir.ProducerEpoch, "tx-slow", 0); got[0] != 0 {
		t.Fatalf("add: %s", codeName(got[0]))
	}
	testbed.Eventually(t, 10*time.Second, "the timed out transaction aborted", func() (bool, string) {
		st := txnState(t, c, &corr, "slow")
		return st.State == "CompleteAbort", st.State
	})
	if st := txnState(t, c, &corr, "slow"); st.ProducerEpoch != ir.ProducerEpoch+1 {
		t.Fatalf("epoch after the timeout: %d", st.ProducerEpoch)
	}
	for _, v := range []int16{4, 5} {
		if r := endTxn(t, c, &corr, v, "slow", ir.ProducerID, ir.ProducerEpoch, true); r.ErrorCode != kerr.ProducerFenced.Code {
			t.Fatalf("the vanished producer's EndTxn v%d: %s", v, codeName(r.ErrorCode))
		}
	}
}

// TestTxnKgoFencing: franz-go's transactional producer. A second client
// with the same transactional id bumps the epoch; the first one's next
// transaction is refused at its first produce (the KIP-890 implicit add
// finds the epoch fenced: INVALID_PRODUCER_EPOCH, as Kafka's produce
// answers it), and kgo reports it on the record.
func TestTxnKgoFencing(t *testing.T) {
	b := startBroker(t, engine.Options{AutoCreateTopics: true})
	ctx := ctxT(t, 30*time.Second)
	if _, err := b.admin().CreateTopic(ctx, 1, 1, nil, "tx-kgo"); err != nil {
		t.Fatal(err)
	}
	first := b.client(kgo.TransactionalID("kgo-app"), kgo.TransactionTimeout(20*time.Second), kgo.DefaultProduceTopic("tx-kgo"), kgo.RecordRetries(3))
	pid, e1, err := first.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	d, err := b.admin().DescribeTransactions(ctx, "kgo-app")
	if err != nil {
		t.Fatal(err)
	}
	if s, err := d.On("kgo-app", nil); err != nil || s.State != "Empty" || s.ProducerID != pid || s.ProducerEpoch != e1 || s.TimeoutMillis != 20000 {
		t.Fatalf("described: %+v %v", s, err)
	}
	second := b.client(kgo.TransactionalID("kgo-app"), kgo.DefaultProduceTopic("tx-kgo"))
	pid2, e2, err := second.ProducerID(ctx)
	if err != nil || pid2 != pid || e2 != e1+1 {
		t.Fatalf("second producer: %d/%d %v", pid2, e2, err)
	}
	if err := first.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	err = first.ProduceSync(ctx, &kgo.Record{Value: []byte("zombie")}).FirstErr()
	if !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("the fenced producer's record: %v, want INVALID_PRODUCER_EPOCH", err)
	}
	l, err := b.admin().ListTransactions(ctx, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s := l.Sorted(); len(s) != 1 || s[0].TxnID != "kgo-app" || s[0].State != "Empty" {
		t.Fatalf("listed: %+v", s)
	}
}

// TestTxnLibrdkafka: librdkafka's transactional producer (Debian's
// python3-confluent-kafka): init_transactions, a transaction committed
// (or, while the log refuses transactional batches, aborted as librdkafka
// asks), one aborted, and a zombie fenced by a second producer with the
// same transactional id.
func TestTxnLibrdkafka(t *testing.T) {
	py := needTool(t, "/usr/bin/python3", "-c", "import confluent_kafka")
	b := startBroker(t, engine.Options{AutoCreateTopics: true})
	ctx := ctxT(t, 120*time.Second)
	if _, err := b.admin().CreateTopic(ctx, 1, 1, nil, "tx-rk"); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, py, "testdata/txn_librdkafka.py", b.addr, "tx-rk")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	raw, err := cmd.Output()
	if err != nil {
		t.Fatalf("python: %v\n%s", err, stderr.String())
	}
	var got map[string]string
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatalf("python answered %q: %v\n%s", raw, err, stderr.String())
	}
	t.Logf("librdkafka: %v", got)
	for _, k := range []string{"init", "begin1", "begin2", "abort2", "init2", "begin3"} {
		if got[k] != "ok" {
			t.Errorf("%s: %q, want ok", k, got[k])
		}
	}
	if got["commit1"] != "ok" {
		t.Errorf("first transaction not committed: %v", got)
	}
	if z := got["zombie_commit"]; !strings.HasPrefix(z, "fatal:") || !strings.Contains(z, "FENCED") {
		t.Errorf("zombie commit: %q, want a fatal PRODUCER_FENCED", z)
	}
	// Two producers initialized: epoch 1; the zombie's transaction never
	// got in, and the last one ended as the script says.
	d, err := b.admin().DescribeTransactions(ctx, "rk-app")
	if err != nil {
		t.Fatal(err)
	}
	s, err := d.On("rk-app", nil)
	if err != nil || s.ProducerEpoch != 1 || (s.State != "CompleteAbort" && s.State != "Empty") {
		t.Fatalf("described after the run: %+v %v", s, err)
	}
}

// TestTxnACLs: a transactional producer needs WRITE on its transactional
// id (DESCRIBE to find its coordinator, which WRITE implies) and WRITE on
// the topics it adds; Describe/ListTransactions show only the ids the
// principal may describe.
func TestTxnACLs(t *testing.T) {
	b := startSecure(t, secureOpts{plain: true, plainSASL: []string{kafkawire.MechScramSHA256}, acls: true, super: []string{"User:admin"}})
	for _, u := range []string{"admin", "alice"} {
		b.addUser(u, "pw-"+u+"-1234")
	}
	as := func(u string, opts ...kgo.Opt) *kgo.Client {
		return b.client(b.plainAddr, append([]kgo.Opt{scram256(u, "pw-"+u+"-1234"), kgo.RequestRetries(1)}, opts...)...)
	}
	ctx := ctxT(t, 30*time.Second)
	admin := kadm.NewClient(as("admin"))
	if _, err := admin.CreateTopics(ctx, 1, 1, nil, "txa-open", "txa-secret"); err != nil {
		t.Fatal(err)
	}
	for _, acl := range []*kadm.ACLBuilder{
		kadm.NewACLs().TransactionalIDs("alice-tx").Allow("User:alice").Operations(kadm.OpWrite),
		kadm.NewACLs().Topics("txa-open").Allow("User:alice").Operations(kadm.OpWrite),
	} {
		if res, err := admin.CreateACLs(ctx, acl); err != nil || res[0].Err != nil {
			t.Fatalf("create ACL: %v %v", err, res)
		}
	}
	if _, _, err := as("admin", kgo.TransactionalID("admin-tx")).ProducerID(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, err := as("alice", kgo.TransactionalID("admin-tx")).ProducerID(ctx); !errors.Is(err, kerr.TransactionalIDAuthorizationFailed) {
		t.Fatalf("alice on an id she may not write: %v", err)
	}
	alice := as("alice", kgo.TransactionalID("alice-tx"))
	pid, epoch, err := alice.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	add := func(topic string) int16 {
		req := kmsg.NewPtrAddPartitionsToTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch = "alice-tx", pid, epoch
		rt := kmsg.NewAddPartitionsToTxnRequestTopic()
		rt.Topic, rt.Partitions = topic, []int32{0}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, alice)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	if code := add("txa-secret"); code != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("adding a topic alice may not write: %s", codeName(code))
	}
	if code := add("txa-open"); code != 0 {
		t.Fatalf("adding a topic alice may write: %s", codeName(code))
	}
	aliceAdm := kadm.NewClient(alice)
	l, err := aliceAdm.ListTransactions(ctx, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s := l.Sorted(); len(s) != 1 || s[0].TxnID != "alice-tx" || s[0].State != "Ongoing" {
		t.Fatalf("alice lists %+v, want only alice-tx", s)
	}
	if all, err := admin.ListTransactions(ctx, nil, nil); err != nil || len(all.Sorted()) != 2 {
		t.Fatalf("admin lists %+v %v", all.Sorted(), err)
	}
	req := kmsg.NewPtrDescribeTransactionsRequest()
	req.TransactionalIDs = []string{"admin-tx"}
	resp, err := req.RequestWith(ctx, alice)
	if err == nil && (len(resp.TransactionStates) != 1 || resp.TransactionStates[0].ErrorCode != kerr.TransactionalIDAuthorizationFailed.Code) {
		t.Fatalf("alice describing admin-tx: %+v", resp.TransactionStates)
	} else if err != nil && !errors.Is(err, kerr.TransactionalIDAuthorizationFailed) {
		t.Fatalf("alice describing admin-tx: %v", err)
	}
}
