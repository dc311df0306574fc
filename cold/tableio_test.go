package cold

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	ig "github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	"github.com/korvet/korvet/cold/iceberg"
)

// viaJSON converts between cold/iceberg's and iceberg-go's forms of the
// same spec object (schemas, specs) through their JSON.
func viaJSON[T any](t testing.TB, v any) T {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out T
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("read %s: %v", b, err)
	}
	return out
}

// schemaOf is tbl's current schema as cold/iceberg has it.
func schemaOf(t testing.TB, tbl *table.Table) *iceberg.Schema {
	t.Helper()
	sc := viaJSON[iceberg.Schema](t, tbl.Schema())
	return &sc
}

// igSchema is sc as iceberg-go has it.
func igSchema(t testing.TB, sc *iceberg.Schema) *ig.Schema {
	t.Helper()
	out := viaJSON[ig.Schema](t, sc)
	return &out
}

// igType is typ as iceberg-go has it.
func igType(t testing.TB, typ iceberg.Type) ig.Type {
	t.Helper()
	return igSchema(t, iceberg.NewSchema(0, iceberg.NestedField{ID: 1, Name: "x", Type: typ})).Field(0).Type
}

// igDataFile is df as iceberg-go has it, for its transactions.
func igDataFile(t testing.TB, spec ig.PartitionSpec, df *iceberg.DataFile) ig.DataFile {
	t.Helper()
	part := map[int]any{}
	for _, f := range spec.Fields() {
		part[f.FieldID] = df.Partition[f.Name]
	}
	b, err := ig.NewDataFileBuilder(spec, ig.EntryContentData, df.FilePath, ig.ParquetFile, part, nil, nil, df.RecordCount, df.FileSizeInBytes)
	if err != nil {
		t.Fatal(err)
	}
	longs := func(es []iceberg.IntLong) map[int]int64 {
		out := map[int]int64{}
		for _, e := range es {
			out[int(e.Key)] = e.Value
		}
		return out
	}
	bounds := func(es []iceberg.IntBytes) map[int][]byte {
		out := map[int][]byte{}
		for _, e := range es {
			out[int(e.Key)] = e.Value
		}
		return out
	}
	b.ValueCounts(longs(df.ValueCounts)).NullValueCounts(longs(df.NullValueCounts)).
		LowerBoundValues(bounds(df.LowerBounds)).UpperBoundValues(bounds(df.UpperBounds))
	return b.Build()
}

// testCat serves a Store's tables to iceberg-go's table package, so tests
// read and scan them with iceberg-go (the proof they are valid Iceberg)
// and, over a Hadoop-style catalog, commit with it as korvet did before
// it wrote its own metadata.
type testCat struct {
	c    catalog
	fsys table.FSysF
}

// fsys is iceberg-go's IO over s.obj, bound to the context of the
// operation that asks for it.
func (s *Store) fsys(ctx context.Context) (iceio.IO, error) {
	return icebergFS{ctx: ctx, o: s.obj}, nil
}

func tableIO(s *Store) testCat { return testCat{c: s.cat, fsys: s.fsys} }

func fsCat(c *fsCatalog) testCat {
	return testCat{c: c, fsys: func(ctx context.Context) (iceio.IO, error) { return icebergFS{ctx: ctx, o: c.o}, nil }}
}

func (t testCat) LoadTable(ctx context.Context, ident table.Identifier) (*table.Table, error) {
	meta, loc, err := t.c.loadTable(ctx, tableIdent(ident))
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(meta)
	if err != nil {
		return nil, err
	}
	m, err := table.ParseMetadataBytes(b)
	if err != nil {
		return nil, fmt.Errorf("iceberg-go parses korvet's metadata: %w", err)
	}
	return table.New(ident, m, loc, t.fsys, t), nil
}

func (t testCat) CommitTable(ctx context.Context, ident table.Identifier, reqs []table.Requirement, updates []table.Update) (table.Metadata, string, error) {
	fc, ok := t.c.(*fsCatalog)
	if !ok {
		return nil, "", errors.New("testCat commits to a Hadoop-style catalog only")
	}
	id := tableIdent(ident)
	v, err := fc.current(ctx, id)
	if err != nil {
		return nil, "", err
	}
	loc := fc.versionPath(id, v)
	b, err := fc.o.get(ctx, loc)
	if err != nil {
		return nil, "", err
	}
	base, err := table.ParseMetadataBytes(b)
	if err != nil {
		return nil, "", err
	}
	for _, r := range reqs {
		if err := r.Validate(base); err != nil {
			return nil, "", fmt.Errorf("%w: %w", table.ErrCommitFailed, err)
		}
	}
	meta, err := table.UpdateTableMetadata(base, updates, loc)
	if err != nil {
		return nil, "", err
	}
	nb, err := json.Marshal(meta)
	if err != nil {
		return nil, "", err
	}
	if err := fc.writeVersionBytes(ctx, id, v+1, nb); err != nil {
		if errors.Is(err, errCommitFailed) {
			err = fmt.Errorf("%w: %w", table.ErrCommitFailed, err)
		}
		return nil, "", err
	}
	return meta, fc.versionPath(id, v+1), nil
}

var _ table.CatalogIO = testCat{}
