package cold

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/parquet-go/parquet-go"

	"github.com/korvet/korvet/cold/iceberg"
	"github.com/korvet/korvet/engine/record"
	"github.com/korvet/korvet/engine/schema"
)

// Shapes of a hand-built value schema: v1, and v2 adding fields (at the
// root, in a nested struct, in a list's element struct) and widening id
// (int32 -> int64) and score (float32 -> float64).
func testShape(v2 bool) *schema.Field {
	f := func(name string, k schema.Kind) *schema.Field {
		return &schema.Field{Name: name, Kind: k, Doc: "doc of " + name}
	}
	st := func(name string, fs ...*schema.Field) *schema.Field {
		return &schema.Field{Name: name, Kind: schema.KindStruct, Fields: fs}
	}
	list := func(name string, e *schema.Field) *schema.Field {
		e.Name = "element"
		return &schema.Field{Name: name, Kind: schema.KindList, Elem: e}
	}
	mp := func(name string, e *schema.Field) *schema.Field {
		e.Name = "value"
		return &schema.Field{Name: name, Kind: schema.KindMap, Elem: e}
	}
	id, score := schema.KindInt32, schema.KindFloat32
	if v2 {
		id, score = schema.KindInt64, schema.KindFloat64
	}
	geo := st("geo", f("lat", schema.KindFloat64), f("lon", schema.KindFloat64))
	addr := st("addr", f("street", schema.KindString), geo)
	item := st("", f("sku", schema.KindString), f("qty", schema.KindInt32))
	if v2 {
		addr.Fields = append(addr.Fields, f("zip", schema.KindString))
		item.Fields = append(item.Fields, f("price", schema.KindFloat64))
	}
	root := st("",
		f("id", id), f("name", schema.KindString), f("ok", schema.KindBool), f("score", score),
		f("ratio", schema.KindFloat64), f("big", schema.KindInt64), f("raw", schema.KindBinary),
		f("at", schema.KindTimestamp), f("day", schema.KindDate), f("extra", schema.KindJSON),
		f("weird name.x", schema.KindString), f("Name", schema.KindString), f("1st", schema.KindInt32),
		f("", schema.KindString), f("größe", schema.KindInt32),
		addr,
		list("tags", f("", schema.KindString)),
		list("items", item),
		mp("attrs", f("", schema.KindString)),
		mp("nested", list("", f("", schema.KindInt64))),
	)
	if v2 {
		root.Fields = append(root.Fields, f("note", schema.KindString))
	}
	return root
}

// fromJSON lays a decoded JSON value out as f says (the Go types of
// schema.Kind); nil for what does not fit.
func fromJSON(x any, f *schema.Field) any {
	if x == nil {
		return nil
	}
	num := func() (json.Number, bool) { n, ok := x.(json.Number); return n, ok }
	switch f.Kind {
	case schema.KindStruct:
		m, ok := x.(map[string]any)
		if !ok {
			return nil
		}
		out := map[string]any{}
		for _, c := range f.Fields {
			if v, ok := m[c.Name]; ok {
				out[c.Name] = fromJSON(v, c)
			}
		}
		return out
	case schema.KindList:
		xs, ok := x.([]any)
		if !ok {
			return nil
		}
		out := make([]any, len(xs))
		for i, e := range xs {
			out[i] = fromJSON(e, f.Elem)
		}
		return out
	case schema.KindMap:
		m, ok := x.(map[string]any)
		if !ok {
			return nil
		}
		out := map[string]any{}
		for k, e := range m {
			out[k] = fromJSON(e, f.Elem)
		}
		return out
	case schema.KindBool:
		b, _ := x.(bool)
		return b
	case schema.KindInt32, schema.KindDate:
		n, _ := num()
		i, _ := n.Int64()
		return int32(i)
	case schema.KindInt64, schema.KindTimestamp:
		n, _ := num()
		i, _ := n.Int64()
		return i
	case schema.KindFloat32:
		n, _ := num()
		v, _ := n.Float64()
		return float32(v)
	case schema.KindFloat64:
		n, _ := num()
		v, _ := n.Float64()
		return v
	case schema.KindString:
		s, _ := x.(string)
		return s
	case schema.KindJSON:
		b, _ := json.Marshal(x)
		return string(b)
	case schema.KindBinary:
		s, _ := x.(string)
		b, _ := base64.StdEncoding.DecodeString(s)
		return b
	}
	return nil
}

