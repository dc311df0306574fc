package duckdbtest

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/http"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/korvet/korvet/engine/schema"
	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/internal/testbed/kafkaload"
)

// TestRegistryTypedArchive runs the whole path through korvet itself: the
// topic's value schema is registered on korvet's registry listener,
// franz-go produces registry-framed Avro values, version 2 is registered
// midway, and the archiver gives the Parquet files typed columns from the
// registry. DuckDB reads every file's typed columns and they match what
// was produced; the Iceberg REST catalog shows the evolved table schema;
// the KV view answers Accept: application/json with the decoded value.
func TestRegistryTypedArchive(t *testing.T) {
	r := testbed.StartRedis(t)
	k := testbed.StartKorvet(t, testbed.KorvetOptions{RedisURL: r.URL, NodeID: 1, Extra: "cold.archive_interval = \"200ms\"\n"})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	reg, err := sr.NewClient(sr.URLs("http://" + k.RegistryAddr))
	if err != nil {
		t.Fatal(err)
	}
	ev := newEvolving(t)
	adm := kafkaload.Admin(t, []string{k.KafkaAddr})
	kafkaload.CreateTopic(t, adm, "orders", 1, map[string]*string{
		"remote.storage.enable": kadm.StringPtr("true"), "segment.bytes": kadm.StringPtr("4000"),
		"local.retention.ms": kadm.StringPtr("-1"), "retention.ms": kadm.StringPtr("-1"),
		"korvet.index.enable": kadm.StringPtr("true"),
	}, 20*time.Second)
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.KafkaAddr), kgo.DefaultProduceTopic("orders"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	// produced[off] is the value at offset off and the version it was
	// written with.
	type produced struct {
		version int
		value   map[string]any
		raw     []byte
	}
	var all []produced
	const perVersion = 80
	for v := 1; v <= 2; v++ {
		ss, err := reg.CreateSchema(ctx, "orders-value", sr.Schema{Schema: ev.texts[v-1], Type: sr.TypeAvro})
		if err != nil {
			t.Fatalf("register version %d: %v", v, err)
		}
		// Batches of 10: a segment rolls between appends, so several
		// segments get sealed and archived.
		for range perVersion / 10 {
			var recs []*kgo.Record
			for range 10 {
				off := int64(len(all))
				value := ev.value(v, off)
				raw := frame(t, ev.avro[v-1], int32(ss.ID), value)
				all = append(all, produced{v, value, raw})
				recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "k%d", off), Value: raw})
			}
			if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}

	// Wait until a segment holding version 2 values is archived (the
	// active segment stays in Redis).
	warehouse := filepath.Join(k.DataDir, "warehouse")
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var files []string
	testbed.WaitFor(t, 2*time.Minute, "a segment with version 2 values in the cold tier", func() bool {
		files = parquetFiles(t, warehouse)
		for _, f := range files {
			var top int64
			if err := db.QueryRowContext(ctx, `SELECT max("offset") FROM read_parquet(?)`, f).Scan(&top); err == nil && top >= perVersion {
				return true
			}
		}
		return false
	})

	rows := 0
	for _, f := range files {
		// A file's typed columns are the table's shape when it was
		// written: version 2's once it was registered.
		var desc string
		if err := db.QueryRowContext(ctx, `SELECT typeof(value_fields) FROM read_parquet(?) LIMIT 1`, f).Scan(&desc); err != nil {
			t.Fatalf("%s: no typed columns: %v", f, err)
		}
		shape := ev.typed(t, 1).Shape
		if strings.Contains(desc, "channel") {
			shape = ev.typed(t, 2).Shape
		}
		q, err := db.QueryContext(ctx, `SELECT "offset", value, value_fields FROM read_parquet(?) ORDER BY "offset"`, f)
		if err != nil {
			t.Fatal(err)
		}
		for q.Next() {
			var off int64
			var value []byte
			var fields any
			if err := q.Scan(&off, &value, &fields); err != nil {
				t.Fatal(err)
			}
			if off < 0 || off >= int64(len(all)) {
				t.Fatalf("%s: offset %d was never produced", f, off)
			}
			p := all[off]
			if !bytes.Equal(value, p.raw) {
				t.Errorf("offset %d: raw value differs", off)
			}
			got, want := fromDuckDB(t, fields, shape), expected(p.value, shape)
			if !reflect.DeepEqual(got, want) {
				gj, _ := json.Marshal(got)
				wj, _ := json.Marshal(want)
				t.Errorf("offset %d (version %d): value_fields\n got %s\nwant %s", off, p.version, gj, wj)
			}
			rows++
		}
		if err := q.Err(); err != nil {
			t.Fatal(err)
		}
		q.Close()
	}
	if rows == 0 {
		t.Fatal("no archived rows")
	}
	t.Logf("%d files, %d rows checked", len(files), rows)

	// The table schema as the Iceberg REST catalog serves it: evolved
	// with version 2's fields, at the root and nested. A segment's
	// Parquet file is written before the commit that adds it (and evolves
	// the schema) to the table, so the files seen above may be ahead of
	// the table's metadata for a moment.
	testbed.Eventually(t, 30*time.Second, "the table's schema evolved with version 2", func() (bool, string) {
		meta := httpGet(t, "http://"+k.HTTPAddr+"/iceberg/v1/namespaces/korvet/tables/orders", "")
		for _, want := range []string{`"name":"value_fields"`, `"name":"channel"`, `"name":"zip"`, `"type":"long"`} {
			if !strings.Contains(meta, want) {
				return false, "table metadata lacks " + want + ": " + meta
			}
		}
		return true, ""
	})

	// The KV view decodes a framed value to JSON on request, and keeps
	// the raw bytes otherwise.
	off := int64(perVersion + 1) // version 2, channel "web"
	var doc map[string]any
	testbed.WaitFor(t, 30*time.Second, "the KV view to index the topic", func() bool {
		body := httpGet(t, fmt.Sprintf("http://%s/v1/kv/orders/k%d", k.HTTPAddr, off), "application/json")
		return json.Unmarshal([]byte(body), &doc) == nil && doc["customer"] != nil
	})
	if doc["customer"] != all[off].value["customer"] || doc["channel"] != "web" {
		t.Errorf("KV JSON %v, want customer %v channel web", doc, all[off].value["customer"])
	}
	if raw := httpGet(t, fmt.Sprintf("http://%s/v1/kv/orders/k%d", k.HTTPAddr, off), ""); raw != string(all[off].raw) {
		t.Errorf("KV raw value differs from what was produced")
	}
}

// frame Avro-encodes value with s and frames it with schema id id.
func frame(t *testing.T, s avro.Schema, id int32, value map[string]any) []byte {
	t.Helper()
	m := maps.Clone(value)
	if ship, ok := m["ship"].(map[string]any); ok {
		m["ship"] = map[string]any{"shop.Addr": ship} // a union branch, by name
	}
	b, err := avro.Marshal(s, m)
	if err != nil {
		t.Fatal(err)
	}
	return append(schema.AppendFrame(nil, id), b...)
}

func parquetFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".parquet") {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// httpGet answers the body of a 200, or "" for anything else.
func httpGet(t *testing.T, url, accept string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return ""
	}
	return string(b)
}
