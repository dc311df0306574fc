package icemeta

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"

	ig "github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	"github.com/korvet/korvet/cold/iceberg"
)

func testSchema() *iceberg.Schema {
	return iceberg.NewSchema(0,
		iceberg.NestedField{ID: 1, Name: "p", Type: iceberg.PrimitiveTypes.Int32, Required: true},
		iceberg.NestedField{ID: 2, Name: "s", Type: &iceberg.StructType{FieldList: []iceberg.NestedField{
			{ID: 3, Name: "a", Type: iceberg.PrimitiveTypes.Int32},
			{ID: 4, Name: "l", Type: &iceberg.ListType{ElementID: 5, Element: &iceberg.StructType{FieldList: []iceberg.NestedField{
				{ID: 6, Name: "x", Type: iceberg.PrimitiveTypes.Float32},
			}}}},
		}}},
	)
}

func testSpec() iceberg.PartitionSpec {
	return iceberg.PartitionSpec{Fields: []iceberg.PartitionField{{SourceID: 1, FieldID: 1000, Name: "p", Transform: "identity"}}}
}

// The same, as iceberg-go has them (through their JSON).
func igSchema(t *testing.T, sc *iceberg.Schema) *ig.Schema {
	t.Helper()
	b, err := json.Marshal(sc)
	if err != nil {
		t.Fatal(err)
	}
	var out ig.Schema
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
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
		t.Fatal(err)
	}
	return &out
}

func igType(t *testing.T, typ iceberg.Type) ig.Type {
	t.Helper()
	return igSchema(t, iceberg.NewSchema(0, iceberg.NestedField{ID: 1, Name: "x", Type: typ})).Field(0).Type
}

func igSpec() ig.PartitionSpec {
	return ig.NewPartitionSpec(ig.PartitionField{SourceIDs: []int{1}, FieldID: 1000, Name: "p", Transform: ig.IdentityTransform{}})
}

// sameSchema compares schemas field by field, ids included.
func sameSchema(a, b *iceberg.Schema) bool {
	return a.ID == b.ID && (&iceberg.StructType{FieldList: a.Fields()}).Equals(&iceberg.StructType{FieldList: b.Fields()})
}

