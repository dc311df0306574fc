package iceberg_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"testing"

	ig "github.com/apache/iceberg-go"

	"github.com/korvet/korvet/cold/iceberg"
)

// testSchema has every kind of type korvet writes.
func testSchema() *iceberg.Schema {
	return iceberg.NewSchemaWithIdentifiers(3, []int{1},
		iceberg.NestedField{ID: 1, Name: "partition", Type: iceberg.PrimitiveTypes.Int32, Required: true, Doc: "Kafka partition"},
		iceberg.NestedField{ID: 2, Name: "offset", Type: iceberg.PrimitiveTypes.Int64, Required: true},
		iceberg.NestedField{ID: 3, Name: "key", Type: iceberg.PrimitiveTypes.Binary},
		iceberg.NestedField{ID: 4, Name: "headers", Required: true, Type: &iceberg.ListType{ElementID: 5, ElementRequired: true,
			Element: &iceberg.StructType{FieldList: []iceberg.NestedField{
				{ID: 6, Name: "key", Type: iceberg.PrimitiveTypes.String, Required: true},
				{ID: 7, Name: "value", Type: iceberg.PrimitiveTypes.Binary},
			}}}},
		iceberg.NestedField{ID: 8, Name: "v", Type: &iceberg.StructType{FieldList: []iceberg.NestedField{
			{ID: 9, Name: "b", Type: iceberg.PrimitiveTypes.Bool},
			{ID: 10, Name: "f", Type: iceberg.PrimitiveTypes.Float32},
			{ID: 11, Name: "d", Type: iceberg.PrimitiveTypes.Float64},
			{ID: 12, Name: "at", Type: iceberg.PrimitiveTypes.TimestampTz},
			{ID: 13, Name: "day", Type: iceberg.PrimitiveTypes.Date},
			{ID: 14, Name: "m", Type: &iceberg.MapType{KeyID: 15, KeyType: iceberg.PrimitiveTypes.String, ValueID: 16,
				ValueType: &iceberg.ListType{ElementID: 17, Element: iceberg.PrimitiveTypes.Int64}}},
		}}},
	)
}

func toIG(t *testing.T, sc *iceberg.Schema) *ig.Schema {
	t.Helper()
	b, err := json.Marshal(sc)
	if err != nil {
		t.Fatal(err)
	}
	var out ig.Schema
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("iceberg-go reads %s: %v", b, err)
	}
	return &out
}

func fromIG(t *testing.T, sc *ig.Schema) *iceberg.Schema {
	t.Helper()
	b, err := json.Marshal(sc)
	if err != nil {
		t.Fatal(err)
	}
	var out iceberg.Schema
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("read %s: %v", b, err)
	}
	return &out
}

// The schema's JSON is iceberg-go's, both ways, and so are its name
// mapping, field lookup and highest id.
func TestSchemaJSON(t *testing.T) {
	sc := testSchema()
	other := toIG(t, sc)
	back := fromIG(t, other)
	if !(&iceberg.StructType{FieldList: back.Fields()}).Equals(&iceberg.StructType{FieldList: sc.Fields()}) ||
		back.ID != sc.ID || !slices.Equal(back.IdentifierFieldIDs, sc.IdentifierFieldIDs) {
		t.Fatalf("round trip through iceberg-go:\n%v\nwant\n%v", back.Fields(), sc.Fields())
	}
	for i, f := range back.Fields() {
		if f.Doc != sc.Field(i).Doc {
			t.Fatalf("doc of %s: %q", f.Name, f.Doc)
		}
	}
	mine, _ := json.Marshal(sc.NameMapping())
	theirs, _ := json.Marshal(other.NameMapping())
	if !bytes.Equal(mine, theirs) {
		t.Fatalf("name mapping\n%s\nwant iceberg-go's\n%s", mine, theirs)
	}
	if sc.HighestFieldID() != other.HighestFieldID() {
		t.Fatalf("highest id %d, iceberg-go %d", sc.HighestFieldID(), other.HighestFieldID())
	}
	for _, name := range []string{"partition", "headers.element.key", "v.m.value.element", "v.m.key"} {
		f, ok := sc.FindFieldByName(name)
		g, ok2 := other.FindFieldByName(name)
		if !ok || !ok2 || f.ID != g.ID || f.Required != g.Required || f.Type.String() != g.Type.String() {
			t.Fatalf("%s: %v %v, iceberg-go %v %v", name, f, ok, g, ok2)
		}
	}
	// A type this package does not model comes back as it was.
	var odd iceberg.Schema
	in := `{"type":"struct","schema-id":0,"fields":[{"id":1,"name":"d","required":false,"type":"decimal(10, 2)"}]}`
	if err := json.Unmarshal([]byte(in), &odd); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(&odd)
	if !bytes.Contains(b, []byte(`"type":"decimal(10, 2)"`)) {
		t.Fatalf("decimal written back as %s", b)
	}
}

