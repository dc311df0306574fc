package engine_test

import (
	"context"
	"fmt"
	"io"
	"reflect"
	"testing"
	"time"

	"github.com/korvet/korvet/cold"
	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/engine/record"
	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/internal/testbed/enginetest"
)

// tieredTopicConfig seals a segment every ~4 KB, archives it and lets it
// leave Redis at once.
var tieredTopicConfig = map[string]string{"remote.storage.enable": "true", "segment.bytes": "4000", "local.retention.ms": "0", "retention.ms": "-1"}

// coldBackends runs a test against a cold tier in a local dir and on S3
// (versitygw).
func coldBackends(t *testing.T, run func(t *testing.T, cfg cold.Config)) {
	t.Run("local", func(t *testing.T) { run(t, enginetest.LocalWarehouse(t)) })
	t.Run("versitygw", func(t *testing.T) { run(t, enginetest.S3Warehouse(testbed.StartVersityGW(t), "korvet")) })
}

// tieredRecords is what a test appends to partition p: keys, null keys
// and values, empty values and headers, timestamps rising from ts0.
func tieredRecords(p int32, n int, ts0 int64) []record.Record {
	out := make([]record.Record, n)
	for i := range out {
		r := record.Record{Offset: int64(i), Timestamp: ts0 + int64(i), Key: fmt.Appendf(nil, "key-%d-%d", p, i),
			Value: fmt.Appendf(nil, "value %d %d %080d", p, i, i)}
		switch {
		case i%7 == 0:
			r.Key = nil
		case i%11 == 0:
			r.Value = nil
		case i%13 == 0:
			r.Value = []byte{}
		}
		if i%5 == 0 {
			r.Headers = []record.Header{{Key: []byte("h"), Value: fmt.Appendf(nil, "%d", i)}, {Key: []byte("null"), Value: nil}}
		}
		out[i] = r
	}
	return out
}

