package cold

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/korvet/korvet/cold/icemeta"
	"github.com/korvet/korvet/engine/record"
)

// archiveOld archives a segment the way korvet did before it wrote its
// own table metadata: the table made by iceberg-go's NewMetadata, the
// transaction columns added by its schema update, the file committed by
// its transaction (manifests, manifest list, snapshot and metadata log all
// iceberg-go's).
func archiveOld(t *testing.T, s *Store, r SegmentRef, recs []record.Record, txns []record.Txn) {
	t.Helper()
	ctx := ctxT(t)
	ident := s.ident(r.Topic)
	cat := tableIO(s)
	tbl, err := cat.LoadTable(ctx, ident)
	if errors.Is(err, errNoTable) {
		spec := iceberg.NewPartitionSpec(iceberg.PartitionField{
			SourceIDs: []int{idPartition}, FieldID: 1000, Name: "partition", Transform: iceberg.IdentityTransform{},
		})
		meta, merr := table.NewMetadata(igSchema(t, tableSchema()), &spec, table.UnsortedSortOrder, s.cat.tableLocation(ident), iceberg.Properties{
			table.PropertyFormatVersion:               "2",
			table.ParquetCompressionKey:               "zstd",
			table.ManifestMergeEnabledKey:             "true",
			table.MetadataDeleteAfterCommitEnabledKey: "true",
			table.MetadataPreviousVersionsMaxKey:      "20",
			topicIDProp:                               hex.EncodeToString(r.TopicID[:]),
			"korvet.kafka-topic":                      r.Topic,
		})
		if merr != nil {
			t.Fatal(merr)
		}
		b, merr := json.Marshal(meta)
		if merr != nil {
			t.Fatal(merr)
		}
		if err := s.cat.(*fsCatalog).writeVersionBytes(ctx, ident, 1, b); err != nil {
			t.Fatal(err)
		}
		tbl, err = cat.LoadTable(ctx, ident)
	}
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(tbl.Metadata())
	if err != nil {
		t.Fatal(err)
	}
	im, err := icemeta.Parse(b) // for upload: spec and location
	if err != nil {
		t.Fatal(err)
	}
	df, err := s.upload(ctx, im, r, dataPath(tbl.Location(), r), chunkedTxn(recs, txns, 50), nil)
	if err != nil {
		t.Fatal(err)
	}
	txn := tbl.NewTransaction()
	if _, ok := tbl.Schema().FindFieldByName("producer_id"); !ok {
		var opts []table.UpdateSchemaOption
		if nm := tbl.Metadata().NameMapping(); nm != nil {
			opts = append(opts, table.WithNameMapping(nm))
		}
		u := txn.UpdateSchema(true, false, opts...)
		for _, f := range txnFields() {
			u.AddColumn([]string{f.Name}, igType(t, f.Type), f.Doc, false, nil)
		}
		if err := u.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	props := iceberg.Properties{"korvet.partition": strconv.Itoa(int(r.Partition)), "korvet.segment": strconv.FormatInt(r.Segment, 10)}
	if err := txn.AddDataFiles(ctx, []iceberg.DataFile{igDataFile(t, tbl.Spec(), df)}, props, table.WithoutDuplicateCheck()); err != nil {
		t.Fatal(err)
	}
	if _, err := txn.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

// scanRecords reads a table through iceberg-go's scan: every row by
// partition and offset, with its transaction info.
func scanRecords(t *testing.T, tbl *table.Table) map[[2]int64]record.Record {
	t.Helper()
	out := map[[2]int64]record.Record{}
	for _, rec := range scanAll(t, tbl, nil) {
		col := func(name string) arrow.Array { return column(t, rec, name) }
		parts := col("partition").(*array.Int32)
		offs := col("offset").(*array.Int64)
		tss := col("timestamp").(*array.Int64)
		keys := col("key").(*array.Binary)
		vals := col("value").(*array.Binary)
		bytesAt := func(a *array.Binary, i int) []byte {
			if a.IsNull(i) {
				return nil
			}
			return append([]byte{}, a.Value(i)...)
		}
		for i := 0; i < int(rec.NumRows()); i++ {
			k := [2]int64{int64(parts.Value(i)), offs.Value(i)}
			if _, dup := out[k]; dup {
				t.Fatalf("partition %d offset %d scanned twice", k[0], k[1])
			}
			out[k] = record.Record{Offset: offs.Value(i), Timestamp: tss.Value(i), Key: bytesAt(keys, i), Value: bytesAt(vals, i)}
		}
		rec.Release()
	}
	return out
}

// A table written by iceberg-go's table package (korvet before
// cold/icemeta) loads, is appended to, loses a file to retention and
// expires snapshots with the new code; iceberg-go's scan then reads every
// record, and korvet reads every file.
func TestUpgradeFromIcebergGoTable(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := ctxT(t)
		old := openStore(t, b.cfg)
		type seg struct {
			part      int32
			seg, base int64
			recs      []record.Record
			txns      []record.Txn
		}
		txnRecs, txns := txnSegment(200, 40)
		oldSegs := []seg{
			{0, 0, 0, makeRecords(0, 100), nil},
			{0, 1, 100, makeRecords(100, 50), nil},
			{1, 0, 0, makeRecords(0, 30), nil},
			{0, 2, 150, makeRecords(150, 10), nil},
		}
		for _, sg := range oldSegs {
			archiveOld(t, old, ref("up", sg.part, sg.seg, sg.base, len(sg.recs)), sg.recs, sg.txns)
		}
		// And an expiry by iceberg-go, as the old code did.
		tbl, err := tableIO(old).LoadTable(ctx, old.ident("up"))
		if err != nil {
			t.Fatal(err)
		}
		txn := tbl.NewTransaction()
		if err := txn.ExpireSnapshots(table.WithRetainLast(2), table.WithOlderThan(0)); err != nil {
			t.Fatal(err)
		}
		if _, err := txn.Commit(ctx); err != nil {
			t.Fatal(err)
		}

		// The new code takes it from here.
		s := openStore(t, b.cfg)
		files, err := s.Files(ctx, "up")
		if err != nil || len(files) != len(oldSegs) {
			t.Fatalf("files of the old table: %+v, %v", files, err)
		}
		newSegs := []seg{
			{0, 3, 200, txnRecs, txns},
			{1, 1, 30, makeRecords(30, 20), nil},
		}
		for _, sg := range newSegs {
			if _, err := s.Archive(ctx, ref("up", sg.part, sg.seg, sg.base, len(sg.recs)), chunkedTxn(sg.recs, sg.txns, 50)); err != nil {
				t.Fatal(err)
			}
		}
		if files, err = s.Files(ctx, "up"); err != nil || len(files) != 6 {
			t.Fatalf("files after the new appends: %d, %v", len(files), err)
		}
		// Retention drops the first old file.
		if files[0].Partition != 0 || files[0].Segment != 0 {
			t.Fatalf("first file %+v", files[0])
		}
		if err := s.Remove(ctx, "up", files[:1]); err != nil {
			t.Fatal(err)
		}
		last := seg{0, 4, 240, makeRecords(240, 5), nil}
		if _, err := s.Archive(ctx, ref("up", last.part, last.seg, last.base, len(last.recs)), chunked(last.recs, 50)); err != nil {
			t.Fatal(err)
		}

		want := map[[2]int64]record.Record{}
		wantTxn := map[int64]record.Txn{}
		for _, sg := range append(append(oldSegs[1:], newSegs...), last) {
			for i, r := range sg.recs {
				want[[2]int64{int64(sg.part), r.Offset}] = r
				if sg.part == 0 {
					tx := record.Txn{ProducerID: -1}
					if sg.txns != nil {
						tx = sg.txns[i]
					}
					wantTxn[r.Offset] = tx
				}
			}
		}
		// A fresh store and iceberg-go agree on the table.
		s2 := openStore(t, b.cfg)
		tbl, err = tableIO(s2).LoadTable(ctx, s2.ident("up"))
		if err != nil {
			t.Fatal(err)
		}
		if n := len(tbl.Metadata().Snapshots()); n != 2 {
			t.Fatalf("%d snapshots: want retention's and the append's after it", n)
		}
		if n := len(tbl.Metadata().Schemas()); n != 2 {
			t.Fatalf("%d schemas: the new code changed the schema again", n)
		}
		got := scanRecords(t, tbl)
		if len(got) != len(want) {
			t.Fatalf("iceberg-go scan: %d rows, want %d", len(got), len(want))
		}
		for k, w := range want {
			g, ok := got[k]
			if !ok || g.Offset != w.Offset || g.Timestamp != w.Timestamp || !sameBytes(g.Key, w.Key) || !sameBytes(g.Value, w.Value) {
				t.Fatalf("partition %d offset %d: got %+v, want %+v", k[0], k[1], g, w)
			}
		}
		scannedTxns := map[int64]record.Txn{}
		for off, tx := range scanTxns(t, tbl) {
			scannedTxns[off] = tx
		}
		for off, w := range wantTxn {
			if g := scannedTxns[off]; g != w {
				t.Fatalf("partition 0 offset %d: txn %+v, want %+v", off, g, w)
			}
		}
		files, err = s2.Files(ctx, "up")
		if err != nil || len(files) != 6 {
			t.Fatalf("files: %d, %v", len(files), err)
		}
		for _, sg := range append(append(oldSegs[1:], newSegs...), last) {
			i := -1
			for j, f := range files {
				if f.Partition == sg.part && f.Segment == sg.seg {
					i = j
				}
			}
			if i < 0 {
				t.Fatalf("no file for partition %d segment %d", sg.part, sg.seg)
			}
			recs, _, err := s2.Read(ctx, files[i], sg.base, 1<<30)
			if err != nil {
				t.Fatal(err)
			}
			equalRecords(t, recs, sg.recs)
		}
	})
}