// Fresh ids and name mapping updates come out as iceberg-go's.
func TestFreshIDsAndNameMapping(t *testing.T) {
	n, m := 100, 100
	mine := iceberg.AssignFreshSchemaIDs(testSchema(), func() int { n++; return n })
	theirs, err := ig.AssignFreshSchemaIDs(toIG(t, testSchema()), func() int { m++; return m })
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(mine)
	b, _ := json.Marshal(fromIG(t, theirs))
	if !bytes.Equal(a, b) {
		t.Fatalf("fresh ids\n%s\nwant iceberg-go's\n%s", a, b)
	}

	sc := testSchema()
	added := map[int][]iceberg.NestedField{
		iceberg.RootID: {{ID: 20, Name: "n", Type: &iceberg.StructType{FieldList: []iceberg.NestedField{{ID: 21, Name: "x", Type: iceberg.PrimitiveTypes.Int32}}}}},
		5:              {{ID: 22, Name: "y", Type: iceberg.PrimitiveTypes.String}},
		8:              {{ID: 23, Name: "b", Type: iceberg.PrimitiveTypes.String}}, // takes the name from id 9
	}
	got := iceberg.AddToNameMapping(sc.NameMapping(), added)
	igAdded := map[int][]ig.NestedField{}
	for parent, fs := range added {
		for _, f := range fs {
			one := toIG(t, iceberg.NewSchema(0, f))
			igAdded[parent] = append(igAdded[parent], one.Field(0))
		}
	}
	want, err := ig.UpdateNameMapping(toIG(t, sc).NameMapping(), nil, igAdded)
	if err != nil {
		t.Fatal(err)
	}
	a, _ = json.Marshal(got)
	b, _ = json.Marshal(want)
	if !bytes.Equal(a, b) {
		t.Fatalf("updated mapping\n%s\nwant iceberg-go's\n%s", a, b)
	}
}

func spec() iceberg.PartitionSpec {
	return iceberg.PartitionSpec{ID: 0, Fields: []iceberg.PartitionField{{SourceID: 1, FieldID: 1000, Name: "partition", Transform: "identity"}}}
}

func igSpec() ig.PartitionSpec {
	return ig.NewPartitionSpec(ig.PartitionField{SourceIDs: []int{1}, FieldID: 1000, Name: "partition", Transform: ig.IdentityTransform{}})
}

func dataFile(path string, part int32, n int64) iceberg.DataFile {
	le32 := func(v int32) []byte { return []byte{byte(v), byte(v >> 8), byte(v >> 16), byte(v >> 24)} }
	return iceberg.DataFile{
		Content: iceberg.EntryContentData, FilePath: path, FileFormat: iceberg.ParquetFile,
		Partition: map[string]any{"partition": part}, RecordCount: n, FileSizeInBytes: 10 * n,
		ValueCounts:     iceberg.IntLongs(map[int]int64{1: n, 2: n}),
		NullValueCounts: iceberg.IntLongs(map[int]int64{1: 0, 3: 1}),
		LowerBounds:     iceberg.IntBytesOf(map[int][]byte{1: le32(part), 2: {1, 0, 0, 0, 0, 0, 0, 0}}),
		UpperBounds:     iceberg.IntBytesOf(map[int][]byte{1: le32(part), 2: {9, 0, 0, 0, 0, 0, 0, 0}}),
	}
}

func same(t *testing.T, what string, got, want any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: got %#v, want %#v", what, got, want)
	}
}

func asMap[E any](es []E, kv func(E) (int, any)) map[int]any {
	if es == nil {
		return nil
	}
	out := map[int]any{}
	for _, e := range es {
		k, v := kv(e)
		out[k] = v
	}
	return out
}

