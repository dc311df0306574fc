package cold

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	"github.com/korvet/korvet/engine/record"
)

// scanCount counts a table's rows through iceberg-go's own reader.
func scanCount(t *testing.T, s *Store, topic string) int {
	t.Helper()
	tbl, err := tableIO(s).LoadTable(ctxT(t), s.ident(topic))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, rec := range scanAll(t, tbl, nil) {
		n += int(rec.NumRows())
	}
	return n
}

// column is rec's column name; the test fails when rec has no such
// column, or more than one.
func column(t *testing.T, rec arrow.RecordBatch, name string) arrow.Array {
	t.Helper()
	idx := rec.Schema().FieldIndices(name)
	if len(idx) != 1 {
		t.Fatalf("no column %s in %v", name, rec.Schema())
	}
	return rec.Column(idx[0])
}

func scanAll(t *testing.T, tbl *table.Table, filter iceberg.BooleanExpression) []arrow.RecordBatch {
	t.Helper()
	var opts []table.ScanOption
	if filter != nil {
		opts = append(opts, table.WithRowFilter(filter))
	}
	_, it, err := tbl.Scan(opts...).ToArrowRecords(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	var out []arrow.RecordBatch
	for rec, err := range it {
		if err != nil {
			t.Fatal(err)
		}
		rec.Retain()
		out = append(out, rec)
	}
	return out
}

// TestIcebergReadsTable reads the table back with iceberg-go's own scan
// (its Parquet reader, its manifest reader), as another engine would.
func TestIcebergReadsTable(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		cfg := b.cfg
		cfg.PageBytes = 1 << 10 // column chunks of several pages
		s := openStore(t, cfg)
		ctx := ctxT(t)
		want := map[int32][]record.Record{0: makeRecords(0, 300), 1: makeRecords(40, 25)}
		for p, recs := range want {
			if _, err := s.Archive(ctx, ref("scan", p, 0, recs[0].Offset, len(recs)), chunked(recs, 100)); err != nil {
				t.Fatal(err)
			}
		}
		tbl, err := tableIO(s).LoadTable(ctx, s.ident("scan"))
		if err != nil {
			t.Fatal(err)
		}
		if tbl.Metadata().Version() != 2 {
			t.Fatalf("format version %d", tbl.Metadata().Version())
		}
		tasks, err := tbl.Scan().PlanFiles(ctx)
		if err != nil || len(tasks) != 2 {
			t.Fatalf("planned %d files, %v", len(tasks), err)
		}
		// Partition pruning: one file for partition 1.
		tasks, err = tbl.Scan(table.WithRowFilter(iceberg.EqualTo(iceberg.Reference("partition"), int32(1)))).PlanFiles(ctx)
		if err != nil || len(tasks) != 1 {
			t.Fatalf("planned %d files for partition 1, %v", len(tasks), err)
		}
		// Offset statistics prune too.
		tasks, err = tbl.Scan(table.WithRowFilter(iceberg.GreaterThan(iceberg.Reference("offset"), int64(100)))).PlanFiles(ctx)
		if err != nil || len(tasks) != 1 {
			t.Fatalf("planned %d files for offset > 100, %v", len(tasks), err)
		}

		got := map[int32][]record.Record{}
		for _, rec := range scanAll(t, tbl, nil) {
			col := func(name string) arrow.Array { return column(t, rec, name) }
			parts := col("partition").(*array.Int32)
			offs := col("offset").(*array.Int64)
			tss := col("timestamp").(*array.Int64)
			keys := col("key").(*array.Binary)
			vals := col("value").(*array.Binary)
			hdrs := col("headers").(*array.List)
			hstruct := hdrs.ListValues().(*array.Struct)
			hk := hstruct.Field(0).(*array.String)
			hv := hstruct.Field(1).(*array.Binary)
			for i := 0; i < int(rec.NumRows()); i++ {
				r := record.Record{Offset: offs.Value(i), Timestamp: tss.Value(i)}
				if !keys.IsNull(i) {
					r.Key = append([]byte{}, keys.Value(i)...)
				}
				if !vals.IsNull(i) {
					r.Value = append([]byte{}, vals.Value(i)...)
				}
				start, end := hdrs.ValueOffsets(i)
				for j := int(start); j < int(end); j++ {
					h := record.Header{Key: []byte(hk.Value(j))}
					if !hv.IsNull(j) {
						h.Value = append([]byte{}, hv.Value(j)...)
					}
					r.Headers = append(r.Headers, h)
				}
				got[parts.Value(i)] = append(got[parts.Value(i)], r)
			}
			rec.Release()
		}
		for p, recs := range want {
			g := got[p]
			slices.SortFunc(g, func(a, b record.Record) int { return int(a.Offset - b.Offset) })
			equalRecords(t, g, recs)
		}
	})
}

