package cold

import (
	"encoding/binary"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/parquet-go/parquet-go"

	"github.com/korvet/korvet/engine/record"
)

// txnSegment is n records from base as a log with transactions holds
// them: plain records, two producers' transactional records (one at the
// largest epoch), and their commit and abort markers (control records
// with Kafka's control key and value bytes), with a stretch of plain
// records long enough to fill row groups without any transaction.
func txnSegment(base int64, n int) ([]record.Record, []record.Txn) {
	recs := makeRecords(base, n)
	txns := make([]record.Txn, n)
	marker := func(commit bool) ([]byte, []byte) {
		k := binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, 0), uint16(btoi(commit)))
		v := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint16(nil, 0), 3)
		return k, v
	}
	for i := range txns {
		txns[i] = record.Txn{ProducerID: -1}
		switch {
		case i >= n/2 && i < n/2+n/4:
			// plain records only
		case i%10 == 3 || i%10 == 4:
			txns[i] = record.Txn{ProducerID: 7, Epoch: 2}
		case i%10 == 5:
			txns[i] = record.Txn{ProducerID: 7, Epoch: 2, Control: true}
			recs[i].Key, recs[i].Value = marker(true)
			recs[i].Headers = nil
		case i%10 == 7:
			txns[i] = record.Txn{ProducerID: 1 << 40, Epoch: math.MaxInt16}
		case i%10 == 8:
			txns[i] = record.Txn{ProducerID: 1 << 40, Epoch: math.MaxInt16, Control: true}
			recs[i].Key, recs[i].Value = marker(false)
			recs[i].Headers = nil
		}
	}
	return recs, txns
}

// equalTxns checks txns read for recs against want, the info of every
// record of the segment from its base: empty exactly when none of recs is
// transactional.
func equalTxns(t *testing.T, recs []record.Record, got []record.Txn, want []record.Txn, base int64) {
	t.Helper()
	some := false
	for _, r := range recs {
		if w := want[r.Offset-base]; w.ProducerID >= 0 || w.Control {
			some = true
		}
	}
	if !some {
		if len(got) != 0 {
			t.Fatalf("%d txn entries for %d records outside transactions", len(got), len(recs))
		}
		return
	}
	if len(got) != len(recs) {
		t.Fatalf("%d txn entries for %d records", len(got), len(recs))
	}
	for i, r := range recs {
		if w := want[r.Offset-base]; got[i] != w {
			t.Fatalf("offset %d: txn %+v, want %+v", r.Offset, got[i], w)
		}
	}
}

// Producer ids, epochs and control flags go through Archive and come back
// from Read exactly, also when paging through row groups with and
// without transactional records, and a chunk may come without txn info.
func TestArchiveTxnRoundTrip(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		cfg := b.cfg
		cfg.RowGroupBytes = 4 << 10 // several row groups, some without transactions
		s := openStore(t, cfg)
		ctx := ctxT(t)
		recs, txns := txnSegment(1000, 800)
		// The plain stretch comes as chunks without txn info, as the
		// engine sends a read with no transactional record.
		chunkTxns := slices.Clone(txns)
		next := chunkedTxn(recs, chunkTxns, 50)
		df, err := s.Archive(ctx, ref("txn", 0, 4, 1000, len(recs)), func() ([]record.Record, []record.Txn, error) {
			r, tx, err := next()
			plain := true
			for _, x := range tx {
				plain = plain && x.ProducerID < 0 && !x.Control
			}
			if plain {
				tx = nil
			}
			return r, tx, err
		})
		if err != nil {
			t.Fatal(err)
		}

		for _, st := range []*Store{s, openStore(t, b.cfg)} { // cached and fresh
			got, gotTxns, err := st.Read(ctx, df, 1000, 1<<30)
			if err != nil {
				t.Fatal(err)
			}
			equalRecords(t, got, recs)
			equalTxns(t, got, gotTxns, txns, 1000)
			rgs := 0
			for from := int64(1000); from <= df.MaxOffset; rgs++ {
				got, gotTxns, err := st.Read(ctx, df, from, 2000)
				if err != nil {
					t.Fatal(err)
				}
				if len(got) == 0 {
					t.Fatalf("no records at %d", from)
				}
				equalTxns(t, got, gotTxns, txns, 1000)
				from = got[len(got)-1].Offset + 1
			}
			// A read inside the plain stretch has no txn info at all.
			plain := int64(1000 + 800/2 + 10)
			got, gotTxns, err = st.Read(ctx, df, plain, 500)
			if err != nil || len(got) == 0 || len(gotTxns) != 0 {
				t.Fatalf("read of plain records at %d: %d records, %d txns, %v", plain, len(got), len(gotTxns), err)
			}
		}

		// Txn info that does not match the records is refused.
		_, err = s.Archive(ctx, ref("txn", 0, 5, 0, 3), chunkedTxn(makeRecords(0, 3), []record.Txn{{ProducerID: 1}, {ProducerID: 1}}, 3))
		if err == nil || !strings.Contains(err.Error(), "transaction entries") {
			t.Fatalf("archive with 2 txn entries for 3 records: %v", err)
		}

		// Other Iceberg readers see the columns.
		tbl, err := tableIO(s).LoadTable(ctx, s.ident("txn"))
		if err != nil {
			t.Fatal(err)
		}
		checkTxnColumns(t, tbl.Schema())
		scanned := scanTxns(t, tbl)
		for i, r := range recs {
			if got := scanned[r.Offset]; got != txns[i] {
				t.Fatalf("iceberg scan, offset %d: %+v, want %+v", r.Offset, got, txns[i])
			}
		}
	})
}