func longs(m map[int]int64) map[int]any {
	if m == nil {
		return nil
	}
	out := map[int]any{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

func bounds(m map[int][]byte) map[int]any {
	if m == nil {
		return nil
	}
	out := map[int]any{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

func il(e iceberg.IntLong) (int, any)  { return int(e.Key), e.Value }
func ib(e iceberg.IntBytes) (int, any) { return int(e.Key), e.Value }

// checkDataFile compares a data file as this package has it with the one
// iceberg-go read.
func checkDataFile(t *testing.T, mine iceberg.DataFile, theirs ig.DataFile) {
	t.Helper()
	same(t, "path", theirs.FilePath(), mine.FilePath)
	same(t, "format", string(theirs.FileFormat()), mine.FileFormat)
	same(t, "count", theirs.Count(), mine.RecordCount)
	same(t, "size", theirs.FileSizeBytes(), mine.FileSizeInBytes)
	same(t, "partition", theirs.Partition()[1000], mine.Partition["partition"])
	same(t, "value counts", longs(theirs.ValueCounts()), asMap(mine.ValueCounts, il))
	same(t, "null counts", longs(theirs.NullValueCounts()), asMap(mine.NullValueCounts, il))
	same(t, "lower bounds", bounds(theirs.LowerBoundValues()), asMap(mine.LowerBounds, ib))
	same(t, "upper bounds", bounds(theirs.UpperBoundValues()), asMap(mine.UpperBounds, ib))
}

// What this package writes, iceberg-go reads: the list with its sequence
// numbers, the manifest's entries with inherited ones, the partition
// summaries.
func TestIcebergGoReadsManifests(t *testing.T) {
	sc := testSchema()
	const snap, prev = int64(7), int64(3)
	old := int64(2)
	var mbuf bytes.Buffer
	mf, err := iceberg.WriteManifest(&mbuf, spec(), sc, snap, []iceberg.ManifestEntry{
		{Status: iceberg.EntryStatusEXISTING, SnapshotID: &[]int64{prev}[0], SequenceNumber: &old, FileSequenceNumber: &old, DataFile: dataFile("s3://b/a.parquet", 4, 100)},
		{Status: iceberg.EntryStatusADDED, DataFile: dataFile("s3://b/b.parquet", 2, 50)},
	})
	if err != nil {
		t.Fatal(err)
	}
	mf.Path, mf.Length = "s3://b/m.avro", int64(mbuf.Len())
	var lbuf bytes.Buffer
	seq := int64(5)
	p := prev
	written, err := iceberg.WriteManifestList(&lbuf, snap, &p, seq, []iceberg.ManifestFile{mf})
	if err != nil {
		t.Fatal(err)
	}
	if written[0].SequenceNumber != seq || written[0].MinSequenceNumber != old {
		t.Fatalf("assigned sequence numbers %d, %d", written[0].SequenceNumber, written[0].MinSequenceNumber)
	}
	mans, err := ig.ReadManifestList(bytes.NewReader(lbuf.Bytes()))
	if err != nil || len(mans) != 1 {
		t.Fatalf("iceberg-go reads the list: %v, %v", mans, err)
	}
	m := mans[0]
	same(t, "manifest path", m.FilePath(), mf.Path)
	same(t, "manifest length", m.Length(), mf.Length)
	same(t, "sequence number", m.SequenceNum(), seq)
	same(t, "min sequence number", m.MinSequenceNum(), old)
	same(t, "added snapshot", m.SnapshotID(), snap)
	same(t, "counts", []any{m.AddedDataFiles(), m.ExistingDataFiles(), m.DeletedDataFiles(), m.AddedRows(), m.ExistingRows()},
		[]any{int32(1), int32(1), int32(0), int64(50), int64(100)})
	if ps := m.Partitions(); len(ps) != 1 || ps[0].ContainsNull || !bytes.Equal(*ps[0].LowerBound, []byte{2, 0, 0, 0}) || !bytes.Equal(*ps[0].UpperBound, []byte{4, 0, 0, 0}) {
		t.Fatalf("partition summaries %+v", ps)
	}
	entries, err := ig.ReadManifest(m, bytes.NewReader(mbuf.Bytes()), true)
	if err != nil || len(entries) != 2 {
		t.Fatalf("iceberg-go reads the manifest: %v, %v", entries, err)
	}
	same(t, "existing entry", []any{entries[0].Status(), entries[0].SnapshotID(), entries[0].SequenceNum()}, []any{ig.EntryStatusEXISTING, prev, old})
	same(t, "added entry", []any{entries[1].Status(), entries[1].SnapshotID(), entries[1].SequenceNum()}, []any{ig.EntryStatusADDED, snap, seq})
	checkDataFile(t, dataFile("s3://b/a.parquet", 4, 100), entries[0].DataFile())
	checkDataFile(t, dataFile("s3://b/b.parquet", 2, 50), entries[1].DataFile())

	// And this package reads back what it wrote the same way.
	back, err := iceberg.ReadManifestList(lbuf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	same(t, "list read back", back, written)
	es, err := iceberg.ReadManifest(back[0], mbuf.Bytes(), true)
	if err != nil || len(es) != 2 {
		t.Fatalf("read back: %v, %v", es, err)
	}
	if *es[1].SnapshotID != snap || *es[1].SequenceNumber != seq || *es[0].SequenceNumber != old {
		t.Fatalf("inherited: %+v", es)
	}
}

// What iceberg-go wrote (korvet before this package), this package reads.
func TestReadsIcebergGoManifests(t *testing.T) {
	sc := toIG(t, testSchema())
	const snap = int64(9)
	var mbuf bytes.Buffer
	w, err := ig.NewManifestWriter(2, &mbuf, igSpec(), sc, snap)
	if err != nil {
		t.Fatal(err)
	}
	want := []iceberg.DataFile{dataFile("s3://b/a.parquet", 1, 10), dataFile("s3://b/b.parquet", 3, 20)}
	for _, df := range want {
		b, err := ig.NewDataFileBuilder(igSpec(), ig.EntryContentData, df.FilePath, ig.ParquetFile,
			map[int]any{1000: df.Partition["partition"]}, nil, nil, df.RecordCount, df.FileSizeInBytes)
		if err != nil {
			t.Fatal(err)
		}
		get := func(es []iceberg.IntLong) map[int]int64 {
			out := map[int]int64{}
			for _, e := range es {
				out[int(e.Key)] = e.Value
			}
			return out
		}
		getb := func(es []iceberg.IntBytes) map[int][]byte {
			out := map[int][]byte{}
			for _, e := range es {
				out[int(e.Key)] = e.Value
			}
			return out
		}
		b.ValueCounts(get(df.ValueCounts)).NullValueCounts(get(df.NullValueCounts)).
			LowerBoundValues(getb(df.LowerBounds)).UpperBoundValues(getb(df.UpperBounds))
		id := snap
		if err := w.Add(ig.NewManifestEntry(ig.EntryStatusADDED, &id, nil, nil, b.Build())); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	mf, err := w.ToManifestFile("s3://b/m.avro", int64(mbuf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	var lbuf bytes.Buffer
	seq := int64(4)
	if err := ig.WriteManifestList(2, &lbuf, snap, nil, &seq, 0, []ig.ManifestFile{mf}); err != nil {
		t.Fatal(err)
	}
	mans, err := iceberg.ReadManifestList(lbuf.Bytes())
	if err != nil || len(mans) != 1 {
		t.Fatalf("read the list: %v, %v", mans, err)
	}
	m := mans[0]
	if m.Path != "s3://b/m.avro" || m.SequenceNumber != seq || m.AddedSnapshotID != snap || m.AddedFilesCount != 2 || m.AddedRowsCount != 30 {
		t.Fatalf("manifest %+v", m)
	}
	es, err := iceberg.ReadManifest(m, mbuf.Bytes(), true)
	if err != nil || len(es) != 2 {
		t.Fatalf("read the manifest: %v, %v", es, err)
	}
	for i, e := range es {
		if e.Status != iceberg.EntryStatusADDED || *e.SnapshotID != snap || *e.SequenceNumber != seq || *e.FileSequenceNumber != seq {
			t.Fatalf("entry %d: %+v", i, e)
		}
		got := e.DataFile
		// iceberg-go writes its maps in Go's map order.
		for _, es := range [][]iceberg.IntLong{got.ValueCounts, got.NullValueCounts} {
			slices.SortFunc(es, func(a, b iceberg.IntLong) int { return int(a.Key - b.Key) })
		}
		for _, es := range [][]iceberg.IntBytes{got.LowerBounds, got.UpperBounds} {
			slices.SortFunc(es, func(a, b iceberg.IntBytes) int { return int(a.Key - b.Key) })
		}
		same(t, "data file", got, want[i])
	}
}

// What the spec does not allow is refused: existing files without their
// sequence numbers, another snapshot's manifest without one, a partition
// value of the wrong type, entries of a status a writer does not add.
func TestManifestWriterRefuses(t *testing.T) {
	sc := testSchema()
	seq := int64(1)
	for name, e := range map[string]iceberg.ManifestEntry{
		"existing without sequence numbers": {Status: iceberg.EntryStatusEXISTING, SnapshotID: &seq, DataFile: dataFile("a", 1, 1)},
		"deleted":                           {Status: iceberg.EntryStatusDELETED, SnapshotID: &seq, SequenceNumber: &seq, FileSequenceNumber: &seq, DataFile: dataFile("a", 1, 1)},
		"partition out of range":            {Status: iceberg.EntryStatusADDED, DataFile: func() iceberg.DataFile { d := dataFile("a", 1, 1); d.Partition["partition"] = int64(1 << 40); return d }()},
		"partition of another type":         {Status: iceberg.EntryStatusADDED, DataFile: func() iceberg.DataFile { d := dataFile("a", 1, 1); d.Partition["partition"] = "p"; return d }()},
	} {
		if _, err := iceberg.WriteManifest(new(bytes.Buffer), spec(), sc, 2, []iceberg.ManifestEntry{e}); err == nil {
			t.Errorf("%s: written", name)
		}
	}
	if _, err := iceberg.WriteManifestList(new(bytes.Buffer), 2, nil, 3, []iceberg.ManifestFile{{Path: "m", SequenceNumber: -1, MinSequenceNumber: -1, AddedSnapshotID: 1}}); err == nil {
		t.Error("a manifest of another snapshot without a sequence number listed")
	}
}

// Partition values of each type written here come back as written, with
// their summary bounds where the type has an order here; other types
// are refused.
func TestPartitionTypes(t *testing.T) {
	for _, c := range []struct {
		typ    iceberg.Type
		v      any
		bounds []byte
	}{
		{iceberg.PrimitiveTypes.Int32, int32(-2), []byte{0xfe, 0xff, 0xff, 0xff}},
		{iceberg.PrimitiveTypes.Int64, int64(5), []byte{5, 0, 0, 0, 0, 0, 0, 0}},
		{iceberg.PrimitiveTypes.String, "x", []byte("x")},
		{iceberg.PrimitiveTypes.Binary, []byte("y"), []byte("y")},
		{iceberg.PrimitiveTypes.Bool, true, nil},
		{iceberg.PrimitiveTypes.Float64, 1.5, nil},
		{iceberg.PrimitiveTypes.Int32, nil, nil},
	} {
		sc := iceberg.NewSchema(0, iceberg.NestedField{ID: 1, Name: "p", Type: c.typ})
		var buf bytes.Buffer
		mf, err := iceberg.WriteManifest(&buf, spec(), sc, 1, []iceberg.ManifestEntry{{Status: iceberg.EntryStatusADDED,
			DataFile: iceberg.DataFile{FilePath: "a", FileFormat: iceberg.ParquetFile, Partition: map[string]any{"partition": c.v}}}})
		if err != nil {
			t.Fatalf("%s: %v", c.typ, err)
		}
		es, err := iceberg.ReadManifest(mf, buf.Bytes(), true)
		if err != nil {
			t.Fatalf("%s: %v", c.typ, err)
		}
		same(t, c.typ.String()+" value", es[0].DataFile.Partition["partition"], c.v)
		ps := mf.Partitions[0]
		same(t, c.typ.String()+" bounds", [][]byte{ps.LowerBound, ps.UpperBound}, [][]byte{c.bounds, c.bounds})
		same(t, c.typ.String()+" null", ps.ContainsNull, c.v == nil)
	}
	sc := iceberg.NewSchema(0, iceberg.NestedField{ID: 1, Name: "p", Type: iceberg.PrimitiveTypes.Date})
	if _, err := iceberg.WriteManifest(new(bytes.Buffer), spec(), sc, 1, []iceberg.ManifestEntry{{Status: iceberg.EntryStatusADDED,
		DataFile: iceberg.DataFile{FilePath: "a", Partition: map[string]any{"partition": int32(1)}}}}); err == nil {
		t.Fatal("a date partition written")
	}
}