// Metadata iceberg-go writes parses, and writes back with every key it
// had (unknown ones verbatim), which iceberg-go parses again.
func TestRoundTripIcebergGoMetadata(t *testing.T) {
	spec := igSpec()
	meta, err := table.NewMetadata(igSchema(t, testSchema()), &spec, table.UnsortedSortOrder, "file:///t", ig.Properties{"k": "v"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(meta)
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	raw["x-other-writer"] = json.RawMessage(`{"a":[1,2]}`)
	b, _ = json.Marshal(raw)
	m, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if m.Properties["k"] != "v" || m.CurrentSchema() == nil || m.Spec() == nil || m.TableUUID == "" {
		t.Fatalf("parsed %+v", m)
	}
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var back map[string]json.RawMessage
	if err := json.Unmarshal(out, &back); err != nil {
		t.Fatal(err)
	}
	for k := range raw {
		if _, ok := back[k]; !ok {
			t.Errorf("key %s lost", k)
		}
	}
	if string(back["x-other-writer"]) != `{"a":[1,2]}` {
		t.Errorf("unknown key written as %s", back["x-other-writer"])
	}
	if _, err := table.ParseMetadataBytes(out); err != nil {
		t.Fatal(err)
	}
	if _, err := Parse([]byte(`{"format-version":1}`)); err == nil {
		t.Fatal("v1 metadata accepted")
	}
	if _, err := Parse([]byte(`{"format-version":2,"schemas":[],"current-schema-id":0}`)); err == nil {
		t.Fatal("metadata without its current schema accepted")
	}
}

// Evolve assigns the ids iceberg-go's schema update assigns, nested
// fields included, and updates the name mapping the same way.
func TestEvolveMatchesIcebergGo(t *testing.T) {
	spec := igSpec()
	tm, err := table.NewMetadata(igSchema(t, testSchema()), &spec, table.UnsortedSortOrder, "file:///t", nil)
	if err != nil {
		t.Fatal(err)
	}
	nm, _ := json.Marshal(tm.CurrentSchema().NameMapping())
	tm, err = table.UpdateTableMetadata(tm, []table.Update{table.NewSetPropertiesUpdate(ig.Properties{PropNameMapping: string(nm)})}, "")
	if err != nil {
		t.Fatal(err)
	}
	nested := &iceberg.StructType{FieldList: []iceberg.NestedField{
		{Name: "m", Type: &iceberg.MapType{KeyType: iceberg.PrimitiveTypes.String, ValueType: &iceberg.ListType{Element: iceberg.PrimitiveTypes.Int64}}},
		{Name: "q", Type: iceberg.PrimitiveTypes.String},
	}}
	changes := []Change{
		{Path: []string{"n"}, Add: nested, Doc: "new"},
		{Path: []string{"s", "b"}, Add: iceberg.PrimitiveTypes.Bool},
		{Path: []string{"s", "l", "element", "y"}, Add: iceberg.PrimitiveTypes.String},
		{Path: []string{"s", "a"}, To: iceberg.PrimitiveTypes.Int64},
		{Path: []string{"s", "l", "element", "x"}, To: iceberg.PrimitiveTypes.Float64},
	}

	tbl := table.New(table.Identifier{"n", "t"}, tm, "file:///t/metadata/v1.metadata.json",
		func(context.Context) (iceio.IO, error) { return iceio.LocalFS{}, nil }, nil)
	u := tbl.NewTransaction().UpdateSchema(true, false, table.WithNameMapping(tbl.Metadata().NameMapping()))
	for _, c := range changes {
		if c.Add != nil {
			u.AddColumn(c.Path, igType(t, c.Add), c.Doc, false, nil)
		} else {
			u.UpdateColumn(c.Path, table.ColumnUpdate{FieldType: ig.Optional[ig.Type]{Val: igType(t, c.To), Valid: true}})
		}
	}
	wantUpdates, _, err := u.BuildUpdates()
	if err != nil {
		t.Fatal(err)
	}

	b, _ := json.Marshal(tm)
	m, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	sc, ups, err := Evolve(m, changes)
	if err != nil {
		t.Fatal(err)
	}
	if sameSchema(m.CurrentSchema(), sc) {
		t.Fatal("Evolve changed the table's own schema")
	}
	// The same updates, as iceberg-go applies them.
	gotJSON, _ := json.Marshal(ups)
	var parsed table.Updates
	if err := json.Unmarshal(gotJSON, &parsed); err != nil {
		t.Fatal(err)
	}
	got, err := table.UpdateTableMetadata(tm, parsed, "")
	if err != nil {
		t.Fatal(err)
	}
	want, err := table.UpdateTableMetadata(tm, wantUpdates, "")
	if err != nil {
		t.Fatal(err)
	}
	if ws := fromIG(t, want.CurrentSchema()); !sameSchema(sc, ws) {
		t.Fatalf("schema\n got %s\nwant %s", sc, ws)
	}
	if !got.CurrentSchema().Equals(want.CurrentSchema()) || got.LastColumnID() != want.LastColumnID() ||
		got.Properties()[PropNameMapping] != want.Properties()[PropNameMapping] {
		t.Fatalf("after the updates:\n got %s %d %s\nwant %s %d %s", got.CurrentSchema(), got.LastColumnID(), got.Properties()[PropNameMapping],
			want.CurrentSchema(), want.LastColumnID(), want.Properties()[PropNameMapping])
	}
	// And as icemeta applies them.
	mine, err := Apply(m, ups, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !sameSchema(mine.CurrentSchema(), fromIG(t, want.CurrentSchema())) || mine.LastColumnID != want.LastColumnID() ||
		mine.Properties[PropNameMapping] != want.Properties()[PropNameMapping] {
		t.Fatal("icemeta's Apply differs from iceberg-go's")
	}

	for _, bad := range []Change{
		{Path: []string{"p"}, Add: iceberg.PrimitiveTypes.Int32},           // exists
		{Path: []string{"s", "a"}, To: iceberg.PrimitiveTypes.String},      // not a promotion
		{Path: []string{"p", "z"}, Add: iceberg.PrimitiveTypes.Int32},      // parent not a struct
		{Path: []string{"nope", "z"}, Add: iceberg.PrimitiveTypes.Int32},   // no parent
		{Path: []string{"s", "l", "x"}, Add: iceberg.PrimitiveTypes.Int32}, // list needs "element"
	} {
		if _, _, err := Evolve(m, []Change{bad}); err == nil {
			t.Errorf("change %+v accepted", bad)
		}
	}
}

func snap(id int64, parent *int64, seq int64) Snapshot {
	return Snapshot{SnapshotID: id, ParentSnapshotID: parent, SequenceNumber: seq, TimestampMs: seq * 10, ManifestList: "l", Summary: map[string]string{"operation": "append"}}
}

// Snapshots added, committed against requirements, expired; the metadata
// log bounded. iceberg-go parses the result.
func TestSnapshotsAndLogs(t *testing.T) {
	m, err := New("file:///t", testSchema(), testSpec(), map[string]string{PropPreviousVersions: "2", PropDeleteAfterCommit: "true"}, 1)
	if err != nil {
		t.Fatal(err)
	}
	var parent *int64
	for i := int64(1); i <= 5; i++ {
		reqs := Requirements(m, false)
		s := snap(i*100, parent, m.LastSequenceNumber+1)
		next, err := Apply(m, AddSnapshot(s), i)
		if err != nil {
			t.Fatal(err)
		}
		if err := Check(m, reqs); err != nil {
			t.Fatal(err)
		}
		if err := Check(next, reqs); !errors.Is(err, ErrRequirement) {
			t.Fatalf("stale requirements pass: %v", err)
		}
		dropped := LogPrevious(next, "v"+string(rune('0'+i)), i)
		if i <= 2 && len(dropped) != 0 || i > 2 && !slices.Equal(dropped, []string{"v" + string(rune('0'+i-2))}) {
			t.Fatalf("commit %d dropped %v", i, dropped)
		}
		m = next
		id := i * 100
		parent = &id
	}
	if len(m.MetadataLog) != 2 || m.CurrentSnapshot().SnapshotID != 500 || m.LastSequenceNumber != 5 || len(m.SnapshotLog) != 5 {
		t.Fatalf("metadata %+v", m)
	}
	if _, err := Apply(m, AddSnapshot(snap(600, parent, 5)), 9); err == nil {
		t.Fatal("a reused sequence number accepted")
	}
	ids := ExpireSnapshots(m, 2)
	slices.Sort(ids)
	if !slices.Equal(ids, []int64{100, 200, 300}) {
		t.Fatalf("expire %v", ids)
	}
	m, err = Apply(m, []Update{RemoveSnapshots(ids)}, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Snapshots) != 2 || len(m.SnapshotLog) != 2 || m.CurrentSnapshot() == nil {
		t.Fatalf("after expiry %+v", m)
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	tm, err := table.ParseMetadataBytes(b)
	if err != nil {
		t.Fatal(err)
	}
	if tm.CurrentSnapshot().SnapshotID != 500 || len(tm.Snapshots()) != 2 || tm.CurrentSnapshot().Summary.Operation != table.OpAppend {
		t.Fatalf("iceberg-go reads %+v", tm.CurrentSnapshot())
	}
	// The requirements as iceberg-go reads and checks them.
	rb, _ := json.Marshal(Requirements(m, true))
	var reqs table.Requirements
	if err := json.Unmarshal(rb, &reqs); err != nil {
		t.Fatal(err)
	}
	for _, r := range reqs {
		if err := r.Validate(tm); err != nil {
			t.Fatal(err)
		}
	}
	fresh, _ := New("file:///u", testSchema(), testSpec(), nil, 1)
	if err := Check(fresh, Requirements(m, false)); !errors.Is(err, ErrRequirement) {
		t.Fatalf("another table passes: %v", err)
	}
}
