package cold

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/korvet/korvet/cold/iceberg"
	"github.com/korvet/korvet/cold/icemeta"

	"github.com/korvet/korvet/engine/schema"
)

// errNoTable: the catalog has no such table.
var errNoTable = errors.New("no such table")

// errCommitFailed: a commit lost a race with another writer; reload the
// table and try again.
var errCommitFailed = errors.New("table commit conflict")

// tableIdent names a table: namespace levels, then the table name.
type tableIdent = []string

// catalog is where a topic table's metadata is committed.
type catalog interface {
	kind() string
	createNamespace(ctx context.Context, ns string) error
	// loadTable returns the table's current metadata and where it is.
	loadTable(ctx context.Context, ident tableIdent) (*icemeta.Metadata, string, error)
	// commitTable applies updates to the table if it meets reqs
	// (errCommitFailed if not) and returns the new metadata.
	commitTable(ctx context.Context, ident tableIdent, reqs []icemeta.Requirement, updates []icemeta.Update) (*icemeta.Metadata, string, error)
	// createTable makes a table from fresh metadata (field ids as given);
	// if the table appeared meanwhile it returns that one.
	createTable(ctx context.Context, ident tableIdent, meta *icemeta.Metadata) (*icemeta.Metadata, string, error)
	listTables(ctx context.Context, ns string) ([]string, error)
	dropTable(ctx context.Context, ident tableIdent) error
	tableLocation(ident tableIdent) string
}

// fsCatalog is a Hadoop-style catalog in the warehouse itself:
// {table}/metadata/v{n}.metadata.json plus version-hint.text, which is what
// Spark's HadoopCatalog, PyIceberg, DuckDB's iceberg_scan and Trino read.
// A commit writes v{n+1} only if it does not exist yet, so two writers can
// never both win (a Hadoop catalog's rename is not atomic on S3).
type fsCatalog struct {
	root string
	o    objects
	log  *slog.Logger
}

func (c *fsCatalog) kind() string { return "hadoop" }

func (c *fsCatalog) tableLocation(ident tableIdent) string {
	return joinURI(c.root, ident...)
}

func (c *fsCatalog) metadataDir(ident tableIdent) string {
	return joinURI(c.tableLocation(ident), "metadata")
}

func (c *fsCatalog) versionPath(ident tableIdent, v int) string {
	return joinURI(c.metadataDir(ident), "v"+strconv.Itoa(v)+".metadata.json")
}

func (c *fsCatalog) hintPath(ident tableIdent) string {
	return joinURI(c.metadataDir(ident), "version-hint.text")
}

// createNamespace has nothing to create: a namespace is a directory.
func (c *fsCatalog) createNamespace(context.Context, string) error { return nil }

var versionFile = regexp.MustCompile(`/v([0-9]+)\.metadata\.json$`)