// TestHadoopLayout checks the files another engine looks for, and loads
// the table through iceberg-go's own local file IO rather than korvet's.
func TestHadoopLayout(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, Config{Warehouse: "file://" + dir})
	ctx := ctxT(t)
	for seg := int64(0); seg < 3; seg++ {
		if _, err := s.Archive(ctx, ref("layout", 2, seg, seg*10, 10), chunked(makeRecords(seg*10, 10), 10)); err != nil {
			t.Fatal(err)
		}
	}
	tdir := filepath.Join(dir, "korvet", "layout")
	hint, err := os.ReadFile(filepath.Join(tdir, "metadata", "version-hint.text"))
	if err != nil {
		t.Fatal(err)
	}
	meta := filepath.Join(tdir, "metadata", "v"+strings.TrimSpace(string(hint))+".metadata.json")
	if _, err := os.Stat(meta); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(tdir, "data", "partition=2", fmt.Sprintf("%020d-%x.parquet", 1, topicID))); err != nil {
		t.Fatal(err)
	}
	tbl, err := table.NewFromLocation(ctx, table.Identifier{"korvet", "layout"}, meta,
		func(context.Context) (iceio.IO, error) { return iceio.LocalFS{}, nil }, nil)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, rec := range scanAll(t, tbl, nil) {
		n += int(rec.NumRows())
		rec.Release()
	}
	if n != 30 {
		t.Fatalf("scan through iceberg-go's LocalFS: %d rows", n)
	}
	// The table says what it holds.
	props := tbl.Properties()
	if props[topicIDProp] != fmt.Sprintf("%x", topicID) || props["korvet.kafka-topic"] != "layout" {
		t.Fatalf("properties %v", props)
	}
}

