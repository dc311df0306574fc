package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/korvet/korvet/cold"
	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/engine/auth"
	"github.com/korvet/korvet/engine/group"
	rkeys "github.com/korvet/korvet/engine/keys" // this package has a func keys
	"github.com/korvet/korvet/engine/record"
	"github.com/korvet/korvet/engine/registry"
	"github.com/korvet/korvet/engine/schema"
	"github.com/korvet/korvet/engine/share"
	"github.com/korvet/korvet/engine/txn"
	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/resp"
)

// TestStorageKeysWritten runs the engine, a consumer group, the user store
// and a topic deletion against a real Redis and pins every key they write,
// as Redis's keyspace notifications report it, with its type, and the
// stream entry IDs. A change to what korvet stores fails here.
func TestStorageKeysWritten(t *testing.T) {
	r := testbed.StartRedis(t)
	ctx := context.Background()
	quiet := slog.New(slog.DiscardHandler)
	rc, err := resp.New(r.URL, resp.Options{Timeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rc.Close() })
	seen := watchKeys(t, r, rc)
	store, err := cold.Open(ctx, cold.Config{Warehouse: "file://" + t.TempDir(), CacheDir: t.TempDir()}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.Open(ctx, rc, engine.Options{Logger: quiet, Cold: store, GroupInitialRebalanceDelay: -1, TieringInterval: 50 * time.Millisecond, TxnResolveInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(eng.Close)

	tp, err := eng.CreateTopic(ctx, "t", 1, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	p := tp.Partition(0)
	two := []record.Record{{Timestamp: 1, Value: []byte("a")}, {Timestamp: 2, Value: []byte("b")}}
	if _, _, err := p.AppendBatch(engine.NoProducer, 4, two).Wait(ctx); err != nil { // zstd
		t.Fatal(err)
	}
	if _, _, err := p.Append([]record.Record{{Timestamp: 3, Value: []byte("c")}}).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := streamIDs(t, rc, "korvet:storage:local:t:0:0"), []string{"0-5", "1-5", "2-1"}; !slices.Equal(got, want) {
		t.Errorf("record entry IDs %q, want %q", got, want)
	}
	if got, want := streamIDs(t, rc, "korvet:meta:batches:t:0"), []string{"1-1", "2-1"}; !slices.Equal(got, want) {
		t.Errorf("batches entry IDs %q, want %q", got, want)
	}
	// A round fenced: another broker's claim (a new epoch) lands, this
	// broker's next append is refused by its fence check, which counts
	// it in the fence key, and the partition is claimed back.
	_, epoch := p.Leader()
	if _, err := rc.Do(ctx, "HSET", "korvet:meta:partition:t:0", "leader", 7, "leader_epoch", epoch+1); err != nil {
		t.Fatal(err)
	}
	if _, _, err := p.Append([]record.Record{{Timestamp: 3, Value: []byte("fenced")}}).Wait(ctx); !errors.Is(err, engine.ErrNotLeader) {
		t.Fatalf("append after another broker's claim: %v, want ErrNotLeader", err)
	}
	if v, err := rc.Do(ctx, "GET", "korvet:meta:fence:t:0"); err != nil || string(v.Bytes()) != "1" {
		t.Errorf("fence counter %q (%v), want 1", v.Bytes(), err)
	}
	testbed.WaitFor(t, 20*time.Second, "t/0 claimed back", func() bool {
		_, ep := p.Leader()
		return p.IsLeader() && ep > epoch+1
	})
	// A committed and an aborted transaction: records with __txn, markers
	// as control entries, the open transaction in the partition hash
	// until its marker, and the aborted index.
	txp := engine.Producer{ID: 1000, Epoch: 2, Transactional: true, TransactionalID: "st"}
	if _, _, err := p.AppendBatch(txp, 0, []record.Record{{Timestamp: 4, Key: []byte("k"), Value: []byte("d")}}).Wait(ctx); err != nil { // 3
		t.Fatal(err)
	}
	if v, err := rc.Do(ctx, "HGET", "korvet:meta:partition:t:0", "txn:1000"); err != nil || string(v.Bytes()) != "2,3,st" {
		t.Errorf("open transaction field %q (%v), want 2,3,st", v.Bytes(), err)
	}
	if _, err := p.WriteMarker(ctx, engine.Marker{ProducerID: 1000, Epoch: 2, Commit: true, CoordinatorEpoch: 1}); err != nil { // 4
		t.Fatal(err)
	}
	txp.FirstSeq = 1
	if _, _, err := p.AppendBatch(txp, 0, []record.Record{{Timestamp: 5, Value: []byte("e")}}).Wait(ctx); err != nil { // 5
		t.Fatal(err)
	}
	if _, err := p.WriteMarker(ctx, engine.Marker{ProducerID: 1000, Epoch: 2}); err != nil { // 6
		t.Fatal(err)
	}
	if got, want := streamIDs(t, rc, "korvet:storage:local:t:0:0"), []string{"0-5", "1-5", "2-1", "3-1", "4-1", "5-1", "6-1"}; !slices.Equal(got, want) {
		t.Errorf("record entry IDs with transactions %q, want %q", got, want)
	}
	if got, want := streamIDs(t, rc, "korvet:meta:aborted:t:0"), []string{"6-1"}; !slices.Equal(got, want) {
		t.Errorf("aborted index entry IDs %q, want %q", got, want)
	}
	entries, err := rc.Do(ctx, "XRANGE", "korvet:storage:local:t:0:0", "3", "6")
	if err != nil {
		t.Fatal(err)
	}
	var fields []string
	entries.ForEach(func(e resp.Reply) bool {
		var pair []resp.Reply
		pair = e.Elems(pair)
		var f []string
		pair[1].ForEach(func(x resp.Reply) bool { f = append(f, fmt.Sprintf("%q", x.Bytes())); return true })
		fields = append(fields, strings.Join(f, " "))
		return true
	})
	if len(fields) != 4 {
		t.Fatalf("%d transaction entries, want 4", len(fields))
	}
	// Markers carry the time they were written.
	if want := []string{
		`"__ts" "4" "__txn" "1000.2" "__key" "k" "__value" "d"`,
		`"__ts" "` + strings.Split(fields[1], `"`)[3] + `" "__txn" "1000.2" "__ctl" "" "__key" "\x00\x00\x00\x01" "__value" "\x00\x00\x00\x00\x00\x01"`,
		`"__ts" "5" "__txn" "1000.2" "__value" "e"`,
		`"__ts" "` + strings.Split(fields[3], `"`)[3] + `" "__txn" "1000.2" "__ctl" "" "__key" "\x00\x00\x00\x00" "__value" "\x00\x00\x00\x00\x00\x00"`,
	}; !slices.Equal(fields, want) {
		t.Errorf("transaction entries\n%s\nwant\n%s", strings.Join(fields, "\n"), strings.Join(want, "\n"))
	}
	if n, err := rc.Do(ctx, "HEXISTS", "korvet:meta:partition:t:0", "txn:1000"); err != nil || string(n.Bytes()) != "0" {
		t.Errorf("open transaction field left after its marker (%v)", err)
	}

	groups := eng.Groups()
	j, err := groups.Join(ctx, group.JoinRequest{Group: "g", ClientID: "c", SessionTimeout: 10 * time.Second, RebalanceTimeout: time.Second,
		ProtocolType: "consumer", Protocols: []group.Protocol{{Name: "range"}}})
	if err != nil {
		t.Fatalf("join: %v", err)
	}
	if _, err := groups.Sync(ctx, group.SyncRequest{Group: "g", MemberID: j.MemberID, Generation: j.Generation,
		Assignments: map[string][]byte{j.MemberID: []byte("a")}}); err != nil {
		t.Fatalf("sync: %v", err)
	}
	if _, err := groups.Commit(ctx, group.CommitRequest{Group: "g", MemberID: j.MemberID, Generation: j.Generation,
		Offsets: []group.PartitionCommit{{TopicPartition: group.TopicPartition{Topic: "t", Partition: 0}, Commit: group.Commit{Offset: 3, LeaderEpoch: -1}}}}); err != nil {
		t.Fatalf("commit: %v", err)
	}
	// An offset committed inside a transaction: pending in txnoffsets
	// until the transaction's end moves it to offsets.
	if _, err := groups.TxnCommit(ctx, group.TxnCommitRequest{Group: "g", Generation: -1, ProducerID: 1,
		Offsets: []group.PartitionCommit{{TopicPartition: group.TopicPartition{Topic: "t", Partition: 0}, Commit: group.Commit{Offset: 4, LeaderEpoch: -1}}}}); err != nil {
		t.Fatalf("transactional commit: %v", err)
	}
	if err := groups.CompleteTxn(ctx, "g", 1, true); err != nil {
		t.Fatalf("complete transactional offsets: %v", err)
	}
	// A KIP-848 consumer group.
	if _, err := groups.ConsumerHeartbeat(group.ConsumerHeartbeatRequest{Group: "cg", MemberID: "m1", RebalanceTimeout: time.Second,
		TopicNames: []string{"t"}, Owned: group.Assignment{}}); err != nil {
		t.Fatalf("consumer group heartbeat: %v", err)
	}

	users, err := auth.Open(ctx, rc, auth.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := users.AddUserIfAbsent(ctx, "u", "secret-password", 4096); err != nil {
		t.Fatal(err)
	}
	if err := users.CreateACLs(ctx, []auth.ACL{{Principal: "User:u", Host: "*", ResourceType: auth.ResTopic, Pattern: auth.PatternLiteral,
		Resource: "t", Operation: auth.OpRead, Permission: auth.PermAllow}}); err != nil {
		t.Fatal(err)
	}

	// A transactional id: its state.
	if _, _, err := eng.Txns().InitProducerID(ctx, txn.InitRequest{ID: "tx", TimeoutMs: 60000, ProducerID: -1, Epoch: -1}); err != nil {
		t.Fatalf("init transactional id: %v", err)
	}

	// A share group reading a topic whose first segment is in the cold
	// tier only: its group, configs, share-partition state, index and
	// cold delivery state.
	sq, err := eng.CreateTopic(ctx, "s", 1, map[string]string{"remote.storage.enable": "true", "segment.bytes": "1000", "local.retention.ms": "0"}, false)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, _, err := sq.Partition(0).Append([]record.Record{{Timestamp: int64(i), Value: []byte(strings.Repeat("x", 900))}}).Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	testbed.WaitFor(t, 20*time.Second, "a cold segment", func() bool { return !sq.Partition(0).Segments()[0].Local })
	if err := eng.IncrementalAlterGroupConfigs(ctx, "sg", []engine.ConfigOp{{Name: "share.auto.offset.reset", Value: "earliest"}}, false); err != nil {
		t.Fatal(err)
	}
	if _, err := eng.ShareHeartbeat(ctx, share.HeartbeatRequest{Group: "sg", MemberID: "m", Topics: []string{"s"}}); err != nil {
		t.Fatal(err)
	}
	if recs, err := eng.ShareAcquire(ctx, "sg", "m", sq.Partition(0), 10, 1<<20); err != nil || len(recs.Records) == 0 {
		t.Fatalf("share acquire: %v", err)
	}

	// A topic stored with zstd: its dictionary, and entries naming it.
	zt, err := eng.CreateTopic(ctx, "z", 1, map[string]string{"korvet.storage.compression": "zstd", "korvet.storage.compression.min.bytes": "0"}, false)
	if err != nil {
		t.Fatal(err)
	}
	var zrecs []record.Record
	for i := range 20 {
		zrecs = append(zrecs, record.Record{Timestamp: int64(i), Value: fmt.Appendf(nil, `{"sensor": "s-%d", "reading": %d, "unit": "celsius", "site": "greenhouse"}`, i%3, i)})
	}
	if _, _, err := zt.Partition(0).Append(zrecs).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if v, err := eng.TrainZstdDict(ctx, "z"); err != nil || v != 1 {
		t.Fatalf("train a dictionary: version %d, %v", v, err)
	}
	if _, _, err := zt.Partition(0).Append(zrecs[:1]).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if last, err := rc.Do(ctx, "XREVRANGE", "korvet:storage:local:z:0:0", "+", "-", "COUNT", 1); err != nil || !strings.Contains(fmt.Sprintf("%q", last.Elems(nil)[0].Elems(nil)[1].Elems(nil)[2].Bytes()), "__zstd.1") {
		t.Errorf("the record after the dictionary is not stored as __zstd.1 (%v)", err)
	}

	// The schema registry: a schema, its id, the subject, a level.
	reg, err := registry.Open(ctx, rc, registry.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := reg.Register(ctx, "t-value", schema.Source{Format: schema.Avro, Text: `"string"`}, registry.RegisterOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := reg.SetLevel(ctx, "t-value", schema.Full); err != nil {
		t.Fatal(err)
	}

	if err := eng.DeleteTopic(ctx, "t"); err != nil { // queues the topic's cold table for deletion
		t.Fatal(err)
	}

	want := map[string]string{ // key -> Redis type
		"korvet:meta:cluster":             "hash",
		"korvet:meta:topics":              "hash",
		"korvet:meta:partition:t:0":       "hash",
		"korvet:meta:segments:t:0":        "hash",
		"korvet:meta:batches:t:0":         "stream",
		"korvet:meta:aborted:t:0":         "stream",
		"korvet:meta:fence:t:0":           "string",
		"korvet:storage:local:t:0:0":      "stream",
		"korvet:meta:groups":              "hash",
		"korvet:group:g:state":            "string",
		"korvet:group:g:offsets":          "hash",
		"korvet:group:g:txnoffsets":       "hash",
		"korvet:meta:scram:SCRAM-SHA-256": "hash",
		"korvet:meta:scram:SCRAM-SHA-512": "hash",
		"korvet:meta:acls":                "set",
		"korvet:meta:coldgc":              "set",
		"korvet:group:cg:consumer":        "string",
		"korvet:meta:transactions":        "hash",
	}
	for k, typ := range map[string]string{
		"korvet:meta:partition:s:0":  "hash",
		"korvet:meta:segments:s:0":   "hash",
		"korvet:meta:batches:s:0":    "stream",
		"korvet:meta:sharegroups":    "hash",
		"korvet:meta:groupconfigs":   "hash",
		"korvet:meta:events":         "stream",
		"korvet:share:sg:s:0":        "hash",
		"korvet:share:sg:partitions": "set",
		"korvet:share:sg:s:0:cold":   "hash",
		// Membership and leadership: the registry, this broker's lease,
		// and the leader fields of the internal topic's partition.
		"korvet:meta:schemas":                        "hash",
		"korvet:meta:schemaids":                      "hash",
		"korvet:meta:subjects":                       "hash",
		"korvet:meta:schemaconfig":                   "hash",
		"korvet:meta:brokers":                        "hash",
		"korvet:meta:broker:0":                       "string",
		"korvet:meta:partition:__consumer_offsets:0": "hash",
		"korvet:meta:partition:z:0":                  "hash",
		"korvet:meta:segments:z:0":                   "hash",
		"korvet:meta:batches:z:0":                    "stream",
		"korvet:storage:local:z:0:0":                 "stream",
		"korvet:meta:zdict:z":                        "hash",
	} {
		want[k] = typ
	}
	// Every segment of s had its stream (archived ones' since dropped).
	for _, sg := range sq.Partition(0).Segments() {
		want["korvet:storage:local:s:0:"+strconv.FormatInt(sg.ID, 10)] = "stream"
	}
	// Redis notifies in order on one connection: once the marker's
	// notification is in, every write before it is too.
	const marker = "storage-test:marker"
	if _, err := rc.Do(ctx, "SET", marker, "1"); err != nil {
		t.Fatal(err)
	}
	testbed.WaitFor(t, 10*time.Second, "the marker's notification", func() bool {
		_, ok := seen.snapshot()[marker]
		return ok
	})
	got := seen.snapshot()
	delete(got, marker)
	for k := range want {
		if _, ok := got[k]; !ok {
			t.Errorf("korvet did not write %s", k)
		}
	}
	for k, typ := range got {
		switch wantType, ok := want[k]; {
		case !ok:
			t.Errorf("korvet wrote %q (%s), which this test does not expect", k, typ)
		case typ != wantType:
			t.Errorf("%s: written as a %s, want a %s", k, typ, wantType)
		}
	}
	// The scenario writes every kind of key package keys lists.
	for _, k := range rkeys.Layout() {
		re := regexp.MustCompile("^" + placeholder.ReplaceAllString(regexp.QuoteMeta(k.Pattern), "[^:]+") + "$")
		if !slices.ContainsFunc(slices.Collect(maps.Keys(want)), re.MatchString) {
			t.Errorf("no key of %s in this test: add it to the scenario", k.Pattern)
		}
	}
	if t.Failed() {
		t.Logf("keys written: %q", slices.Sorted(maps.Keys(got)))
	}
}

// placeholder matches a {placeholder} of a keys.Layout pattern after
// regexp.QuoteMeta.
var placeholder = regexp.MustCompile(`\\\{[a-z]+\\\}`)

// keyWatch collects the keys Redis reports written, each with the type
// its write commands imply ("" while only type-neutral events came, such
// as del).
type keyWatch struct {
	mu   sync.Mutex
	keys map[string]string
}

func (w *keyWatch) snapshot() map[string]string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.keys)
}

// eventType maps keyspace events to the type of the key they touch.
var eventType = map[string]string{
	"set": "string", "incrby": "string", "hset": "hash", "hincrby": "hash", "hdel": "hash", "sadd": "set", "srem": "set",
	"xadd": "stream", "xtrim": "stream", "xdel": "stream",
}

// watchKeys turns on Redis's keyspace notifications and collects them on a
// connection of its own until the test ends.
func watchKeys(t *testing.T, r *testbed.Redis, rc *resp.Client) *keyWatch {
	t.Helper()
	if _, err := rc.Do(context.Background(), "CONFIG", "SET", "notify-keyspace-events", "KA"); err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", r.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	const prefix = "__keyspace@0__:"
	if _, err := conn.Write([]byte("PSUBSCRIBE " + prefix + "*\r\n")); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	if msg, err := readPush(br); err != nil || len(msg) != 3 || msg[0] != "psubscribe" {
		t.Fatalf("PSUBSCRIBE: %q %v", msg, err)
	}
	w := &keyWatch{keys: map[string]string{}}
	go func() {
		for {
			msg, err := readPush(br)
			if err != nil {
				return // the connection closed with the test
			}
			if len(msg) != 4 || msg[0] != "pmessage" || !strings.HasPrefix(msg[2], prefix) {
				continue
			}
			key, typ := msg[2][len(prefix):], eventType[msg[3]]
			w.mu.Lock()
			switch cur, ok := w.keys[key]; {
			case !ok || cur == "":
				w.keys[key] = typ
			case typ != "" && typ != cur:
				w.keys[key] = cur + "+" + typ // two types: the test reports it
			}
			w.mu.Unlock()
		}
	}()
	return w
}

// readPush reads one RESP2 array of bulk strings and integers, as pub/sub
// sends them.
func readPush(br *bufio.Reader) ([]string, error) {
	line := func() (string, error) {
		l, err := br.ReadString('\n')
		return strings.TrimSuffix(l, "\r\n"), err
	}
	head, err := line()
	if err != nil {
		return nil, err
	}
	n, err := strconv.Atoi(strings.TrimPrefix(head, "*"))
	if err != nil || !strings.HasPrefix(head, "*") {
		return nil, fmt.Errorf("not an array: %q", head)
	}
	out := make([]string, 0, n)
	for range n {
		h, err := line()
		if err != nil {
			return nil, err
		}
		switch {
		case strings.HasPrefix(h, ":"):
			out = append(out, h[1:])
		case strings.HasPrefix(h, "$"):
			size, err := strconv.Atoi(h[1:])
			if err != nil || size < 0 {
				return nil, fmt.Errorf("bad bulk length %q", h)
			}
			b := make([]byte, size+2)
			if _, err := io.ReadFull(br, b); err != nil {
				return nil, err
			}
			out = append(out, string(b[:size]))
		default:
			return nil, fmt.Errorf("unexpected %q", h)
		}
	}
	return out, nil
}

// TestReadmeStorageTable checks the README's table of Redis keys against
// package keys, both ways: a key korvet writes but the README does not
// document fails, and so does a README row no code builds.
func TestReadmeStorageTable(t *testing.T) {
	rows := readmeStorageRows(t)
	want := map[string]string{} // pattern -> Redis type
	for _, k := range rkeys.Layout() {
		want[k.Pattern] = k.Type
		row, ok := rows[k.Pattern]
		switch {
		case !ok:
			t.Errorf("README's storage table lacks %s (%s: %s)", k.Pattern, k.Type, k.Holds)
		case row.typ != k.Type:
			t.Errorf("README says %s is a %s; package keys says %s", k.Pattern, row.typ, k.Type)
		case row.cluster != k.Cluster:
			t.Errorf("README says %s is %s on a Redis Cluster; package keys says %s", k.Pattern, row.cluster, k.Cluster)
		}
	}
	for pattern := range rows {
		if _, ok := want[pattern]; !ok {
			t.Errorf("README's storage table has %s, which package keys does not build", pattern)
		}
	}
}

// storageRow is a row of the README's storage table.
type storageRow struct{ typ, cluster string }

// readmeStorageRows returns the rows of the table under "## How data is
// stored": key pattern (the first cell, in backticks) -> Redis type and
// the key on a Redis Cluster (the third cell, in backticks).
func readmeStorageRows(t *testing.T) map[string]storageRow {
	t.Helper()
	f, err := os.Open("README.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows := map[string]storageRow{}
	in, inTable := false, false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			in = line == "## How data is stored"
			continue
		}
		if !in {
			continue
		}
		if !strings.HasPrefix(line, "|") {
			if inTable {
				break // the table ended
			}
			continue
		}
		inTable = true
		cells := strings.SplitN(line, "|", 5)
		if len(cells) < 5 {
			t.Fatalf("README storage table: bad row %q", line)
		}
		key, typ := strings.TrimSpace(cells[1]), strings.TrimSpace(cells[2])
		if key == "Redis key" || strings.HasPrefix(key, "---") {
			continue // header and separator
		}
		pattern, ok := strings.CutPrefix(key, "`")
		pattern, ok2 := strings.CutSuffix(pattern, "`")
		if !ok || !ok2 {
			t.Fatalf("README storage table: key %q is not in backticks", key)
		}
		if _, dup := rows[pattern]; dup {
			t.Errorf("README storage table lists %s twice", pattern)
		}
		rows[pattern] = storageRow{typ: typ, cluster: strings.Trim(strings.TrimSpace(cells[3]), "`")}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(rows) == 0 {
		t.Fatal(`README.md has no table under "## How data is stored"`)
	}
	return rows
}
