package cold

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"regexp"
	"strconv"
	"strings"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/korvet/korvet/engine/schema"
)

// errNoTable: the catalog has no such table.
var errNoTable = errors.New("no such table")

// catalog is where a topic table's metadata is committed. iceberg-go's
// transactions commit through table.CatalogIO; the rest is what the store
// and the REST handler need.
type catalog interface {
	table.CatalogIO
	kind() string
	createNamespace(ctx context.Context, ns string) error
	// createTable makes a table from fresh metadata (field ids as given);
	// if the table appeared meanwhile it returns that one.
	createTable(ctx context.Context, ident table.Identifier, meta table.Metadata) (*table.Table, error)
	listTables(ctx context.Context, ns string) ([]string, error)
	dropTable(ctx context.Context, ident table.Identifier) error
	tableLocation(ident table.Identifier) string
}

// fsCatalog is a Hadoop-style catalog in the warehouse itself:
// {table}/metadata/v{n}.metadata.json plus version-hint.text, which is what
// Spark's HadoopCatalog, PyIceberg, DuckDB's iceberg_scan and Trino read.
// A commit writes v{n+1} only if it does not exist yet, so two writers can
// never both win (iceberg-go's own Hadoop catalog renames, which S3 cannot
// do atomically).
type fsCatalog struct {
	root string
	o    objects
	fsys table.FSysF
	log  *slog.Logger
}

func (c *fsCatalog) kind() string { return "hadoop" }

func (c *fsCatalog) tableLocation(ident table.Identifier) string {
	return joinURI(c.root, ident...)
}

func (c *fsCatalog) metadataDir(ident table.Identifier) string {
	return joinURI(c.tableLocation(ident), "metadata")
}

func (c *fsCatalog) versionPath(ident table.Identifier, v int) string {
	return joinURI(c.metadataDir(ident), "v"+strconv.Itoa(v)+".metadata.json")
}

func (c *fsCatalog) hintPath(ident table.Identifier) string {
	return joinURI(c.metadataDir(ident), "version-hint.text")
}

// createNamespace has nothing to create: a namespace is a directory.
func (c *fsCatalog) createNamespace(context.Context, string) error { return nil }

var versionFile = regexp.MustCompile(`/v([0-9]+)\.metadata\.json$`)

// current finds the newest metadata version: the hint, then any versions
// written after it (a crash between a commit and its hint update).
func (c *fsCatalog) current(ctx context.Context, ident table.Identifier) (int, error) {
	v := 0
	hint, err := c.o.get(ctx, c.hintPath(ident))
	switch {
	case err == nil:
		v, _ = strconv.Atoi(strings.TrimSpace(string(hint)))
	case !errors.Is(err, fs.ErrNotExist):
		return 0, fmt.Errorf("read version hint of %s: %w", strings.Join(ident, "."), err)
	}
	if v <= 0 {
		// No usable hint: list the metadata directory.
		files, err := c.o.list(ctx, c.metadataDir(ident))
		if err != nil {
			return 0, err
		}
		for _, f := range files {
			if m := versionFile.FindStringSubmatch(f); m != nil {
				n, _ := strconv.Atoi(m[1])
				v = max(v, n)
			}
		}
		if v == 0 {
			return 0, fmt.Errorf("%s: %w", strings.Join(ident, "."), errNoTable)
		}
		return v, nil
	}
	for {
		_, err := c.o.size(ctx, c.versionPath(ident, v+1))
		if errors.Is(err, fs.ErrNotExist) {
			return v, nil
		}
		if err != nil {
			return 0, err
		}
		v++
	}
}

func (c *fsCatalog) load(ctx context.Context, ident table.Identifier) (table.Metadata, string, int, error) {
	v, err := c.current(ctx, ident)
	if err != nil {
		return nil, "", 0, err
	}
	loc := c.versionPath(ident, v)
	b, err := c.o.get(ctx, loc)
	if err != nil {
		return nil, "", 0, fmt.Errorf("read table metadata: %w", err)
	}
	meta, err := table.ParseMetadataBytes(b)
	if err != nil {
		return nil, "", 0, fmt.Errorf("parse %s: %w", loc, err)
	}
	return meta, loc, v, nil
}

// LoadTable implements table.CatalogIO.
func (c *fsCatalog) LoadTable(ctx context.Context, ident table.Identifier) (*table.Table, error) {
	meta, loc, _, err := c.load(ctx, ident)
	if err != nil {
		return nil, err
	}
	return table.New(ident, meta, loc, c.fsys, c), nil
}

