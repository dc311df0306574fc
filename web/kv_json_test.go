package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/engine/schema"
	"github.com/korvet/korvet/web"
)

// fixedSchemas is a schema.Lookup over a few fixed sources, parsed on
// first use as the registry does.
type fixedSchemas struct {
	mu      sync.Mutex
	sources map[int32]schema.Source
	parsed  map[int32]schema.Schema
}

func (f *fixedSchemas) SchemaByID(_ context.Context, id int32) (schema.Schema, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s, ok := f.parsed[id]; ok {
		return s, nil
	}
	src, ok := f.sources[id]
	if !ok {
		return nil, fmt.Errorf("schema %d not found", id)
	}
	s, err := schema.Parse(src, nil)
	if err != nil {
		return nil, err
	}
	f.parsed[id] = s
	return s, nil
}

const (
	kvAvroSchema  = `{"type":"record","name":"User","fields":[{"name":"name","type":"string"},{"name":"age","type":["null","int"]},{"name":"raw","type":"bytes"}]}`
	kvJSONSchema  = `{"type":"object","properties":{"name":{"type":"string"},"n":{"type":"integer"}}}`
	kvProtoSchema = `syntax = "proto3"; package kv; message Item { string name = 1; int64 n = 2; } message Other { bool b = 1; }`
)