// appendAll appends recs to p ten at a time.
func appendAll(t *testing.T, p *engine.Partition, recs []record.Record) {
	t.Helper()
	for i := 0; i < len(recs); i += 10 {
		batch := append([]record.Record(nil), recs[i:min(i+10, len(recs))]...)
		if _, _, err := p.Append(batch).Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// waitTiered waits until only the open segment of each partition is still
// in Redis: everything sealed was archived and left.
func waitTiered(t *testing.T, e *engine.Engine, topic string) {
	t.Helper()
	const within = 60 * time.Second
	for deadline := time.Now().Add(within); ; {
		local, archived := 0, 0
		for _, p := range e.Topic(topic).Partitions() {
			for _, sg := range p.Segments() {
				if sg.Local {
					local++
				}
				if sg.State == engine.SegmentArchived {
					archived++
				}
			}
		}
		if local == len(e.Topic(topic).Partitions()) && archived > 0 {
			return
		}
		if time.Now().After(deadline) {
			st, _ := e.Tiering()
			t.Fatalf("after %v: %d local segments, %d archived; tiering %+v", within, local, archived, st)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func checkLog(t *testing.T, p *engine.Partition, want []record.Record) {
	t.Helper()
	got := readAll(t, p)
	if len(got) != len(want) {
		t.Fatalf("partition %d: read %d records, want %d", p.ID(), len(got), len(want))
	}
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Fatalf("partition %d, record %d:\n got %+v\nwant %+v", p.ID(), i, got[i], want[i])
		}
	}
}

// Sealed segments go to the cold tier and leave Redis; reads run across
// both tiers byte-exact, null and empty apart, also after a restart, and
// offsets by time are found in archived segments.
func TestReadAcrossTiers(t *testing.T) {
	coldBackends(t, func(t *testing.T, cfg cold.Config) {
		r := testbed.StartRedis(t)
		opts := engine.Options{Cold: enginetest.Cold(t, cfg), TieringInterval: 50 * time.Millisecond}
		e, _ := enginetest.Open(t, r, opts)
		ctx := context.Background()
		tp, err := e.CreateTopic(ctx, "tiered", 2, tieredTopicConfig, false)
		if err != nil {
			t.Fatal(err)
		}
		ts0 := time.Now().UnixMilli()
		want := make([][]record.Record, 2)
		for i, p := range tp.Partitions() {
			want[i] = tieredRecords(p.ID(), 200, ts0)
			appendAll(t, p, want[i])
		}
		waitTiered(t, e, "tiered")

		st, ok := e.Tiering()
		var archived, archivedRecords int64
		for i, p := range tp.Partitions() {
			checkLog(t, p, want[i])
			segs := p.Segments()
			open := segs[len(segs)-1]
			if p.LocalStart() != open.Base || p.LastTiered() != open.Base-1 {
				t.Fatalf("partition %d: local start %d, last tiered %d; open segment from %d", i, p.LocalStart(), p.LastTiered(), open.Base)
			}
			for _, sg := range segs[:len(segs)-1] {
				archived++
				archivedRecords += sg.Last - sg.Base + 1
			}
			// Record 2 is in the first segment, in the cold tier now.
			if off, ts, err := p.OffsetForTime(ctx, ts0+2); err != nil || off != 2 || ts != ts0+2 {
				t.Fatalf("partition %d: offset for time in the cold tier: %d at %d, %v", i, off, ts, err)
			}
			if off, _, err := p.OffsetForTime(ctx, 0); err != nil || off != 0 {
				t.Fatalf("partition %d: offset for time 0: %d %v", i, off, err)
			}
		}
		if !ok || st.Archived != archived || st.ArchivedRecords != archivedRecords || st.BacklogSegments != 0 ||
			st.LastArchived == nil || st.LastArchived.Topic != "tiered" {
			t.Fatalf("tiering status %+v; want %d segments with %d records archived", st, archived, archivedRecords)
		}

		// A restart: the registry in Redis, the files in the cold tier.
		e.Close()
		opts.Cold = enginetest.Cold(t, cfg)
		e2, _ := enginetest.Open(t, r, opts)
		for i, p := range e2.Topic("tiered").Partitions() {
			checkLog(t, p, want[i])
		}
	})
}

// With the object store down, sealed segments stay in Redis and reads
// keep working; when it returns, archiving resumes and nothing is lost.
func TestArchivingSurvivesS3Outage(t *testing.T) {
	s3 := testbed.StartVersityGW(t)
	r := testbed.StartRedis(t)
	e, _ := enginetest.Open(t, r, engine.Options{Cold: enginetest.Cold(t, enginetest.S3Warehouse(s3, "korvet")), TieringInterval: 100 * time.Millisecond})
	ctx := context.Background()
	tp, err := e.CreateTopic(ctx, "outage", 2, tieredTopicConfig, false)
	if err != nil {
		t.Fatal(err)
	}
	s3.Stop()
	want := make([][]record.Record, 2)
	for i, p := range tp.Partitions() {
		want[i] = tieredRecords(p.ID(), 200, time.Now().UnixMilli())
		appendAll(t, p, want[i])
	}
	testbed.WaitFor(t, 30*time.Second, "a backlog and errors with S3 down", func() bool {
		st, _ := e.Tiering()
		if st.Archived > 0 {
			t.Fatalf("with S3 down: %+v, want a backlog, errors and nothing archived", st)
		}
		return st.BacklogSegments > 0 && st.Errors > 0
	})
	for i, p := range tp.Partitions() {
		checkLog(t, p, want[i])
	}
	s3.Restart(t)
	waitTiered(t, e, "outage")
	for i, p := range tp.Partitions() {
		checkLog(t, p, want[i])
	}
}

// With less archive memory than one segment holds, segments archive one
// at a time, and all of them.
func TestArchivingInSmallMemory(t *testing.T) {
	r := testbed.StartRedis(t)
	e, _ := enginetest.Open(t, r, engine.Options{Cold: enginetest.Cold(t, enginetest.S3Warehouse(testbed.StartVersityGW(t), "korvet")),
		TieringInterval: 50 * time.Millisecond, ArchiveMemory: 1})
	tp, err := e.CreateTopic(context.Background(), "small", 3, tieredTopicConfig, false)
	if err != nil {
		t.Fatal(err)
	}
	want := make([][]record.Record, 3)
	for i, p := range tp.Partitions() {
		want[i] = tieredRecords(p.ID(), 300, time.Now().UnixMilli())
		appendAll(t, p, want[i])
	}
	waitTiered(t, e, "small")
	for i, p := range tp.Partitions() {
		checkLog(t, p, want[i])
	}
	if st, _ := e.Tiering(); st.Errors != 0 {
		t.Fatalf("tiering errors: %+v", st)
	}
}

// Deleting records past archived segments deletes their cold files too.
func TestDeleteRecordsRemovesColdFiles(t *testing.T) {
	r := testbed.StartRedis(t)
	store := enginetest.Cold(t, enginetest.LocalWarehouse(t))
	e, _ := enginetest.Open(t, r, engine.Options{Cold: store, TieringInterval: 50 * time.Millisecond})
	ctx := context.Background()
	tp, err := e.CreateTopic(ctx, "gc", 1, tieredTopicConfig, false)
	if err != nil {
		t.Fatal(err)
	}
	p := tp.Partition(0)
	want := tieredRecords(0, 200, time.Now().UnixMilli())
	appendAll(t, p, want)
	waitTiered(t, e, "gc")
	segs := p.Segments()
	if len(segs) < 4 {
		t.Fatalf("%d segments: the test wants several archived", len(segs))
	}
	files, err := store.Files(ctx, "gc")
	if err != nil || len(files) != len(segs)-1 {
		t.Fatalf("%d cold files for %d archived segments: %v", len(files), len(segs)-1, err)
	}

	// Up to the middle of the third segment: two files go.
	to := segs[2].Base + 1
	if start, err := p.DeleteRecords(ctx, to); err != nil || start != to {
		t.Fatalf("delete records to %d: %d %v", to, start, err)
	}
	testbed.WaitFor(t, 30*time.Second, "cold files of deleted segments removed", func() bool {
		files, err = store.Files(ctx, "gc")
		return err == nil && len(files) == len(segs)-3
	})
	for _, f := range files {
		if f.MaxOffset < to {
			t.Fatalf("file %s of offsets [%d, %d] kept after deleting to %d", f.Path, f.MinOffset, f.MaxOffset, to)
		}
	}
	checkLog(t, p, want[to:])
}

// Reads of archived segments return the records' transaction info
// (ReadResult.Txns) as the cold tier keeps it. The log here writes no
// transactional entries of its own, so segment 0's file is archived by hand
// with transaction info (as a leader that died before marking it archived
// would leave it); the engine then finds the file in the table, marks the
// segment archived and drops its stream, and reads go to the file.
func TestColdReadKeepsTxnInfo(t *testing.T) {
	r := testbed.StartRedis(t)
	ctx := context.Background()
	wh := enginetest.LocalWarehouse(t)
	e, _ := enginetest.Open(t, r, engine.Options{Cold: enginetest.Cold(t, wh), TieringInterval: time.Hour})
	tp, err := e.CreateTopic(ctx, "txcold", 1, tieredTopicConfig, false)
	if err != nil {
		t.Fatal(err)
	}
	p := tp.Partition(0)
	want := tieredRecords(0, 200, time.Now().UnixMilli())
	appendAll(t, p, want)
	sg := p.Segments()[0]
	if sg.State != engine.SegmentSealed || sg.Last < 20 {
		t.Fatalf("segment 0: %+v, want sealed with 20 records or more", sg)
	}
	txnOf := func(off int64) record.Txn {
		switch {
		case off >= 10 && off < 20:
			return record.Txn{ProducerID: -1} // a stretch without transactions
		case off%10 == 3 || off%10 == 4:
			return record.Txn{ProducerID: 5, Epoch: 1}
		case off%10 == 5:
			return record.Txn{ProducerID: 5, Epoch: 1, Control: true}
		}
		return record.Txn{ProducerID: -1}
	}
	res, err := p.Read(ctx, 0, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	var recs []record.Record
	var txns []record.Txn
	for _, rec := range res.Records {
		if rec.Offset <= sg.Last {
			recs = append(recs, cloneRecord(rec))
			txns = append(txns, txnOf(rec.Offset))
		}
	}
	res.Release()
	if int64(len(recs)) != sg.Last+1 {
		t.Fatalf("read %d records of segment 0, want %d", len(recs), sg.Last+1)
	}
	done := false
	if _, err := enginetest.Cold(t, wh).Archive(ctx, cold.SegmentRef{Topic: "txcold", TopicID: tp.ID(), Partition: 0, Segment: sg.ID, BaseOffset: sg.Base, LastOffset: sg.Last},
		func() ([]record.Record, []record.Txn, error) {
			if done {
				return nil, nil, io.EOF
			}
			done = true
			return recs, txns, nil
		}); err != nil {
		t.Fatal(err)
	}
	e.Close()

	e2, _ := enginetest.Open(t, r, engine.Options{Cold: enginetest.Cold(t, wh), TieringInterval: 50 * time.Millisecond})
	p2 := e2.Topic("txcold").Partition(0)
	testbed.WaitFor(t, 30*time.Second, "segment 0 archived and gone from Redis", func() bool {
		s := p2.Segments()[0]
		return s.State == engine.SegmentArchived && !s.Local
	})
	check := func(from int64, maxBytes int) (next int64) {
		t.Helper()
		res, err := p2.Read(ctx, from, maxBytes)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Release()
		if len(res.Records) == 0 {
			t.Fatalf("no records at %d", from)
		}
		some := false
		for _, rec := range res.Records {
			if tx := txnOf(rec.Offset); tx.ProducerID >= 0 && rec.Offset <= sg.Last {
				some = true
			}
		}
		if !some {
			if len(res.Txns) != 0 {
				t.Fatalf("read at %d: %d txn entries for records outside transactions", from, len(res.Txns))
			}
		} else {
			if len(res.Txns) != len(res.Records) {
				t.Fatalf("read at %d: %d txn entries for %d records", from, len(res.Txns), len(res.Records))
			}
			for i, rec := range res.Records {
				if res.Txns[i] != txnOf(rec.Offset) {
					t.Fatalf("offset %d: txn %+v, want %+v", rec.Offset, res.Txns[i], txnOf(rec.Offset))
				}
			}
		}
		return res.Records[len(res.Records)-1].Offset + 1
	}
	if next := check(0, 1<<30); next != sg.Last+1 {
		t.Fatalf("read of segment 0 ended at %d, want %d", next, sg.Last+1)
	}
	check(11, 500) // inside the stretch without transactions
	for from := int64(0); from <= sg.Last; {
		from = check(from, 300)
	}
	check(sg.Last+1, 1<<30) // the next segment, in Redis: no transactions
	checkLog(t, p2, want)
}