// CommitTable implements table.CatalogIO: it checks the requirements
// against the newest metadata, applies the updates and writes the next
// version if nobody else did.
func (c *fsCatalog) CommitTable(ctx context.Context, ident table.Identifier, reqs []table.Requirement, updates []table.Update) (table.Metadata, string, error) {
	base, baseLoc, v, err := c.load(ctx, ident)
	if err != nil {
		return nil, "", err
	}
	for _, r := range reqs {
		if err := r.Validate(base); err != nil {
			return nil, "", fmt.Errorf("%w: %w", table.ErrCommitFailed, err)
		}
	}
	meta, err := table.UpdateTableMetadata(base, updates, baseLoc)
	if err != nil {
		return nil, "", fmt.Errorf("apply table updates: %w", err)
	}
	loc := c.versionPath(ident, v+1)
	if err := c.writeVersion(ctx, ident, v+1, meta); err != nil {
		return nil, "", err
	}
	return meta, loc, nil
}

func (c *fsCatalog) writeVersion(ctx context.Context, ident table.Identifier, v int, meta table.Metadata) error {
	b, err := json.Marshal(meta)
	if err != nil {
		return fmt.Errorf("encode table metadata: %w", err)
	}
	loc := c.versionPath(ident, v)
	if err := c.o.putIfAbsent(ctx, loc, b); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%w: %s was written by another commit", table.ErrCommitFailed, loc)
		}
		return fmt.Errorf("commit %s: %w", loc, err)
	}
	// The hint only speeds up loading (current probes past it), so a
	// failure here loses nothing.
	if err := c.o.put(ctx, c.hintPath(ident), []byte(strconv.Itoa(v))); err != nil {
		c.log.Warn("cold: version hint not updated", "table", strings.Join(ident, "."), "version", v, "err", err)
	}
	return nil
}

func (c *fsCatalog) createTable(ctx context.Context, ident table.Identifier, meta table.Metadata) (*table.Table, error) {
	if err := c.writeVersion(ctx, ident, 1, meta); err != nil {
		if errors.Is(err, table.ErrCommitFailed) {
			return c.LoadTable(ctx, ident)
		}
		return nil, err
	}
	return table.New(ident, meta, c.versionPath(ident, 1), c.fsys, c), nil
}

func (c *fsCatalog) listTables(ctx context.Context, ns string) ([]string, error) {
	names, err := c.o.dirs(ctx, joinURI(c.root, ns))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, n := range names {
		if _, err := c.current(ctx, table.Identifier{ns, n}); err == nil {
			out = append(out, n)
		}
	}
	return out, nil
}

// dropTable deletes the version hint and metadata first, so the table is
// gone for readers before its data goes.
func (c *fsCatalog) dropTable(ctx context.Context, ident table.Identifier) error {
	files, err := c.o.list(ctx, c.tableLocation(ident))
	if err != nil {
		return err
	}
	if err := c.o.remove(ctx, c.hintPath(ident)); err != nil {
		return err
	}
	// Newest metadata first: a crash midway never leaves an older
	// version looking current.
	var meta, rest []string
	for _, f := range files {
		if versionFile.MatchString(f) {
			meta = append(meta, f)
		} else {
			rest = append(rest, f)
		}
	}
	for i := len(meta) - 1; i >= 0; i-- {
		if err := c.o.remove(ctx, meta[i]); err != nil {
			return err
		}
	}
	for _, f := range rest {
		if err := c.o.remove(ctx, f); err != nil {
			return err
		}
	}
	return nil
}

// newTableMetadata is a fresh v2 table for a topic, partitioned by Kafka
// partition.
func newTableMetadata(location string, props iceberg.Properties) (table.Metadata, error) {
	sc := tableSchema()
	spec := iceberg.NewPartitionSpec(iceberg.PartitionField{
		SourceIDs: []int{idPartition}, FieldID: 1000, Name: "partition", Transform: iceberg.IdentityTransform{},
	})
	all := iceberg.Properties{
		table.PropertyFormatVersion:               "2",
		table.ParquetCompressionKey:               "zstd",
		table.ManifestMergeEnabledKey:             "true",
		table.MetadataDeleteAfterCommitEnabledKey: "true",
		table.MetadataPreviousVersionsMaxKey:      "20",
	}
	for k, v := range props {
		all[k] = v
	}
	meta, err := table.NewMetadata(sc, &spec, table.UnsortedSortOrder, location, all)
	if err != nil {
		return nil, fmt.Errorf("new table metadata: %w", err)
	}
	if err := checkSchema(meta.CurrentSchema()); err != nil {
		return nil, err
	}
	return meta, nil
}