func TestRESTHandler(t *testing.T) {
	b := s3Backend(t)
	s := openStore(t, b.cfg)
	ctx := ctxT(t)
	if _, err := s.Archive(ctx, ref("web.events", 0, 0, 0, 10), chunked(makeRecords(0, 10), 10)); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.StripPrefix("/iceberg", s.RESTHandler(func(*http.Request, string) bool { return true })))
	defer srv.Close()
	get := func(method, path string, wantCode int) map[string]any {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+"/iceberg"+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != wantCode {
			t.Fatalf("%s %s: %d %s, want %d", method, path, resp.StatusCode, body, wantCode)
		}
		var out map[string]any
		if len(body) > 0 {
			if err := json.Unmarshal(body, &out); err != nil {
				t.Fatalf("%s %s: %v: %s", method, path, err, body)
			}
		}
		return out
	}
	get("GET", "/v1/config", 200)
	if nss := get("GET", "/v1/namespaces", 200)["namespaces"].([]any); len(nss) != 1 {
		t.Fatalf("namespaces %v", nss)
	}
	get("GET", "/v1/namespaces/korvet", 200)
	get("HEAD", "/v1/namespaces/korvet", 200)
	get("GET", "/v1/namespaces/other", 404)
	ids := get("GET", "/v1/namespaces/korvet/tables", 200)["identifiers"].([]any)
	if len(ids) != 1 || ids[0].(map[string]any)["name"] != "web.events" {
		t.Fatalf("tables %v", ids)
	}
	res := get("GET", "/v1/namespaces/korvet/tables/web.events", 200)
	loc, _ := res["metadata-location"].(string)
	if !strings.HasPrefix(loc, "s3://korvet-test/wh/korvet/web.events/metadata/v") {
		t.Fatalf("metadata-location %q", loc)
	}
	raw, _ := json.Marshal(res["metadata"])
	meta, err := table.ParseMetadataBytes(raw)
	if err != nil {
		t.Fatal(err)
	}
	if meta.CurrentSnapshot() == nil || meta.Properties()[topicIDProp] == "" {
		t.Fatalf("metadata without snapshot or topic id")
	}
	cfg := res["config"].(map[string]any)
	if cfg["s3.endpoint"] != "http://"+b.s3.Endpoint || cfg["s3.path-style-access"] != "true" {
		t.Fatalf("table config %v", cfg)
	}
	if _, ok := cfg["s3.secret-access-key"]; ok {
		t.Fatal("credentials handed out")
	}
	get("HEAD", "/v1/namespaces/korvet/tables/web.events", 204)
	get("GET", "/v1/namespaces/korvet/tables/nope", 404)
	get("GET", "/v1/namespaces/korvet/views", 200)
	get("POST", "/v1/namespaces/korvet/tables/web.events", 405)
	get("DELETE", "/v1/namespaces/korvet/tables/web.events", 405)
	// The metadata location it names is a real object.
	if _, err := s.obj.size(ctx, loc); err != nil {
		t.Fatal(err)
	}
}