// checkTxnColumns checks the table schema has the transaction columns as
// optional columns with the ids the files carry.
func checkTxnColumns(t *testing.T, sc *iceberg.Schema) {
	t.Helper()
	for _, want := range txnFields() {
		f, ok := sc.FindFieldByName(want.Name)
		if !ok || f.ID != want.ID || f.Required || f.Type.String() != want.Type.String() {
			t.Fatalf("table schema field %s: %+v (found %v), want optional %s id %d", want.Name, f, ok, want.Type, want.ID)
		}
	}
}

// scanTxns reads the transaction columns of every row with iceberg-go's
// own scan, as another engine would: offset -> txn, null producer id as -1.
func scanTxns(t *testing.T, tbl *table.Table) map[int64]record.Txn {
	t.Helper()
	out := map[int64]record.Txn{}
	for _, rec := range scanAll(t, tbl, nil) {
		col := func(name string) arrow.Array { return column(t, rec, name) }
		offs := col("offset").(*array.Int64)
		pids := col("producer_id").(*array.Int64)
		epochs := col("producer_epoch").(*array.Int32)
		ctls := col("control").(*array.Boolean)
		for i := 0; i < int(rec.NumRows()); i++ {
			tx := record.Txn{ProducerID: -1}
			if !pids.IsNull(i) {
				tx.ProducerID, tx.Epoch = pids.Value(i), int16(epochs.Value(i))
			} else if !epochs.IsNull(i) {
				t.Fatalf("offset %d: epoch without producer id", offs.Value(i))
			}
			if !ctls.IsNull(i) {
				tx.Control = ctls.Value(i)
			}
			out[offs.Value(i)] = tx
		}
		rec.Release()
	}
	return out
}

// legacySegmentSchema is the Parquet schema korvet wrote before the
// transaction columns.
func legacySegmentSchema() *parquet.Schema {
	delta := func(n parquet.Node) parquet.Node { return parquet.Encoded(n, &parquet.DeltaBinaryPacked) }
	return parquet.NewSchema("kafka_record", parquet.Group{
		"partition": parquet.FieldID(parquet.Int(32), idPartition),
		"offset":    parquet.FieldID(delta(parquet.Int(64)), idOffset),
		"timestamp": parquet.FieldID(delta(parquet.Int(64)), idTimestamp),
		"key":       parquet.FieldID(parquet.Optional(parquet.Leaf(parquet.ByteArrayType)), idKey),
		"value":     parquet.FieldID(parquet.Optional(parquet.Leaf(parquet.ByteArrayType)), idValue),
		"headers": parquet.FieldID(parquet.List(parquet.FieldID(parquet.Group{
			"key":   parquet.FieldID(parquet.Encoded(parquet.String(), &parquet.RLEDictionary), idHeaderKey),
			"value": parquet.FieldID(parquet.Optional(parquet.Leaf(parquet.ByteArrayType)), idHeaderValue),
		}, idHeader)), idHeaders),
	})
}

