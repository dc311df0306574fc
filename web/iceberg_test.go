package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/engine/record"
	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/internal/testbed/enginetest"
	"github.com/korvet/korvet/web"
)

// korvet's own read-only Iceberg REST catalog answers for an archived
// topic's table, with the metadata location another engine would load.
func TestIcebergRESTCatalog(t *testing.T) {
	ctx := context.Background()
	store := enginetest.Cold(t, enginetest.LocalWarehouse(t))
	eng, _ := enginetest.Open(t, testbed.StartRedis(t), engine.Options{Cold: store, TieringInterval: 50 * time.Millisecond, GroupInitialRebalanceDelay: -1})
	tp, err := eng.CreateTopic(ctx, "arch", 1, map[string]string{"remote.storage.enable": "true", "segment.bytes": "500", "retention.ms": "-1"}, false)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		recs := []record.Record{{Timestamp: time.Now().UnixMilli(), Key: []byte(fmt.Sprint(i)), Value: make([]byte, 100)}}
		if _, _, err := tp.Partition(0).Append(recs).Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for st, _ := eng.Tiering(); st.Archived == 0; st, _ = eng.Tiering() {
		if time.Now().After(deadline) {
			t.Fatalf("nothing archived: %+v", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
	h := web.New(eng, web.Options{Logger: testbed.Logger()})
	for _, path := range []string{"/iceberg/v1/config", "/iceberg/v1/namespaces", "/iceberg/v1/namespaces/korvet/tables"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, rec.Code, rec.Body)
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/iceberg/v1/namespaces/korvet/tables/arch", nil))
	var table struct {
		MetadataLocation string         `json:"metadata-location"`
		Metadata         map[string]any `json:"metadata"`
	}
	if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &table) != nil {
		t.Fatalf("GET table: %d %s", rec.Code, rec.Body)
	}
	if table.MetadataLocation == "" || table.Metadata["format-version"] != float64(2) {
		t.Fatalf("table: location %q, format %v", table.MetadataLocation, table.Metadata["format-version"])
	}
}