// current finds the newest metadata version: the hint, then any versions
// written after it (a crash between a commit and its hint update).
func (c *fsCatalog) current(ctx context.Context, ident tableIdent) (int, error) {
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

func (c *fsCatalog) load(ctx context.Context, ident tableIdent) (*icemeta.Metadata, string, int, error) {
	v, err := c.current(ctx, ident)
	if err != nil {
		return nil, "", 0, err
	}
	loc := c.versionPath(ident, v)
	b, err := c.o.get(ctx, loc)
	if err != nil {
		return nil, "", 0, fmt.Errorf("read table metadata: %w", err)
	}
	meta, err := icemeta.Parse(b)
	if err != nil {
		return nil, "", 0, fmt.Errorf("parse %s: %w", loc, err)
	}
	return meta, loc, v, nil
}

func (c *fsCatalog) loadTable(ctx context.Context, ident tableIdent) (*icemeta.Metadata, string, error) {
	meta, loc, _, err := c.load(ctx, ident)
	return meta, loc, err
}

// commitTable checks the requirements against the newest metadata,
// applies the updates and writes the next version if nobody else did.
// Metadata files that fall off the metadata log are deleted when the
// table says so (write.metadata.delete-after-commit.enabled).
func (c *fsCatalog) commitTable(ctx context.Context, ident tableIdent, reqs []icemeta.Requirement, updates []icemeta.Update) (*icemeta.Metadata, string, error) {
	base, baseLoc, v, err := c.load(ctx, ident)
	if err != nil {
		return nil, "", err
	}
	if err := icemeta.Check(base, reqs); err != nil {
		return nil, "", fmt.Errorf("%w: %w", errCommitFailed, err)
	}
	meta, err := icemeta.Apply(base, updates, time.Now().UnixMilli())
	if err != nil {
		return nil, "", fmt.Errorf("apply table updates: %w", err)
	}
	dropped := icemeta.LogPrevious(meta, baseLoc, base.LastUpdatedMs)
	if err := c.writeVersion(ctx, ident, v+1, meta); err != nil {
		return nil, "", err
	}
	for _, f := range dropped {
		// Only space is lost if this fails (or another writer did it).
		if err := c.o.remove(ctx, f); err != nil {
			c.log.Warn("cold: old table metadata not deleted", "file", f, "err", err)
		}
	}
	return meta, c.versionPath(ident, v+1), nil
}

func (c *fsCatalog) writeVersion(ctx context.Context, ident tableIdent, v int, meta *icemeta.Metadata) error {
	b, err := json.Marshal(meta)
	if err != nil {
		return fmt.Errorf("encode table metadata: %w", err)
	}
	return c.writeVersionBytes(ctx, ident, v, b)
}

func (c *fsCatalog) writeVersionBytes(ctx context.Context, ident tableIdent, v int, b []byte) error {
	loc := c.versionPath(ident, v)
	if err := c.o.putIfAbsent(ctx, loc, b); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%w: %s was written by another commit", errCommitFailed, loc)
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

func (c *fsCatalog) createTable(ctx context.Context, ident tableIdent, meta *icemeta.Metadata) (*icemeta.Metadata, string, error) {
	if err := c.writeVersion(ctx, ident, 1, meta); err != nil {
		if errors.Is(err, errCommitFailed) {
			return c.loadTable(ctx, ident)
		}
		return nil, "", err
	}
	return meta, c.versionPath(ident, 1), nil
}

func (c *fsCatalog) listTables(ctx context.Context, ns string) ([]string, error) {
	names, err := c.o.dirs(ctx, joinURI(c.root, ns))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, n := range names {
		if _, err := c.current(ctx, tableIdent{ns, n}); err == nil {
			out = append(out, n)
		}
	}
	return out, nil
}

// dropTable deletes the version hint and metadata first, so the table is
// gone for readers before its data goes.
func (c *fsCatalog) dropTable(ctx context.Context, ident tableIdent) error {
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
func newTableMetadata(location string, props map[string]string) (*icemeta.Metadata, error) {
	sc := tableSchema()
	spec := iceberg.PartitionSpec{Fields: []iceberg.PartitionField{{
		SourceID: idPartition, FieldID: 1000, Name: "partition", Transform: "identity",
	}}}
	all := map[string]string{
		"write.parquet.compression-codec": "zstd",
		"commit.manifest-merge.enabled":   "true",
		icemeta.PropDeleteAfterCommit:     "true",
		icemeta.PropPreviousVersions:      "20",
	}
	maps.Copy(all, props)
	meta, err := icemeta.New(location, sc, spec, all, time.Now().UnixMilli())
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

// evolveSchema adds the transaction columns to the table when it lacks
// them, so the commit that adds the first file with those columns also
// adds them to the schema. Iceberg gives added columns the ids after the
// table's last column id, so they get the ids the files carry only if
// nothing else was ever added to the table; otherwise it fails rather than
// publish files whose columns the table would misname.
//
// With typed, it also makes value_fields hold typed's shape (typedChanges)
// in the same new schema, and returns value_fields as the table then has
// it, with the ids the file must carry. It returns the schema the commit
// makes current and the updates that make it so (none without changes).
func (s *Store) evolveSchema(meta *icemeta.Metadata, typed *schema.Typed) (*iceberg.Schema, []icemeta.Update, iceberg.NestedField, error) {
	cur := meta.CurrentSchema()
	var changes []icemeta.Change
	if _, ok := cur.FindFieldByName(txnFields()[0].Name); !ok && s.cols.hasTxn() {
		// (checkSchema has seen all of them, with our ids, when the first
		// is there; a Store without them writes the old layout: tests.)
		if last := meta.LastColumnID; last != idHeaderValue {
			return nil, nil, iceberg.NestedField{}, fmt.Errorf("cold: table's last column id is %d, want %d to add the transaction columns", last, idHeaderValue)
		}
		for _, f := range txnFields() {
			changes = append(changes, icemeta.Change{Path: []string{f.Name}, Add: f.Type, Doc: f.Doc})
		}
	}
	if typed != nil {
		var have iceberg.Type
		if f, ok := cur.FindFieldByName(valueFieldsName); ok {
			have = f.Type
		}
		tc, err := typedChanges(have, typed.Shape)
		if err != nil {
			return nil, nil, iceberg.NestedField{}, err
		}
		for _, c := range tc {
			changes = append(changes, icemeta.Change{Path: c.path, Add: c.add, To: c.to, Doc: c.doc})
		}
	}
	sc, ups := cur, []icemeta.Update(nil)
	if len(changes) > 0 {
		var err error
		if sc, ups, err = icemeta.Evolve(meta, changes); err != nil {
			return nil, nil, iceberg.NestedField{}, fmt.Errorf("evolve the table schema: %w", err)
		}
	}
	if typed == nil {
		return sc, ups, iceberg.NestedField{}, nil
	}
	f, ok := sc.FindFieldByName(valueFieldsName)
	if !ok {
		return nil, nil, iceberg.NestedField{}, errors.New("typed columns: value_fields missing after the schema update")
	}
	if _, ok := f.Type.(*iceberg.StructType); !ok || f.Required {
		return nil, nil, iceberg.NestedField{}, fmt.Errorf("%w: the table's value_fields is %s", errTypedChange, f.Type)
	}
	return sc, ups, f, nil
}
