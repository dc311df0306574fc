package duckdbtest

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/duckdb/duckdb-go/v2"

	"github.com/korvet/korvet/cold"
	"github.com/korvet/korvet/engine/record"
	"github.com/korvet/korvet/engine/schema"
)

var topicID = [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}

// TestDuckDBReadsTypedColumns archives segments of a topic whose Avro
// value schema evolves (v2 adds fields at the root and in a nested struct and
// widens id from int to long), then opens every Parquet file with DuckDB's
// read_parquet and checks its typed columns row by row against the values
// produced, and the raw value bytes.
func TestDuckDBReadsTypedColumns(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	s, err := cold.Open(ctx, cold.Config{Warehouse: "file://" + dir, RowGroupBytes: 2 << 10, PageBytes: 512}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	ev := newEvolving(t)
	var cur *schema.Typed
	s.SetTyped(func(_ context.Context, topic string) (*schema.Typed, error) {
		if topic != "orders" {
			return nil, nil
		}
		return cur, nil
	})

	// Segment 0: version 1 only. Segment 1: both versions' values, after
	// version 2 was registered.
	type produced struct {
		rec   record.Record
		value map[string]any // what was produced; nil for an unframed value
	}
	var segs [][]produced
	for seg, versions := range [][]int{{1}, {1, 2}} {
		cur = ev.typed(t, len(versions))
		var ps []produced
		base := int64(seg * 1000)
		for i := range 40 {
			off := base + int64(i)
			v := versions[i%len(versions)]
			p := produced{rec: record.Record{Offset: off, Timestamp: 1_700_000_000_000 + off, Key: fmt.Appendf(nil, "k%d", off)}}
			switch {
			case i%13 == 12:
				p.rec.Value = []byte("not framed")
			case i%17 == 16:
				p.rec.Value = nil // tombstone
			default:
				p.value = ev.value(v, off)
				p.rec.Value = ev.encode(t, v, p.value)
			}
			ps = append(ps, p)
		}
		recs := make([]record.Record, len(ps))
		for i := range ps {
			recs[i] = ps[i].rec
		}
		chunk := 0
		next := func() ([]record.Record, []record.Txn, error) {
			if chunk >= len(recs) {
				return nil, nil, nil
			}
			end := min(chunk+7, len(recs))
			out := recs[chunk:end]
			chunk = end
			return out, nil, nil
		}
		ref := cold.SegmentRef{Topic: "orders", TopicID: topicID, Partition: 0, Segment: int64(seg), BaseOffset: base, LastOffset: base + int64(len(recs)) - 1}
		if _, err := s.Archive(ctx, ref, next); err != nil {
			t.Fatal(err)
		}
		segs = append(segs, ps)
	}

	files, err := s.Files(ctx, "orders")
	if err != nil || len(files) != 2 {
		t.Fatalf("files %v, %v", files, err)
	}
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for i, f := range files {
		path := filepath.FromSlash(strings.TrimPrefix(f.Path, "file://"))
		shape := ev.typed(t, i+1).Shape // the file's columns: the shape when it was written
		// The timestamp column is an instant: TIMESTAMP WITH TIME ZONE.
		var typ string
		if err := db.QueryRowContext(ctx, `SELECT typeof(value_fields.placed) FROM read_parquet(?) LIMIT 1`, path).Scan(&typ); err != nil {
			t.Fatal(err)
		}
		if typ != "TIMESTAMP WITH TIME ZONE" {
			t.Errorf("placed is %s", typ)
		}
		rows, err := db.QueryContext(ctx, `SELECT "offset", value, value_fields FROM read_parquet(?) ORDER BY "offset"`, path)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for rows.Next() {
			var off int64
			var value []byte
			var fields any
			if err := rows.Scan(&off, &value, &fields); err != nil {
				t.Fatal(err)
			}
			if n >= len(segs[i]) {
				t.Fatalf("file %d: more rows than records", i)
			}
			p := segs[i][n]
			n++
			if off != p.rec.Offset || !bytes.Equal(value, p.rec.Value) || (value == nil) != (p.rec.Value == nil) {
				t.Errorf("offset %d: value %q, want offset %d value %q", off, value, p.rec.Offset, p.rec.Value)
			}
			got := fromDuckDB(t, fields, shape)
			var want any // null typed columns for a value not framed
			if p.value != nil {
				want = expected(p.value, shape)
			}
			if !reflect.DeepEqual(got, want) {
				gj, _ := json.Marshal(got)
				wj, _ := json.Marshal(want)
				t.Errorf("offset %d: value_fields\n got %s\nwant %s", off, gj, wj)
			}
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		rows.Close()
		if n != len(segs[i]) {
			t.Errorf("file %d: %d rows, want %d", i, n, len(segs[i]))
		}
	}
}

// expected lays out a produced value as the typed columns of shape hold
// it: every field of the shape present (nil when absent), ints widened
// where the shape widened them, timestamps as microseconds, dates as days.
func expected(v any, f *schema.Field) any {
	if v == nil {
		return nil
	}
	switch f.Kind {
	case schema.KindStruct:
		m := v.(map[string]any)
		out := map[string]any{}
		for _, c := range f.Fields {
			out[c.Name] = expected(m[c.Name], c)
		}
		return out
	case schema.KindList:
		out := []any{}
		for _, e := range v.([]any) {
			out = append(out, expected(e, f.Elem))
		}
		return out
	case schema.KindMap:
		out := map[string]any{}
		for k, e := range v.(map[string]any) {
			out[k] = expected(e, f.Elem)
		}
		return out
	case schema.KindInt64:
		switch i := v.(type) {
		case int32:
			return int64(i)
		case int:
			return int64(i)
		}
	case schema.KindInt32:
		if i, ok := v.(int); ok {
			return int32(i)
		}
	case schema.KindTimestamp:
		if t, ok := v.(time.Time); ok {
			return t.UnixMicro()
		}
	case schema.KindDate:
		if t, ok := v.(time.Time); ok {
			return int32(t.Unix() / 86400)
		}
	}
	return v
}

// fromDuckDB converts what database/sql scanned from DuckDB to the layout
// of expected.
func fromDuckDB(t *testing.T, v any, f *schema.Field) any {
	t.Helper()
	if v == nil {
		return nil
	}
	switch f.Kind {
	case schema.KindStruct:
		m, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("%s: struct scanned as %T", f.Name, v)
		}
		out := map[string]any{}
		for _, c := range f.Fields {
			out[c.Name] = fromDuckDB(t, m[c.Name], c)
		}
		return out
	case schema.KindList:
		xs, ok := v.([]any)
		if !ok {
			t.Fatalf("%s: list scanned as %T", f.Name, v)
		}
		out := []any{}
		for _, e := range xs {
			out = append(out, fromDuckDB(t, e, f.Elem))
		}
		return out
	case schema.KindMap:
		m, ok := v.(duckdb.OrderedMap)
		if !ok {
			t.Fatalf("%s: map scanned as %T", f.Name, v)
		}
		out := map[string]any{}
		vals := m.Values()
		for i, k := range m.Keys() {
			out[k.(string)] = fromDuckDB(t, vals[i], f.Elem)
		}
		return out
	case schema.KindTimestamp:
		return v.(time.Time).UnixMicro()
	case schema.KindDate:
		return int32(v.(time.Time).Unix() / 86400)
	}
	return v
}