// testTyped decodes values framed with id 1 (shape v1) or, when v2, id 2
// (shape v2) too; the payload is JSON. Its Shape is the merged one.
func testTyped(v2 bool) *schema.Typed {
	shapes := map[int32]*schema.Field{1: testShape(false)}
	ids := []int32{1}
	if v2 {
		shapes[2], ids = testShape(true), []int32{1, 2}
	}
	merged := testShape(v2)
	return &schema.Typed{
		Subject: "typed-value", IDs: ids, Shape: merged,
		Decode: func(value []byte) (any, bool) {
			id, payload, ok := schema.SplitFrame(value)
			sh := shapes[id]
			if !ok || sh == nil {
				return nil, false
			}
			d := json.NewDecoder(bytes.NewReader(payload))
			d.UseNumber()
			var x any
			if d.Decode(&x) != nil {
				return nil, false
			}
			v := fromJSON(x, sh)
			return v, v != nil
		},
	}
}

// typedValues are payloads with nulls at every level, a value of each
// kind, and values the decoder refuses.
var typedValues = []string{
	`{"id":1,"name":"a","ok":true,"score":1.5,"ratio":0.25,"big":9007199254740993,"raw":"AAEC/w==","at":1700000000123456,"day":19700,"extra":{"k":[1,2]},"weird name.x":"w","Name":"N","1st":7,"":"empty","größe":3,` +
		`"addr":{"street":"Main","geo":{"lat":1.5,"lon":-2.25}},"tags":["x","y"],"items":[{"sku":"s1","qty":2},{"sku":"s2","qty":null}],"attrs":{"b":"2","a":"1"},"nested":{"l":[1,2,3],"e":[],"n":null}}`,
	`{"id":2}`,
	`{"id":3,"addr":null,"tags":null,"items":null,"attrs":null,"nested":null}`,
	`{"id":4,"addr":{"street":null,"geo":null},"tags":[],"items":[],"attrs":{},"nested":{}}`,
	`{"id":5,"addr":{"geo":{"lat":null}},"tags":[null,"z",null],"items":[null,{"sku":null},null],"attrs":{"k":null},"nested":{"x":[null,4]}}`,
	`{"id":-2147483648,"score":-0.5,"extra":"just a string","extra2":"ignored"}`,
}

// typedV2Values are payloads of shape v2: the new fields and widened
// values.
var typedV2Values = []string{
	`{"id":9007199254740993,"score":1e300,"note":"new","addr":{"zip":"12345","street":"S"},"items":[{"sku":"p","price":9.5}]}`,
	`{"id":6,"note":null,"addr":{"zip":null}}`,
}

// typedRecords builds a segment: framed values (id 1 payloads, then, if
// v2, id 2 ones), unframed values, a tombstone, an unknown id, a value
// that is not JSON.
func typedRecords(base int64, v2 bool) []record.Record {
	var vals [][]byte
	for _, p := range typedValues {
		vals = append(vals, append(schema.AppendFrame(nil, 1), p...))
	}
	if v2 {
		for _, p := range typedV2Values {
			vals = append(vals, append(schema.AppendFrame(nil, 2), p...))
		}
	}
	vals = append(vals, []byte(`{"id":1}`), nil, append(schema.AppendFrame(nil, 99), `{"id":1}`...),
		append(schema.AppendFrame(nil, 1), `{"id":`...), []byte{}, []byte{0, 0, 0, 0, 1})
	recs := make([]record.Record, len(vals))
	for i, v := range vals {
		off := base + int64(i)
		recs[i] = record.Record{Offset: off, Timestamp: 1_700_000_000_000 + off, Key: []byte(fmt.Sprint("k", off)), Value: v}
		if i%3 == 0 {
			recs[i].Headers = []record.Header{{Key: []byte("h"), Value: []byte{byte(i)}}}
		}
	}
	return recs
}