// openLegacyStore is a Store writing what korvet wrote before the
// transaction columns: files without them, tables never evolved.
func openLegacyStore(t *testing.T, cfg Config) *Store {
	t.Helper()
	s := openStore(t, cfg)
	s.schema = legacySegmentSchema()
	cols, err := columnsOf(s.schema)
	if err != nil {
		t.Fatal(err)
	}
	if cols.hasTxn() || cols.n != 7 {
		t.Fatalf("legacy columns %+v", cols)
	}
	s.cols = cols
	return s
}

// A table and files written before the transaction columns: they read as
// records outside transactions, and the table gets the columns (optional,
// new ids, name mapping updated) in the commit of its first new file;
// both files then read back, through korvet and through iceberg-go.
func TestArchiveUpgradesOldTable(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := ctxT(t)
		old := openLegacyStore(t, b.cfg)
		oldRecs := makeRecords(0, 300)
		oldDF, err := old.Archive(ctx, ref("up", 0, 0, 0, len(oldRecs)), chunked(oldRecs, 64))
		if err != nil {
			t.Fatal(err)
		}
		// A legacy file cannot carry transactions.
		if _, err := old.Archive(ctx, ref("up", 0, 9, 900, 3), chunkedTxn(makeRecords(900, 3), make([]record.Txn, 3), 3)); err == nil {
			t.Fatal("legacy store archived txn info")
		}
		tbl, err := tableIO(old).LoadTable(ctx, old.ident("up"))
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := tbl.Schema().FindFieldByName("producer_id"); ok || tbl.Metadata().LastColumnID() != idHeaderValue {
			t.Fatalf("legacy table schema %v, last column id %d", tbl.Schema(), tbl.Metadata().LastColumnID())
		}
		oldMapping := tbl.Properties()[table.DefaultNameMappingKey]
		if oldMapping == "" || strings.Contains(oldMapping, "producer_id") {
			t.Fatalf("legacy name mapping %q", oldMapping)
		}

		// Today's korvet reads the old file, then archives into the table.
		s := openStore(t, b.cfg)
		got, gotTxns, err := s.Read(ctx, oldDF, 0, 1<<30)
		if err != nil {
			t.Fatal(err)
		}
		equalRecords(t, got, oldRecs)
		if len(gotTxns) != 0 {
			t.Fatalf("old file read with %d txn entries", len(gotTxns))
		}
		recs, txns := txnSegment(300, 200)
		df, err := s.Archive(ctx, ref("up", 0, 1, 300, len(recs)), chunkedTxn(recs, txns, 64))
		if err != nil {
			t.Fatal(err)
		}
		tbl, err = tableIO(s).LoadTable(ctx, s.ident("up"))
		if err != nil {
			t.Fatal(err)
		}
		checkTxnColumns(t, tbl.Schema())
		if n := len(tbl.Metadata().Schemas()); n != 2 || tbl.Metadata().LastColumnID() != idControl {
			t.Fatalf("%d schemas, last column id %d after the upgrade", n, tbl.Metadata().LastColumnID())
		}
		if m := tbl.Properties()[table.DefaultNameMappingKey]; !strings.Contains(m, `"producer_id"`) || !strings.Contains(m, `"control"`) {
			t.Fatalf("name mapping not updated: %s", m)
		}
		// The old file kept its place in the table.
		files, err := s.Files(ctx, "up")
		if err != nil || len(files) != 2 || files[0].Path != oldDF.Path || files[1].Path != df.Path {
			t.Fatalf("files %+v, %v", files, err)
		}

		// A fresh store (a restart) reads both, and archives on without
		// another schema change.
		s2 := openStore(t, b.cfg)
		got, gotTxns, err = s2.Read(ctx, oldDF, 0, 1<<30)
		if err != nil || len(gotTxns) != 0 {
			t.Fatalf("old file after the upgrade: %d txns, %v", len(gotTxns), err)
		}
		equalRecords(t, got, oldRecs)
		got, gotTxns, err = s2.Read(ctx, df, 300, 1<<30)
		if err != nil {
			t.Fatal(err)
		}
		equalRecords(t, got, recs)
		equalTxns(t, got, gotTxns, txns, 300)
		if _, err := s2.Archive(ctx, ref("up", 0, 2, 500, 10), chunked(makeRecords(500, 10), 10)); err != nil {
			t.Fatal(err)
		}
		tbl, err = tableIO(s2).LoadTable(ctx, s2.ident("up"))
		if err != nil {
			t.Fatal(err)
		}
		if n := len(tbl.Metadata().Schemas()); n != 2 {
			t.Fatalf("%d schemas after a third archive", n)
		}

		// iceberg-go reads the old file's rows with null transaction
		// columns, the new ones with their values.
		scanned := scanTxns(t, tbl)
		if len(scanned) != 510 {
			t.Fatalf("iceberg scan: %d rows, want 510", len(scanned))
		}
		for off := range int64(300) {
			if got := scanned[off]; got != (record.Txn{ProducerID: -1}) {
				t.Fatalf("iceberg scan, old offset %d: %+v", off, got)
			}
		}
		for i, r := range recs {
			if got := scanned[r.Offset]; got != txns[i] {
				t.Fatalf("iceberg scan, offset %d: %+v, want %+v", r.Offset, got, txns[i])
			}
		}
	})
}