// TestKVValueJSON: GET /v1/kv with Accept: application/json answers a
// registry-framed value as JSON through its schema (Avro, JSON Schema,
// Protobuf), with an ETag of its own and Vary: Accept; a value that is
// not framed, or framed with an unknown id or a payload the schema does
// not decode, is 406 when only JSON is acceptable and its bytes when
// anything else is too.
func TestKVValueJSON(t *testing.T) {
	lookup := &fixedSchemas{parsed: map[int32]schema.Schema{}, sources: map[int32]schema.Source{
		1: {Format: schema.Avro, Text: kvAvroSchema},
		2: {Format: schema.JSON, Text: kvJSONSchema},
		3: {Format: schema.Protobuf, Text: kvProtoSchema},
	}}
	n := startNodeWeb(t, engine.Options{}, web.Options{Schemas: lookup})
	createTopic(t, n, "users", 2, map[string]*string{"cleanup.policy": ptr("compact")})

	avroPayload, err := avro.Marshal(avro.MustParse(kvAvroSchema), map[string]any{"name": "Ada", "age": map[string]any{"int": 36}, "raw": []byte{1, 2}})
	if err != nil {
		t.Fatal(err)
	}
	var protoPayload []byte
	protoPayload = protowire.AppendTag(protoPayload, 1, protowire.BytesType)
	protoPayload = protowire.AppendString(protoPayload, "pen")
	protoPayload = protowire.AppendTag(protoPayload, 2, protowire.VarintType)
	protoPayload = protowire.AppendVarint(protoPayload, 7)
	otherPayload := protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 1)
	values := map[string][]byte{
		"avro":        append(schema.AppendFrame(nil, 1), avroPayload...),
		"json":        append(schema.AppendFrame(nil, 2), `{"name":"Bo","n":12345678901234}`...),
		"proto":       append(append(schema.AppendFrame(nil, 3), 0), protoPayload...),
		"proto-other": append(append(schema.AppendFrame(nil, 3), 2, 2), otherPayload...), // indexes [1]
		"plain":       []byte("just bytes"),
		"unknown":     append(schema.AppendFrame(nil, 99), avroPayload...),
		"junk":        append(schema.AppendFrame(nil, 1), 0xff, 0xff),
	}
	var recs []*kgo.Record
	for k, v := range values {
		recs = append(recs, &kgo.Record{Topic: "users", Key: []byte(k), Value: v})
	}
	if err := n.client().ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	get := func(method, key string, hdr map[string]string) reply {
		t.Helper()
		return n.do(method, "/v1/kv/users/"+key, hdr, nil)
	}
	asJSON := map[string]string{"Accept": "application/json"}

	for key, want := range map[string]string{
		"avro":        `{"name":"Ada","age":36,"raw":"AQI="}`,
		"json":        `{"name":"Bo","n":12345678901234}`,
		"proto":       `{"name":"pen","n":"7"}`,
		"proto-other": `{"b":true}`,
	} {
		got := get("GET", key, asJSON)
		if got.code != 200 || got.hdr.Get("Content-Type") != "application/json" || !strings.Contains(got.hdr.Get("Vary"), "Accept") {
			t.Errorf("%s as JSON: %d %v %s", key, got.code, got.hdr, got.body)
			continue
		}
		var g, w any
		if err := json.Unmarshal(got.body, &g); err != nil {
			t.Errorf("%s: answer %s is not JSON: %v", key, got.body, err)
			continue
		}
		_ = json.Unmarshal([]byte(want), &w)
		if fmt.Sprint(g) != fmt.Sprint(w) {
			t.Errorf("%s as JSON: %s, want %s", key, got.body, want)
		}
	}

	// The same record as bytes and as JSON: two ETags, each revalidates
	// its own representation only.
	raw := get("GET", "avro", nil)
	js := get("GET", "avro", asJSON)
	if raw.code != 200 || string(raw.body) != string(values["avro"]) || raw.hdr.Get("Content-Type") != "application/octet-stream" {
		t.Fatalf("avro as bytes: %d %v %q", raw.code, raw.hdr, raw.body)
	}
	if !strings.Contains(raw.hdr.Get("Vary"), "Accept") {
		t.Errorf("bytes answer without Vary: Accept: %v", raw.hdr)
	}
	rawTag, jsTag := raw.hdr.Get("ETag"), js.hdr.Get("ETag")
	if rawTag == "" || jsTag == "" || rawTag == jsTag {
		t.Fatalf("ETags: bytes %q, JSON %q", rawTag, jsTag)
	}
	if r := get("GET", "avro", map[string]string{"Accept": "application/json", "If-None-Match": jsTag}); r.code != http.StatusNotModified {
		t.Errorf("JSON revalidated with its ETag: %d", r.code)
	}
	if r := get("GET", "avro", map[string]string{"Accept": "application/json", "If-None-Match": rawTag}); r.code != 200 || string(r.body) != string(js.body) {
		t.Errorf("JSON revalidated with the bytes' ETag: %d %s", r.code, r.body)
	}
	if r := get("GET", "avro", map[string]string{"If-None-Match": jsTag}); r.code != 200 || string(r.body) != string(values["avro"]) {
		t.Errorf("bytes revalidated with the JSON ETag: %d", r.code)
	}
	if r := get("HEAD", "avro", asJSON); r.code != 200 || len(r.body) != 0 || r.hdr.Get("Content-Length") != strconv.Itoa(len(js.body)) {
		t.Errorf("HEAD as JSON: %d %v", r.code, r.hdr)
	}

	// Accept variants on a framed value.
	for accept, wantJSON := range map[string]bool{
		"*/*":                         false,
		"application/json, */*":       true,
		"*/*;q=0.5, application/json": true,
		"application/octet-stream, application/json;q=0.4": false,
		"application/json;q=0, */*":                        false,
		"text/html":                                        false,
	} {
		r := get("GET", "avro", map[string]string{"Accept": accept})
		isJSON := r.hdr.Get("Content-Type") == "application/json"
		if r.code != 200 || isJSON != wantJSON {
			t.Errorf("Accept %q: %d %s, JSON %v, want %v", accept, r.code, r.hdr.Get("Content-Type"), isJSON, wantJSON)
		}
	}

	// No JSON form: 406 with a reason when only JSON will do, the bytes
	// when anything else will.
	for key, reason := range map[string]string{"plain": "not_framed", "unknown": "unknown_schema", "junk": "undecodable"} {
		r := get("GET", key, asJSON)
		var body map[string]string
		_ = json.Unmarshal(r.body, &body)
		if r.code != http.StatusNotAcceptable || body["reason"] != reason || body["error"] == "" {
			t.Errorf("%s as JSON: %d %s, want 406 %s", key, r.code, r.body, reason)
		}
		r = get("GET", key, map[string]string{"Accept": "application/json, */*;q=0.1"})
		if r.code != 200 || string(r.body) != string(values[key]) {
			t.Errorf("%s as JSON or anything: %d %q", key, r.code, r.body)
		}
	}

	// Without a Lookup, Accept changes nothing.
	off := startNode(t, engine.Options{})
	createTopic(t, off, "users", 1, map[string]*string{"cleanup.policy": ptr("compact")})
	if err := off.client().ProduceSync(context.Background(), &kgo.Record{Topic: "users", Key: []byte("avro"), Value: values["avro"]}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if r := off.do("GET", "/v1/kv/users/avro", asJSON, nil); r.code != 200 || string(r.body) != string(values["avro"]) || r.hdr.Get("Vary") != "" {
		t.Errorf("JSON off: %d %v %q", r.code, r.hdr, r.body)
	}
}