// expectRow is what the scan must show for a record's value_fields: the
// decoded value laid out as the final (merged) shape, by column names.
func expectRow(typed, final *schema.Typed, value []byte) any {
	v, ok := typed.Decode(value)
	if !ok || v == nil {
		return nil
	}
	return project(v, final.Shape)
}

func project(v any, f *schema.Field) any {
	if v == nil {
		return nil
	}
	switch f.Kind {
	case schema.KindStruct:
		m := v.(map[string]any)
		out := map[string]any{}
		for _, nf := range typedNames(f.Fields) {
			out[nf.col] = project(m[nf.f.Name], nf.f)
		}
		return out
	case schema.KindList:
		out := []any{}
		for _, e := range v.([]any) {
			out = append(out, project(e, f.Elem))
		}
		return out
	case schema.KindMap:
		out := map[string]any{}
		for k, e := range v.(map[string]any) {
			out[k] = project(e, f.Elem)
		}
		return out
	case schema.KindInt64, schema.KindTimestamp:
		if i, ok := v.(int32); ok {
			return int64(i)
		}
	case schema.KindFloat64:
		if x, ok := v.(float32); ok {
			return float64(x)
		}
	}
	return v
}

// arrowValue reads row i of an Arrow array as the Go values Decode gives.
func arrowValue(t *testing.T, a arrow.Array, i int) any {
	if a.IsNull(i) {
		return nil
	}
	switch a := a.(type) {
	case *array.Struct:
		st := a.DataType().(*arrow.StructType)
		out := map[string]any{}
		for j, f := range st.Fields() {
			out[f.Name] = arrowValue(t, a.Field(j), i)
		}
		return out
	case *array.Map:
		start, end := a.ValueOffsets(i)
		out := map[string]any{}
		for j := int(start); j < int(end); j++ {
			out[a.Keys().(*array.String).Value(j)] = arrowValue(t, a.Items(), j)
		}
		return out
	case *array.List:
		start, end := a.ValueOffsets(i)
		out := []any{}
		for j := int(start); j < int(end); j++ {
			out = append(out, arrowValue(t, a.ListValues(), j))
		}
		return out
	case *array.Boolean:
		return a.Value(i)
	case *array.Int32:
		return a.Value(i)
	case *array.Int64:
		return a.Value(i)
	case *array.Float32:
		return a.Value(i)
	case *array.Float64:
		return a.Value(i)
	case *array.String:
		return a.Value(i)
	case *array.Binary:
		return bytes.Clone(a.Value(i))
	case *array.Timestamp:
		if u := a.DataType().(*arrow.TimestampType).Unit; u != arrow.Microsecond {
			t.Fatalf("timestamp unit %v", u)
		}
		return int64(a.Value(i))
	case *array.Date32:
		return int32(a.Value(i))
	}
	t.Fatalf("unexpected arrow array %T", a)
	return nil
}

// scanTyped reads offset -> (value, value_fields) through iceberg-go's
// scan of the table's current schema.
func scanTyped(t *testing.T, s *Store, topic string) (map[int64][]byte, map[int64]any) {
	t.Helper()
	tbl, err := tableIO(s).LoadTable(ctxT(t), s.ident(topic))
	if err != nil {
		t.Fatal(err)
	}
	vals, typed := map[int64][]byte{}, map[int64]any{}
	for _, rec := range scanAll(t, tbl, nil) {
		col := func(name string) arrow.Array { return column(t, rec, name) }
		offs, vs, tf := col("offset").(*array.Int64), col("value").(*array.Binary), col(valueFieldsName)
		for i := range int(rec.NumRows()) {
			off := offs.Value(i)
			if !vs.IsNull(i) {
				vals[off] = bytes.Clone(vs.Value(i))
			}
			typed[off] = arrowValue(t, tf, i)
		}
		rec.Release()
	}
	return vals, typed
}