// A table whose schema gained other columns cannot take the transaction
// columns with the ids the files carry: archiving refuses rather than
// publish files the table would misread.
func TestArchiveRefusesForeignSchemaChange(t *testing.T) {
	b := localBackend(t)
	ctx := ctxT(t)
	old := openLegacyStore(t, b.cfg)
	if _, err := old.Archive(ctx, ref("foreign", 0, 0, 0, 5), chunked(makeRecords(0, 5), 5)); err != nil {
		t.Fatal(err)
	}
	tbl, err := tableIO(old).LoadTable(ctx, old.ident("foreign"))
	if err != nil {
		t.Fatal(err)
	}
	txn := tbl.NewTransaction()
	if err := txn.UpdateSchema(true, false).AddColumn([]string{"note"}, iceberg.PrimitiveTypes.String, "", false, nil).Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := txn.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	s := openStore(t, b.cfg)
	_, err = s.Archive(ctx, ref("foreign", 0, 1, 5, 5), chunked(makeRecords(5, 5), 5))
	if err == nil || !strings.Contains(err.Error(), "last column id is 10") {
		t.Fatalf("archive into a table with a foreign column: %v", err)
	}
}

// testdata/segment-v1.parquet is a file korvet wrote before the
// transaction columns (records makeRecords(100, 40) of segment 3):
// today's reader takes it byte for byte as it was written.
func TestReadsLegacyFile(t *testing.T) {
	s := openStore(t, localBackend(t).cfg)
	abs, err := filepath.Abs("testdata/segment-v1.parquet")
	if err != nil {
		t.Fatal(err)
	}
	df := DataFile{Path: "file://" + abs, Partition: 0, Segment: 3, MinOffset: 100, MaxOffset: 139}
	got, txns, err := s.Read(ctxT(t), df, 100, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	equalRecords(t, got, makeRecords(100, 40))
	if len(txns) != 0 {
		t.Fatalf("%d txn entries from a legacy file", len(txns))
	}
	off, ts, found, err := s.OffsetForTime(ctxT(t), df, 1_700_000_000_000+121*10)
	if err != nil || !found || off != 121 || ts != 1_700_000_000_000+121*10 {
		t.Fatalf("offset for time in a legacy file: %d %d %v %v", off, ts, found, err)
	}
	// Point reads (its pages are whole column chunks), nothing decoded
	// kept.
	cfg := localBackend(t).cfg
	cfg.ReadCacheBytes = 1
	s = openStore(t, cfg)
	want := makeRecords(100, 40)
	for i := range want {
		got, txns, err := s.Read(ctxT(t), df, want[i].Offset, 1)
		if err != nil || len(txns) != 0 {
			t.Fatalf("point read of %d in a legacy file: %v, %d txns", want[i].Offset, err, len(txns))
		}
		equalRecords(t, got, want[i:i+1])
	}
}