// checkSchema verifies that a table's field ids are the ones the Parquet
// files carry. The transaction columns may be missing (a table from before
// them, or one just created): the next archive adds them.
func checkSchema(sc *iceberg.Schema) error {
	want := map[string]int{
		"partition": idPartition, "offset": idOffset, "timestamp": idTimestamp,
		"key": idKey, "value": idValue, "headers": idHeaders,
		"headers.element": idHeader, "headers.element.key": idHeaderKey, "headers.element.value": idHeaderValue,
	}
	for name, id := range want {
		f, ok := sc.FindFieldByName(name)
		if !ok || f.ID != id {
			return fmt.Errorf("cold: table schema has %s with field id %d, want %d", name, f.ID, id)
		}
	}
	have := 0
	for _, tf := range txnFields() {
		f, ok := sc.FindFieldByName(tf.Name)
		if !ok {
			continue
		}
		have++
		if f.ID != tf.ID || !f.Type.Equals(tf.Type) || f.Required {
			return fmt.Errorf("cold: table schema has %s as field id %d, %s, want optional %s with id %d", tf.Name, f.ID, f.Type, tf.Type, tf.ID)
		}
	}
	if have != 0 && have != len(txnFields()) {
		return fmt.Errorf("cold: table schema has %d of the %d transaction columns", have, len(txnFields()))
	}
	return nil
}

// evolveSchema adds the transaction columns to the table in txn when it
// lacks them, so the commit that adds the first file with those columns
// also adds them to the schema. Iceberg gives added columns the ids after
// the table's last column id, so they get the ids the files carry only if
// nothing else was ever added to the table; otherwise it fails rather than
// publish files whose columns the table would misname.
//
// With typed, it also makes value_fields hold typed's shape (typedChanges),
// in the same schema update (a transaction takes one), and returns
// value_fields as the table then has it, with the ids the file must carry.
func (s *Store) evolveSchema(txn *table.Transaction, tbl *table.Table, typed *schema.Typed) (iceberg.NestedField, error) {
	var adds []iceberg.NestedField
	if _, ok := tbl.Schema().FindFieldByName(txnFields()[0].Name); !ok && s.cols.hasTxn() {
		// (checkSchema has seen all of them, with our ids, when the first
		// is there; a Store without them writes the old layout: tests.)
		if last := tbl.Metadata().LastColumnID(); last != idHeaderValue {
			return iceberg.NestedField{}, fmt.Errorf("cold: table's last column id is %d, want %d to add the transaction columns", last, idHeaderValue)
		}
		adds = txnFields()
	}
	var changes []schemaChange
	if typed != nil {
		var have iceberg.Type
		if f, ok := tbl.Schema().FindFieldByName(valueFieldsName); ok {
			have = f.Type
		}
		var err error
		if changes, err = typedChanges(have, typed.Shape); err != nil {
			return iceberg.NestedField{}, err
		}
	}
	if len(adds) > 0 || len(changes) > 0 {
		var opts []table.UpdateSchemaOption
		if nm := tbl.Metadata().NameMapping(); nm != nil {
			// Keep the name mapping readers use for files without field
			// ids in step with the schema.
			opts = append(opts, table.WithNameMapping(nm))
		}
		u := txn.UpdateSchema(true, false, opts...)
		for _, f := range adds {
			u.AddColumn([]string{f.Name}, f.Type, f.Doc, false, nil)
		}
		for _, c := range changes {
			if c.add != nil {
				u.AddColumn(c.path, c.add, c.doc, false, nil)
			} else {
				u.UpdateColumn(c.path, table.ColumnUpdate{FieldType: iceberg.Optional[iceberg.Type]{Val: c.to, Valid: true}})
			}
		}
		if err := u.Commit(); err != nil {
			return iceberg.NestedField{}, fmt.Errorf("evolve the table schema: %w", err)
		}
	}
	if typed == nil {
		return iceberg.NestedField{}, nil
	}
	staged, err := txn.StagedTable()
	if err != nil {
		return iceberg.NestedField{}, fmt.Errorf("typed columns: %w", err)
	}
	f, ok := staged.Schema().FindFieldByName(valueFieldsName)
	if !ok {
		return iceberg.NestedField{}, errors.New("typed columns: value_fields missing after the schema update")
	}
	if _, ok := f.Type.(*iceberg.StructType); !ok || f.Required {
		return iceberg.NestedField{}, fmt.Errorf("%w: the table's value_fields is %s", errTypedChange, f.Type)
	}
	return f, nil
}