// TestTypedColumns archives segments of a topic with a value shape: with
// shape v1, then with v2 (fields added at every level, id and score
// widened). The table schema evolves in place (stable field ids), and
// iceberg-go's scan reads every file through the evolved schema: v2's new
// fields are null in the first file, widened values are exact, nulls at
// every level survive, undecodable values have null typed columns, and
// the raw values and korvet's own reads stay byte-exact.
func TestTypedColumns(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) { typedColumns(t, b.cfg) })
	t.Run("rest", func(t *testing.T) {
		// Commits through an Iceberg REST catalog carry the evolution too.
		dir := t.TempDir()
		wh := "file://" + filepath.Join(dir, "wh")
		backing := &fsCatalog{root: wh, o: &localObjects{n: new(counters)}, log: testLogger(t)}
		srv := httptest.NewServer(&testRESTServer{t: t, cat: backing})
		defer srv.Close()
		typedColumns(t, Config{Warehouse: wh, RESTCatalogURL: srv.URL, RESTCatalogToken: "tok"})
	})
}

func typedColumns(t *testing.T, cfg Config) {
	s := openStore(t, cfg)
	ctx := ctxT(t)
	cur := testTyped(false)
	s.SetTyped(func(_ context.Context, topic string) (*schema.Typed, error) {
		if topic != "typed" {
			return nil, nil
		}
		return cur, nil
	})
	seg1 := typedRecords(0, false)
	f1, err := s.Archive(ctx, ref("typed", 0, 0, 0, len(seg1)), chunked(seg1, 3))
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := tableIO(s).LoadTable(ctx, s.ident("typed"))
	if err != nil {
		t.Fatal(err)
	}
	ids1 := fieldIDs(schemaOf(t, tbl))
	checkTypedSchema(t, schemaOf(t, tbl), false)

	cur = testTyped(true)
	seg2 := typedRecords(100, true)
	f2, err := s.Archive(ctx, ref("typed", 0, 1, 100, len(seg2)), chunked(seg2, 4))
	if err != nil {
		t.Fatal(err)
	}
	if tbl, err = tableIO(s).LoadTable(ctx, s.ident("typed")); err != nil {
		t.Fatal(err)
	}
	checkTypedSchema(t, schemaOf(t, tbl), true)
	ids2 := fieldIDs(schemaOf(t, tbl))
	for name, id := range ids1 {
		if ids2[name] != id {
			t.Errorf("field %s: id %d after evolution, %d before", name, ids2[name], id)
		}
	}
	if err := checkSchema(schemaOf(t, tbl)); err != nil {
		t.Fatal(err)
	}

	vals, got := scanTyped(t, s, "typed")
	final := testTyped(true)
	for _, seg := range []struct {
		recs  []record.Record
		typed *schema.Typed
	}{{seg1, testTyped(false)}, {seg2, final}} {
		for _, r := range seg.recs {
			if !sameBytes(vals[r.Offset], r.Value) && !(len(r.Value) == 0 && vals[r.Offset] == nil) {
				t.Errorf("offset %d: value %q, want %q", r.Offset, vals[r.Offset], r.Value)
			}
			want := expectRow(seg.typed, final, r.Value)
			if !reflect.DeepEqual(got[r.Offset], want) {
				t.Errorf("offset %d: value_fields\n got %#v\nwant %#v", r.Offset, got[r.Offset], want)
			}
		}
	}
	// Spot checks that would catch a projection bug shared by the
	// expectation and the writer.
	row0 := got[0].(map[string]any)
	if row0["note"] != nil || row0["id"] != int64(1) || row0["weird_x20name_x2Ex"] != "w" || row0["Name_2"] != "N" ||
		row0["_1st"] != int32(7) || row0["_"] != "empty" || row0["gr_xF6_xDFe"] != int32(3) || row0["at"] != int64(1700000000123456) {
		t.Errorf("row 0: %#v", row0)
	}
	v2row := got[int64(100+len(typedValues))].(map[string]any)
	if v2row["score"] != 1e300 || v2row["id"] != int64(9007199254740993) || v2row["note"] != "new" {
		t.Errorf("v2 row: %#v", v2row)
	}
	if v1row := got[100].(map[string]any); v1row["score"] != float64(float32(1.5)) || v1row["id"] != int64(1) {
		t.Errorf("v1 row in the second file: %#v", v1row)
	}

	// The second file carries the table's field ids at every level.
	pf, err := s.openFile(ctx, f2.Path, f2.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	vf, _ := schemaOf(t, tbl).FindFieldByName(valueFieldsName)
	var node parquet.Node
	for _, c := range pf.Schema().Fields() {
		if c.Name() == valueFieldsName {
			node = c
		}
	}
	if node == nil {
		t.Fatal("no value_fields in the second file")
	}
	checkFileIDs(t, node, vf, valueFieldsName)

	// korvet's reads ignore the typed columns and return the records.
	for _, c := range []struct {
		f    DataFile
		recs []record.Record
	}{{f1, seg1}, {f2, seg2}} {
		recs, _, err := s.Read(ctx, c.f, 0, 1<<30)
		if err != nil {
			t.Fatal(err)
		}
		equalRecords(t, recs, c.recs)
	}
	// And a new store (cold cache) reads them too.
	s2 := openStore(t, cfg)
	files, err := s2.Files(ctx, "typed")
	if err != nil || len(files) != 2 {
		t.Fatalf("files %v, %v", files, err)
	}
	recs, _, err := s2.Read(ctx, files[1], 0, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	equalRecords(t, recs, seg2)
}

// fieldIDs maps every column's full name to its field id.
func fieldIDs(sc *iceberg.Schema) map[string]int {
	out := map[string]int{}
	for _, f := range sc.Fields() {
		collectIDs(out, f.Name, f)
	}
	return out
}

func collectIDs(out map[string]int, name string, f iceberg.NestedField) {
	out[name] = f.ID
	switch t := f.Type.(type) {
	case *iceberg.StructType:
		for _, c := range t.FieldList {
			collectIDs(out, name+"."+c.Name, c)
		}
	case *iceberg.ListType:
		collectIDs(out, name+".element", t.ElementField())
	case *iceberg.MapType:
		collectIDs(out, name+".value", t.ValueField())
	}
}

func checkTypedSchema(t *testing.T, sc *iceberg.Schema, v2 bool) {
	t.Helper()
	want := map[string]iceberg.Type{
		"value_fields.id": iceberg.PrimitiveTypes.Int32, "value_fields.score": iceberg.PrimitiveTypes.Float32,
		"value_fields.at": iceberg.PrimitiveTypes.TimestampTz, "value_fields.day": iceberg.PrimitiveTypes.Date,
		"value_fields.raw": iceberg.PrimitiveTypes.Binary, "value_fields.extra": iceberg.PrimitiveTypes.String,
		"value_fields.addr.geo.lat":         iceberg.PrimitiveTypes.Float64,
		"value_fields.items.element.qty":    iceberg.PrimitiveTypes.Int32,
		"value_fields.nested.value.element": iceberg.PrimitiveTypes.Int64,
	}
	if v2 {
		want["value_fields.id"], want["value_fields.score"] = iceberg.PrimitiveTypes.Int64, iceberg.PrimitiveTypes.Float64
		want["value_fields.note"] = iceberg.PrimitiveTypes.String
		want["value_fields.addr.zip"] = iceberg.PrimitiveTypes.String
		want["value_fields.items.element.price"] = iceberg.PrimitiveTypes.Float64
	}
	for name, typ := range want {
		f, ok := sc.FindFieldByName(name)
		if !ok || !f.Type.Equals(typ) || f.Required {
			t.Errorf("%s: %v %v, want optional %s", name, f, ok, typ)
		}
	}
	if f, _ := sc.FindFieldByName("value_fields.id"); f.Doc != "doc of id" {
		t.Errorf("doc %q", f.Doc)
	}
	if _, ok := sc.FindFieldByName("value_fields.note"); ok != v2 {
		t.Errorf("note present: %v", ok)
	}
}

// TestTypedRefusedChange: a shape that changes a column's type in a way
// Iceberg cannot follow archives without typed columns (the file reads
// as null there) instead of failing; so does a hook that errs, and a
// topic without a shape.
func TestTypedRefusedChange(t *testing.T) {
	s := openStore(t, localBackend(t).cfg)
	ctx := ctxT(t)
	cur := testTyped(false)
	var hookErr error
	s.SetTyped(func(context.Context, string) (*schema.Typed, error) { return cur, hookErr })
	seg1 := typedRecords(0, false)
	if _, err := s.Archive(ctx, ref("refuse", 0, 0, 0, len(seg1)), chunked(seg1, 100)); err != nil {
		t.Fatal(err)
	}
	// name: string -> int32 is no promotion.
	bad := testTyped(false)
	bad.Shape = testShape(false)
	bad.Shape.Fields[1].Kind = schema.KindInt32
	cur = bad
	seg2 := typedRecords(100, false)
	if _, err := s.Archive(ctx, ref("refuse", 0, 1, 100, len(seg2)), chunked(seg2, 100)); err != nil {
		t.Fatal(err)
	}
	cur, hookErr = testTyped(false), errors.New("registry down")
	seg3 := typedRecords(200, false)
	if _, err := s.Archive(ctx, ref("refuse", 0, 2, 200, len(seg3)), chunked(seg3, 100)); err != nil {
		t.Fatal(err)
	}
	cur, hookErr = nil, nil
	seg4 := typedRecords(300, false)
	if _, err := s.Archive(ctx, ref("refuse", 0, 3, 300, len(seg4)), chunked(seg4, 100)); err != nil {
		t.Fatal(err)
	}
	tbl, err := tableIO(s).LoadTable(ctx, s.ident("refuse"))
	if err != nil {
		t.Fatal(err)
	}
	checkTypedSchema(t, schemaOf(t, tbl), false)
	vals, got := scanTyped(t, s, "refuse")
	if len(vals) == 0 {
		t.Fatal("no rows")
	}
	typedRows := 0
	for off, v := range got {
		if off >= 100 && v != nil {
			t.Errorf("offset %d: typed %v in a file written without typed columns", off, v)
		}
		if off < 100 && v != nil {
			typedRows++
		}
	}
	if typedRows != len(typedValues) {
		t.Errorf("%d typed rows in the first file, want %d", typedRows, len(typedValues))
	}
	for _, seg := range [][]record.Record{seg1, seg2, seg3, seg4} {
		for _, r := range seg {
			if !bytes.Equal(vals[r.Offset], r.Value) {
				t.Errorf("offset %d: value %q, want %q", r.Offset, vals[r.Offset], r.Value)
			}
		}
	}
}

func TestTypedName(t *testing.T) {
	for in, want := range map[string]string{
		"plain": "plain", "with_underscore9": "with_underscore9", "": "_", "1st": "_1st",
		"a.b": "a_x2Eb", "a b": "a_x20b", "größe": "gr_xF6_xDFe", "-": "_x2D",
	} {
		if got := typedName(in); got != want {
			t.Errorf("typedName(%q) = %q, want %q", in, got, want)
		}
	}
	var fs []*schema.Field
	for _, n := range []string{"a", "A", "a_2", "a", "b"} {
		fs = append(fs, &schema.Field{Name: n, Kind: schema.KindString})
	}
	var got []string
	for _, nf := range typedNames(fs) {
		got = append(got, nf.col)
	}
	if want := []string{"a", "A_2", "a_2_2", "a_3", "b"}; !slices.Equal(got, want) {
		t.Errorf("typedNames: %v, want %v", got, want)
	}
	if strings.Contains(strings.Join(got, ""), ".") {
		t.Error("dot in a name")
	}
}

// TestTypedEvolvedMeanwhile: another writer evolves the typed columns
// between this writer's upload and its commit. The file carries ids the
// table no longer has in that layout, so the archive fails instead of
// publishing it, and a retry writes the file for the table as it is.
func TestTypedEvolvedMeanwhile(t *testing.T) {
	cfg := localBackend(t).cfg
	ctx := ctxT(t)
	a, b := openStore(t, cfg), openStore(t, cfg)
	a.SetTyped(func(context.Context, string) (*schema.Typed, error) { return testTyped(false), nil })
	b.SetTyped(func(context.Context, string) (*schema.Typed, error) { return testTyped(true), nil })
	seg0 := typedRecords(0, false)
	if _, err := a.Archive(ctx, ref("race", 0, 0, 0, len(seg0)), chunked(seg0, 100)); err != nil {
		t.Fatal(err)
	}
	seg1, seg2 := typedRecords(100, false), typedRecords(200, true)
	a.afterUpload = func() error {
		a.afterUpload = nil
		_, err := b.Archive(ctx, ref("race", 0, 2, 200, len(seg2)), chunked(seg2, 100))
		return err
	}
	_, err := a.Archive(ctx, ref("race", 0, 1, 100, len(seg1)), chunked(seg1, 100))
	if err == nil || !strings.Contains(err.Error(), "typed columns changed") {
		t.Fatalf("archive over a table evolved meanwhile: %v", err)
	}
	if _, err := a.Archive(ctx, ref("race", 0, 1, 100, len(seg1)), chunked(seg1, 100)); err != nil {
		t.Fatal(err)
	}
	vals, got := scanTyped(t, a, "race")
	final := testTyped(true)
	for _, seg := range []struct {
		recs  []record.Record
		typed *schema.Typed
	}{{seg0, testTyped(false)}, {seg1, testTyped(false)}, {seg2, final}} {
		for _, r := range seg.recs {
			if !bytes.Equal(vals[r.Offset], r.Value) {
				t.Errorf("offset %d: value %q, want %q", r.Offset, vals[r.Offset], r.Value)
			}
			if want := expectRow(seg.typed, final, r.Value); !reflect.DeepEqual(got[r.Offset], want) {
				t.Errorf("offset %d: value_fields\n got %#v\nwant %#v", r.Offset, got[r.Offset], want)
			}
		}
	}
}

// countHandler counts log records at Warn and above.
type countHandler struct {
	slog.Handler
	mu    *sync.Mutex
	warns *int
}

func (h countHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		h.mu.Lock()
		*h.warns++
		h.mu.Unlock()
	}
	return h.Handler.Handle(ctx, r)
}

// TestTypedWarnsOncePerMinute: a registry that fails is logged once per
// topic per minute, not once per segment, and the segments are archived.
func TestTypedWarnsOncePerMinute(t *testing.T) {
	var mu sync.Mutex
	warns := 0
	log := slog.New(countHandler{Handler: testLogger(t).Handler(), mu: &mu, warns: &warns})
	s, err := Open(ctxT(t), localBackend(t).cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.SetTyped(func(context.Context, string) (*schema.Typed, error) { return nil, errors.New("registry down") })
	ctx := ctxT(t)
	for seg := range 3 {
		for _, topic := range []string{"warn-a", "warn-b"} {
			recs := typedRecords(int64(seg*100), false)
			if _, err := s.Archive(ctx, ref(topic, 0, int64(seg), int64(seg*100), len(recs)), chunked(recs, 100)); err != nil {
				t.Fatal(err)
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if warns != 2 {
		t.Errorf("%d warnings for 6 segments of 2 topics, want 2", warns)
	}
	if n := scanCount(t, s, "warn-a"); n != 3*len(typedRecords(0, false)) {
		t.Errorf("%d rows", n)
	}
}

// checkFileIDs checks that a file's value_fields columns carry the field
// ids of the table's value_fields (f), at every level.
func checkFileIDs(t *testing.T, n parquet.Node, f iceberg.NestedField, path string) {
	t.Helper()
	if n.ID() != f.ID {
		t.Errorf("%s: field id %d in the file, %d in the table", path, n.ID(), f.ID)
	}
	child := func(n parquet.Node, names ...string) parquet.Node {
		for _, name := range names {
			var found parquet.Node
			for _, c := range n.Fields() {
				if c.Name() == name {
					found = c
				}
			}
			if found == nil {
				t.Fatalf("%s: no %s in the file", path, name)
			}
			n = found
		}
		return n
	}
	switch ft := f.Type.(type) {
	case *iceberg.StructType:
		for _, c := range ft.FieldList {
			checkFileIDs(t, child(n, c.Name), c, path+"."+c.Name)
		}
	case *iceberg.ListType:
		checkFileIDs(t, child(n, "list", "element"), ft.ElementField(), path+".element")
	case *iceberg.MapType:
		checkFileIDs(t, child(n, "key_value", "key"), iceberg.NestedField{ID: ft.KeyID, Type: ft.KeyType}, path+".key")
		checkFileIDs(t, child(n, "key_value", "value"), ft.ValueField(), path+".value")
	}
}