// TestRESTCatalog commits through an Iceberg REST catalog: a small test
// server that implements the write endpoints over a Hadoop-style catalog.
func TestRESTCatalog(t *testing.T) {
	dir := t.TempDir()
	wh := "file://" + filepath.Join(dir, "wh")
	backing := &fsCatalog{root: wh, o: &localObjects{n: new(counters)}, log: testLogger(t)}
	srv := httptest.NewServer(&testRESTServer{t: t, cat: backing})
	defer srv.Close()

	cfg := Config{Warehouse: wh, RESTCatalogURL: srv.URL, RESTCatalogToken: "tok"}
	s := openStore(t, cfg)
	ctx := ctxT(t)
	recs := makeRecords(0, 200)
	df, err := s.Archive(ctx, ref("rest", 0, 0, 0, 200), chunked(recs, 50))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Archive(ctx, ref("rest", 0, 1, 200, 10), chunked(makeRecords(200, 10), 50)); err != nil {
		t.Fatal(err)
	}
	// The same archive again is a no-op, on a fresh store too.
	s2 := openStore(t, cfg)
	if df2, err := s2.Archive(ctx, ref("rest", 0, 0, 0, 200), chunked(recs, 50)); err != nil || df2 != df {
		t.Fatalf("re-archive: %+v, %v", df2, err)
	}
	files, err := s2.Files(ctx, "rest")
	if err != nil || len(files) != 2 {
		t.Fatalf("files %+v, %v", files, err)
	}
	got, _, err := s2.Read(ctx, files[0], 0, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	equalRecords(t, got, recs)
	if n := scanCount(t, s2, "rest"); n != 210 {
		t.Fatalf("scan: %d", n)
	}
	if err := s2.Remove(ctx, "rest", files[:1]); err != nil {
		t.Fatal(err)
	}
	if n := scanCount(t, s2, "rest"); n != 10 {
		t.Fatalf("scan after remove: %d", n)
	}
	// The backing catalog holds what the REST server committed.
	tbl, err := fsCat(backing).LoadTable(ctx, table.Identifier{"korvet", "rest"})
	if err != nil {
		t.Fatal(err)
	}
	if tbl.CurrentSnapshot() == nil {
		t.Fatal("no snapshot in the backing catalog")
	}
	if err := s2.Drop(ctx, "rest"); err != nil {
		t.Fatal(err)
	}
	if files, err := s2.Files(ctx, "rest"); err != nil || len(files) != 0 {
		t.Fatalf("files after drop: %+v, %v", files, err)
	}
}

type testTableResult struct {
	MetadataLocation string         `json:"metadata-location"`
	Metadata         table.Metadata `json:"metadata"`
}

// testRESTServer is the write side of an Iceberg REST catalog, enough for
// korvet's client: namespaces, create, load, commit, drop.
type testRESTServer struct {
	t   *testing.T
	cat *fsCatalog
	mu  sync.Mutex
}

func (h *testRESTServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if r.Header.Get("Authorization") != "Bearer tok" {
		restError(w, 401, "NotAuthorizedException", "no token")
		return
	}
	ctx := r.Context()
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/v1/"), "/")
	body, _ := io.ReadAll(r.Body)
	fail := func(err error) {
		code := 500
		switch {
		case errors.Is(err, errNoTable):
			code = 404
		case errors.Is(err, table.ErrCommitFailed):
			code = 409
		}
		restError(w, code, "Error", err.Error())
	}
	switch {
	case len(parts) == 1 && parts[0] == "config":
		writeJSON(w, map[string]any{"defaults": map[string]string{}, "overrides": map[string]string{}})
	case len(parts) == 1 && parts[0] == "namespaces" && r.Method == "POST":
		writeJSON(w, map[string]any{"namespace": []string{"korvet"}})
	case len(parts) == 3 && parts[2] == "tables" && r.Method == "POST":
		var req struct {
			Name       string                `json:"name"`
			Location   string                `json:"location"`
			Schema     *iceberg.Schema       `json:"schema"`
			Spec       iceberg.PartitionSpec `json:"partition-spec"`
			Properties iceberg.Properties    `json:"properties"`
		}
		if err := json.Unmarshal(body, &req); err != nil {
			fail(err)
			return
		}
		ident := table.Identifier{parts[1], req.Name}
		if _, _, err := h.cat.loadTable(ctx, ident); err == nil {
			restError(w, 409, "AlreadyExistsException", "exists")
			return
		}
		meta, err := table.NewMetadata(req.Schema, &req.Spec, table.UnsortedSortOrder, req.Location, req.Properties)
		if err != nil {
			fail(err)
			return
		}
		b, err := json.Marshal(meta)
		if err == nil {
			err = h.cat.writeVersionBytes(ctx, ident, 1, b)
		}
		if err != nil {
			fail(err)
			return
		}
		writeJSON(w, testTableResult{MetadataLocation: h.cat.versionPath(ident, 1), Metadata: meta})
	case len(parts) == 4 && parts[2] == "tables":
		ident := table.Identifier{parts[1], parts[3]}
		switch r.Method {
		case "GET":
			tbl, err := fsCat(h.cat).LoadTable(ctx, ident)
			if err != nil {
				fail(err)
				return
			}
			writeJSON(w, testTableResult{MetadataLocation: tbl.MetadataLocation(), Metadata: tbl.Metadata()})
		case "POST":
			var req struct {
				Requirements table.Requirements `json:"requirements"`
				Updates      table.Updates      `json:"updates"`
			}
			if err := json.NewDecoder(bytes.NewReader(body)).Decode(&req); err != nil {
				fail(err)
				return
			}
			// iceberg-go's own parser and metadata builder take korvet's
			// requirements and updates.
			meta, loc, err := fsCat(h.cat).CommitTable(ctx, ident, req.Requirements, req.Updates)
			if err != nil {
				fail(err)
				return
			}
			writeJSON(w, testTableResult{MetadataLocation: loc, Metadata: meta})
		case "DELETE":
			files, _ := h.cat.o.list(ctx, h.cat.metadataDir(ident))
			for _, f := range files {
				if versionFile.MatchString(f) || strings.HasSuffix(f, "version-hint.text") {
					h.cat.o.remove(ctx, f)
				}
			}
			w.WriteHeader(204)
		}
	default:
		restError(w, 404, "NotFound", r.Method+" "+r.URL.Path)
	}
}
