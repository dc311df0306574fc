package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/korvet/korvet/internal/testbed"
)

// End-to-end tests of the schema registry: the korvet binary on a real
// redis-server, its [schema_registry] listener, and real registry
// clients (franz-go's pkg/sr, python3-confluent-kafka's
// SchemaRegistryClient) and Kafka clients.

// srCall is one request to a registry listener, optionally with a Basic
// login; it returns the status and body.
func srCall(t *testing.T, base, user, pass, method, path, body string) (int, []byte) {
	t.Helper()
	code, b, err := srDo(base, user, pass, method, path, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return code, b
}

// srDo is srCall for other goroutines than the test's: it returns the
// error rather than failing.
func srDo(base, user, pass, method, path, body string) (int, []byte, error) {
	req, err := http.NewRequest(method, base+path, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/vnd.schemaregistry.v1+json")
	if user != "" {
		req.SetBasicAuth(user, pass)
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// registerBody is the body of POST /subjects/{s}/versions.
func registerBody(schemaType, text string) string {
	b, _ := json.Marshal(map[string]string{"schemaType": schemaType, "schema": text})
	return string(b)
}

// srErrorCode is the error_code of a Confluent error body; 0 if none.
func srErrorCode(b []byte) int {
	var e struct {
		Code int `json:"error_code"`
	}
	_ = json.Unmarshal(b, &e)
	return e.Code
}

// srRegister registers text under subject without a login and returns
// its id.
func srRegister(t *testing.T, base, subject, schemaType, text string) int {
	t.Helper()
	code, b := srCall(t, base, "", "", http.MethodPost, "/subjects/"+subject+"/versions", registerBody(schemaType, text))
	var r struct {
		ID int `json:"id"`
	}
	if code != http.StatusOK || json.Unmarshal(b, &r) != nil || r.ID <= 0 {
		t.Fatalf("register: %d %s", code, b)
	}
	return r.ID
}

// wantSRError fails unless err is the registry's error with code.
func wantSRError(t *testing.T, what string, err error, code int) {
	t.Helper()
	var re *sr.ResponseError
	if !errors.As(err, &re) || re.ErrorCode != code {
		t.Errorf("%s: %v, want error_code %d", what, err, code)
	}
}

type reading struct {
	Sensor  string  `avro:"sensor"`
	Celsius float64 `avro:"celsius"`
}

const (
	readingV1 = `{"type":"record","name":"Reading","namespace":"home","fields":[{"name":"sensor","type":"string"},{"name":"celsius","type":"double"}]}`
	// v2 adds a field with a default: BACKWARD compatible.
	readingV2 = `{"type":"record","name":"Reading","namespace":"home","fields":[{"name":"sensor","type":"string"},{"name":"celsius","type":"double"},{"name":"room","type":"string","default":"hall"}]}`
	// celsius as a string: new readers cannot read old records.
	readingBad = `{"type":"record","name":"Reading","namespace":"home","fields":[{"name":"sensor","type":"string"},{"name":"celsius","type":"string"}]}`
)

// franz-go's registry client and Serde against korvet: Avro values framed
// with the registry's id go through the Kafka listener byte-for-byte and
// decode with the schema fetched back by id; evolution, a refusal,
// references, lookups and deletes answer as Confluent's registry does.
func TestSchemaRegistryFranzGo(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	p := startKorvet(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rcl, err := sr.NewClient(sr.URLs(p.registryBase))
	if err != nil {
		t.Fatal(err)
	}
	const subject = "readings-value"
	v1, err := rcl.CreateSchema(ctx, subject, sr.Schema{Schema: readingV1, Type: sr.TypeAvro})
	if err != nil {
		t.Fatalf("register v1: %v", err)
	}
	if v1.Version != 1 || v1.ID <= 0 {
		t.Errorf("v1 = %+v, want version 1 with an id", v1)
	}
	again, err := rcl.CreateSchema(ctx, subject, sr.Schema{Schema: readingV1, Type: sr.TypeAvro})
	if err != nil || again.ID != v1.ID || again.Version != 1 {
		t.Errorf("register v1 again: %+v %v; want the same id %d and version 1", again, err, v1.ID)
	}
	if found, err := rcl.LookupSchema(ctx, subject, sr.Schema{Schema: readingV1}); err != nil || found.ID != v1.ID || found.Version != 1 {
		t.Errorf("lookup: %+v %v", found, err)
	}
	if types, err := rcl.SupportedTypes(ctx); err != nil || len(types) != 3 {
		t.Errorf("schema types: %v %v", types, err)
	}

	// Produce framed values, consume them back byte-for-byte.
	codec := avro.MustParse(readingV1)
	var serde sr.Serde
	serde.Register(v1.ID, reading{}, sr.EncodeFn(func(v any) ([]byte, error) { return avro.Marshal(codec, v) }))
	kcl, err := kgo.NewClient(kgo.SeedBrokers(p.kafkaAddr), kgo.DefaultProduceTopic("readings"), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer kcl.Close()
	var sent []reading
	var frames [][]byte
	for i := range 50 {
		v := reading{Sensor: fmt.Sprintf("s%d", i%5), Celsius: 18 + float64(i)/4}
		b, err := serde.Encode(v)
		if err != nil {
			t.Fatal(err)
		}
		if b[0] != 0 || int(binary.BigEndian.Uint32(b[1:5])) != v1.ID {
			t.Fatalf("frame % x does not start with magic 0 and id %d", b[:5], v1.ID)
		}
		sent, frames = append(sent, v), append(frames, b)
		if err := kcl.ProduceSync(ctx, &kgo.Record{Key: []byte(v.Sensor), Value: b}).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	consumer, err := kgo.NewClient(kgo.SeedBrokers(p.kafkaAddr), kgo.ConsumeTopics("readings"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	var got [][]byte
	for len(got) < len(frames) && ctx.Err() == nil {
		fs := consumer.PollFetches(ctx)
		if err := fs.Err0(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("fetch: %v", err)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, r.Value) })
	}
	if len(got) != len(frames) {
		t.Fatalf("consumed %d values, want %d", len(got), len(frames))
	}
	schemas := map[int]avro.Schema{}
	for i, b := range got {
		if !bytes.Equal(b, frames[i]) {
			t.Fatalf("value %d: consumed % x, produced % x", i, b, frames[i])
		}
		// Decode through the registry: the id in the frame names the
		// writer's schema.
		id, payload, err := serde.DecodeID(b)
		if err != nil {
			t.Fatal(err)
		}
		sch, ok := schemas[id]
		if !ok {
			text, err := rcl.SchemaByID(ctx, id)
			if err != nil {
				t.Fatalf("schema %d: %v", id, err)
			}
			if sch, err = avro.Parse(text.Schema); err != nil {
				t.Fatalf("schema %d from the registry: %v", id, err)
			}
			schemas[id] = sch
		}
		var r reading
		if err := avro.Unmarshal(sch, payload, &r); err != nil || r != sent[i] {
			t.Fatalf("value %d decodes to %+v (%v), want %+v", i, r, err, sent[i])
		}
	}

	// Evolution: a compatible v2 gets a new id and version 2; an
	// incompatible schema is refused with 409.
	v2, err := rcl.CreateSchema(ctx, subject, sr.Schema{Schema: readingV2, Type: sr.TypeAvro})
	if err != nil || v2.Version != 2 || v2.ID == v1.ID {
		t.Fatalf("register v2: %+v %v", v2, err)
	}
	_, err = rcl.CreateSchema(ctx, subject, sr.Schema{Schema: readingBad, Type: sr.TypeAvro})
	wantSRError(t, "incompatible schema", err, 409)
	var re *sr.ResponseError
	if errors.As(err, &re) && (re.StatusCode != http.StatusConflict || !strings.Contains(re.Message, "incompatible")) {
		t.Errorf("incompatible schema: HTTP %d %q; want 409 saying incompatible", re.StatusCode, re.Message)
	}
	if res, err := rcl.CheckCompatibility(ctx, subject, -1, sr.Schema{Schema: readingBad}); err != nil || res.Is {
		t.Errorf("compatibility check of the bad schema: %+v %v; want not compatible", res, err)
	}
	if vs, err := rcl.SubjectVersions(ctx, subject); err != nil || !slices.Equal(vs, []int{1, 2}) {
		t.Errorf("versions: %v %v", vs, err)
	}
	if latest, err := rcl.SchemaByVersion(ctx, subject, -1); err != nil || latest.ID != v2.ID || latest.Version != 2 {
		t.Errorf("latest: %+v %v", latest, err)
	}

	// References: a record whose field is a named type of another subject.
	unit, err := rcl.CreateSchema(ctx, "home.Unit", sr.Schema{Schema: `{"type":"enum","name":"Unit","namespace":"home","symbols":["C","F"]}`, Type: sr.TypeAvro})
	if err != nil {
		t.Fatalf("register the referenced schema: %v", err)
	}
	withRef, err := rcl.CreateSchema(ctx, "thermostats-value", sr.Schema{
		Schema:     `{"type":"record","name":"Thermostat","namespace":"home","fields":[{"name":"unit","type":"home.Unit"}]}`,
		Type:       sr.TypeAvro,
		References: []sr.SchemaReference{{Name: "home.Unit", Subject: "home.Unit", Version: unit.Version}},
	})
	if err != nil {
		t.Fatalf("register a schema with a reference: %v", err)
	}
	if s, err := rcl.SchemaByID(ctx, withRef.ID); err != nil || len(s.References) != 1 || s.References[0].Subject != "home.Unit" {
		t.Errorf("schema %d: %+v %v; want its reference", withRef.ID, s, err)
	}
	code, body := srCall(t, p.registryBase, "", "", http.MethodGet, "/subjects/home.Unit/versions/1/referencedby", "")
	var by []int
	if code != http.StatusOK || json.Unmarshal(body, &by) != nil || !slices.Equal(by, []int{withRef.ID}) {
		t.Errorf("referencedby: %d %s; want [%d]", code, body, withRef.ID)
	}
	wantSRError(t, "deleting a referenced version", rcl.DeleteSchema(ctx, "home.Unit", 1, sr.SoftDelete), 42206)
	_, err = rcl.CreateSchema(ctx, "broken-value", sr.Schema{Schema: `{"type":"record","name":"B","fields":[{"name":"u","type":"home.Nope"}]}`})
	wantSRError(t, "unknown type", err, 42201)

	// Deletes: soft (versions gone from view, ids kept), soft twice,
	// permanent (the ids go).
	if vs, err := rcl.DeleteSubject(ctx, subject, sr.SoftDelete); err != nil || !slices.Equal(vs, []int{1, 2}) {
		t.Errorf("soft delete: %v %v", vs, err)
	}
	_, err = rcl.SubjectVersions(ctx, subject)
	wantSRError(t, "versions of a soft-deleted subject", err, 40401)
	if s, err := rcl.SchemaByID(ctx, v1.ID); err != nil || s.Schema == "" {
		t.Errorf("schema %d after a soft delete: %v; ids stay", v1.ID, err)
	}
	_, err = rcl.DeleteSubject(ctx, subject, sr.SoftDelete)
	wantSRError(t, "soft delete twice", err, 40404)
	if _, err := rcl.DeleteSubject(ctx, subject, sr.HardDelete); err != nil {
		t.Errorf("permanent delete: %v", err)
	}
	_, err = rcl.SchemaByID(ctx, v2.ID)
	wantSRError(t, "schema of a permanently deleted subject", err, 40403)
	subjects, err := rcl.Subjects(ctx)
	if err != nil || slices.Contains(subjects, subject) || !slices.Contains(subjects, "thermostats-value") {
		t.Errorf("subjects after the delete: %v %v", subjects, err)
	}
}

// schemaRegistryPy drives python3-confluent-kafka's SchemaRegistryClient
// and JSON Schema serializer against korvet; it prints one JSON object
// of findings, or fails with a traceback.
const schemaRegistryPy = `
import json, sys, time
from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

url, bootstrap, topic = sys.argv[1:4]
client = SchemaRegistryClient({"url": url})
subject = topic + "-value"
v1 = json.dumps({"title": "Order", "type": "object",
                 "properties": {"id": {"type": "integer"}, "item": {"type": "string"}}, "required": ["id"]})
bad = json.dumps({"title": "Order", "type": "object",
                  "properties": {"id": {"type": "string"}, "item": {"type": "string"}}, "required": ["id"]})
out = {}

def code(fn):
    try:
        fn()
    except SchemaRegistryError as e:
        return [e.http_status_code, e.error_code]
    return None

out["id"] = client.register_schema(subject, Schema(v1, "JSON"))
out["id_again"] = client.register_schema(subject, Schema(v1, "JSON"))
got = client.get_schema(out["id"])
out["get_type"] = got.schema_type
out["get_same"] = json.loads(got.schema_str) == json.loads(v1)
latest = client.get_latest_version(subject)
out["latest"] = [latest.schema_id, latest.version, latest.subject]
out["refused"] = code(lambda: client.register_schema(subject, Schema(bad, "JSON")))
out["compatible_bad"] = client.test_compatibility(subject, Schema(bad, "JSON"))
out["set_compat"] = client.set_compatibility(subject_name=subject, level="NONE")
out["get_compat"] = client.get_compatibility(subject_name=subject)
out["bad_id"] = client.register_schema(subject, Schema(bad, "JSON"))
out["versions"] = client.get_versions(subject)

# A produce/consume round trip through korvet's Kafka listener.
order = {"id": 7, "item": "tea"}
ser = JSONSerializer(v1, client)
value = ser(order, SerializationContext(topic, MessageField.VALUE))
producer = Producer({"bootstrap.servers": bootstrap})
producer.produce(topic, value=value)
if producer.flush(30) != 0:
    sys.exit("produce did not finish")
consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "py-sr", "auto.offset.reset": "earliest"})
consumer.subscribe([topic])
msg, deadline = None, time.time() + 60
while msg is None and time.time() < deadline:
    m = consumer.poll(1.0)
    if m is not None and m.error() is None:
        msg = m
consumer.close()
if msg is None:
    sys.exit("nothing consumed within 60s")
raw = msg.value()
out["same_bytes"] = raw == value
out["magic"] = raw[0]
out["frame_id"] = int.from_bytes(raw[1:5], "big")
out["decoded"] = JSONDeserializer(v1)(raw, SerializationContext(topic, MessageField.VALUE))

# References: a schema whose $ref names a schema of another subject.
addr = json.dumps({"type": "object", "properties": {"city": {"type": "string"}}})
client.register_schema("pyaddr", Schema(addr, "JSON"))
ship = json.dumps({"type": "object", "properties": {"to": {"$ref": "addr.json"}}})
ref = SchemaReference("addr.json", "pyaddr", 1)
out["ref_id"] = client.register_schema("pyship-value", Schema(ship, "JSON", [ref]))
got = SchemaRegistryClient({"url": url}).get_schema(out["ref_id"])
out["ref_back"] = [[r.name, r.subject, r.version] for r in got.references]
found = client.lookup_schema("pyship-value", Schema(ship, "JSON", [ref]))
out["ref_lookup"] = [found.schema_id, found.version]
bad_ref = SchemaReference("addr.json", "pyaddr", 9)
out["ref_missing"] = code(lambda: client.register_schema("pyship2-value", Schema(ship, "JSON", [bad_ref])))

# Deletes: soft, soft twice, then permanent on another subject.
out["deleted"] = client.delete_subject(subject)
out["subjects_after"] = client.get_subjects()
out["latest_after"] = code(lambda: client.get_latest_version(subject))
out["soft_twice"] = code(lambda: client.delete_subject(subject))
other = json.dumps({"title": "Gone", "type": "object", "properties": {"g": {"type": "boolean"}}})
out["gone_id"] = client.register_schema("gone-value", Schema(other, "JSON"))
out["gone_deleted"] = client.delete_subject("gone-value", permanent=True)
# A fresh client: register_schema cached the id in this one.
out["gone_schema"] = code(lambda: SchemaRegistryClient({"url": url}).get_schema(out["gone_id"]))
print(json.dumps(out))
`

// python3-confluent-kafka's SchemaRegistryClient against korvet: register
// (idempotent), get by id, latest version, a 409 refusal, compatibility
// levels, references, soft and permanent deletes, and a JSON Schema framed value
// through Producer and Consumer. Debian has no fastavro, so Avro is
// franz-go's part (TestSchemaRegistryFranzGo).
func TestSchemaRegistryPython(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	if !haveClient(t, "python3-confluent-kafka with requests and jsonschema", "python3-confluent-kafka python3-requests python3-jsonschema",
		"/usr/bin/python3", "-c", "import confluent_kafka.schema_registry.json_schema, requests, jsonschema") {
		t.Skip("python3-confluent-kafka's schema registry client cannot be imported")
	}
	p := startKorvet(t, "")
	script := filepath.Join(t.TempDir(), "sr.py")
	if err := os.WriteFile(script, []byte(schemaRegistryPy), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, err := runClient(t, 2*time.Minute, "/usr/bin/python3", script, p.registryBase, p.kafkaAddr, "pyorders")
	if err != nil {
		t.Fatalf("python: %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
	}
	var out struct {
		ID            int            `json:"id"`
		IDAgain       int            `json:"id_again"`
		GetType       string         `json:"get_type"`
		GetSame       bool           `json:"get_same"`
		Latest        []any          `json:"latest"`
		Refused       []int          `json:"refused"`
		CompatibleBad bool           `json:"compatible_bad"`
		SetCompat     any            `json:"set_compat"`
		GetCompat     string         `json:"get_compat"`
		BadID         int            `json:"bad_id"`
		Versions      []int          `json:"versions"`
		SameBytes     bool           `json:"same_bytes"`
		Magic         int            `json:"magic"`
		FrameID       int            `json:"frame_id"`
		Decoded       map[string]any `json:"decoded"`
		Deleted       []int          `json:"deleted"`
		SubjectsAfter []string       `json:"subjects_after"`
		LatestAfter   []int          `json:"latest_after"`
		SoftTwice     []int          `json:"soft_twice"`
		GoneID        int            `json:"gone_id"`
		GoneDeleted   []int          `json:"gone_deleted"`
		GoneSch       []int          `json:"gone_schema"`
		RefID         int            `json:"ref_id"`
		RefBack       [][]any        `json:"ref_back"`
		RefLookup     []int          `json:"ref_lookup"`
		RefMissing    []int          `json:"ref_missing"`
	}
	if err := json.Unmarshal(stdout, &out); err != nil {
		t.Fatalf("python output %q: %v", stdout, err)
	}
	t.Logf("python: %s", stdout)

	if out.ID <= 0 || out.IDAgain != out.ID || out.GetType != "JSON" || !out.GetSame {
		t.Errorf("register/get: id %d, again %d, type %q, same text %v", out.ID, out.IDAgain, out.GetType, out.GetSame)
	}
	if len(out.Latest) != 3 || out.Latest[0] != float64(out.ID) || out.Latest[1] != float64(1) || out.Latest[2] != "pyorders-value" {
		t.Errorf("get_latest_version = %v", out.Latest)
	}
	if !slices.Equal(out.Refused, []int{409, 409}) || out.CompatibleBad {
		t.Errorf("incompatible schema: refused %v, test_compatibility %v; want [409 409] and false", out.Refused, out.CompatibleBad)
	}
	if out.GetCompat != "NONE" || out.BadID <= out.ID || !slices.Equal(out.Versions, []int{1, 2}) {
		t.Errorf("after set_compatibility NONE (%v): level %q, id %d, versions %v", out.SetCompat, out.GetCompat, out.BadID, out.Versions)
	}
	if !out.SameBytes || out.Magic != 0 || out.FrameID != out.ID || out.Decoded["id"] != float64(7) || out.Decoded["item"] != "tea" {
		t.Errorf("round trip: same bytes %v, magic %d, frame id %d (registered %d), decoded %v", out.SameBytes, out.Magic, out.FrameID, out.ID, out.Decoded)
	}
	if !slices.Equal(out.Deleted, []int{1, 2}) || slices.Contains(out.SubjectsAfter, "pyorders-value") ||
		!slices.Equal(out.LatestAfter, []int{404, 40401}) || !slices.Equal(out.SoftTwice, []int{404, 40404}) {
		t.Errorf("soft delete: %v, subjects %v, latest after %v, twice %v", out.Deleted, out.SubjectsAfter, out.LatestAfter, out.SoftTwice)
	}
	if out.RefID <= 0 || len(out.RefBack) != 1 || fmt.Sprint(out.RefBack[0]) != "[addr.json pyaddr 1]" ||
		!slices.Equal(out.RefLookup, []int{out.RefID, 1}) || !slices.Equal(out.RefMissing, []int{422, 42201}) {
		t.Errorf("references: id %d, read back %v, lookup %v, unknown version %v", out.RefID, out.RefBack, out.RefLookup, out.RefMissing)
	}
	if out.GoneID <= 0 || !slices.Equal(out.GoneDeleted, []int{1}) || !slices.Equal(out.GoneSch, []int{404, 40403}) {
		t.Errorf("permanent delete: id %d, deleted %v, get_schema after %v", out.GoneID, out.GoneDeleted, out.GoneSch)
	}
}

// The registry lives in Redis: after a restart on the same Redis every
// subject, version, id, level and soft delete is there, the same schema
// gets its old id, and a new one a fresh id.
func TestSchemaRegistryRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	p := startKorvet(t, "")
	base := p.registryBase
	id1 := srRegister(t, base, "a-value", "AVRO", readingV1)
	id2 := srRegister(t, base, "a-value", "AVRO", readingV2)
	id3 := srRegister(t, base, "b-value", "JSON", `{"type":"object"}`)
	if code, b := srCall(t, base, "", "", http.MethodPut, "/config/b-value", `{"compatibility":"FULL_TRANSITIVE"}`); code != http.StatusOK {
		t.Fatalf("set level: %d %s", code, b)
	}
	if code, b := srCall(t, base, "", "", http.MethodDelete, "/subjects/a-value/versions/1", ""); code != http.StatusOK {
		t.Fatalf("soft delete version 1: %d %s", code, b)
	}

	if _, err := p.stop(t, 30*time.Second); err != nil {
		t.Fatalf("stop: %v", err)
	}
	p.launch(t)

	check := func(path, want string) {
		t.Helper()
		code, b := srCall(t, base, "", "", http.MethodGet, path, "")
		if code != http.StatusOK || !jsonEqual(b, []byte(want)) {
			t.Errorf("after restart GET %s: %d %s, want %s", path, code, b, want)
		}
	}
	check("/subjects", `["a-value","b-value"]`)
	check("/subjects/a-value/versions", `[2]`)
	check("/subjects/a-value/versions?deleted=true", `[1,2]`)
	check("/config/b-value", `{"compatibilityLevel":"FULL_TRANSITIVE"}`)
	for id, text := range map[int]string{id1: readingV1, id2: readingV2} {
		code, b := srCall(t, base, "", "", http.MethodGet, fmt.Sprintf("/schemas/ids/%d", id), "")
		var s struct {
			Schema string `json:"schema"`
		}
		if code != http.StatusOK || json.Unmarshal(b, &s) != nil || !jsonEqual([]byte(s.Schema), []byte(text)) {
			t.Errorf("after restart schema %d: %d %s", id, code, b)
		}
	}
	if again := srRegister(t, base, "a-value", "AVRO", readingV2); again != id2 {
		t.Errorf("v2 again after restart: id %d, want %d", again, id2)
	}
	next := srRegister(t, base, "c-value", "JSON", `{"type":"string"}`)
	if next == id1 || next == id2 || next == id3 {
		t.Errorf("a new schema after restart got id %d, already used (%d %d %d)", next, id1, id2, id3)
	}
}

// jsonEqual compares two JSON texts by value.
func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

// Two brokers on one Redis serve one registry: what one registers the
// other reads, and the same schema registered through both at once gets
// one id and one version.
func TestSchemaRegistryTwoBrokers(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	r := testbed.StartRedis(t)
	ks := testbed.StartCluster(t, r.URL, 2)
	b1, b2 := "http://"+ks[0].RegistryAddr, "http://"+ks[1].RegistryAddr
	if ks[0].RegistryAddr == "" || ks[1].RegistryAddr == "" {
		t.Fatal("testbed started brokers without a schema registry listener")
	}

	id := srRegister(t, b1, "shared-value", "AVRO", readingV1)
	code, b := srCall(t, b2, "", "", http.MethodGet, "/subjects/shared-value/versions/latest", "")
	var got struct {
		ID      int    `json:"id"`
		Version int    `json:"version"`
		Schema  string `json:"schema"`
	}
	if code != http.StatusOK || json.Unmarshal(b, &got) != nil || got.ID != id || got.Version != 1 || !jsonEqual([]byte(got.Schema), []byte(readingV1)) {
		t.Errorf("broker 2 reads %d %s; want id %d version 1", code, b, id)
	}

	// The same new schema from both brokers at once, several times each.
	const each = 8
	ids := make([]int, 2*each)
	var wg sync.WaitGroup
	for i := range ids {
		base := []string{b1, b2}[i%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, b, err := srDo(base, "", "", http.MethodPost, "/subjects/race-value/versions", registerBody("AVRO", readingV2))
			var r struct {
				ID int `json:"id"`
			}
			if err != nil || code != http.StatusOK || json.Unmarshal(b, &r) != nil {
				t.Errorf("concurrent register via %s: %d %s %v", base, code, b, err)
			}
			ids[i] = r.ID
		}()
	}
	wg.Wait()
	for _, got := range ids {
		if got != ids[0] || got <= 0 {
			t.Fatalf("concurrent registers of one schema got ids %v, want one", ids)
		}
	}
	code, b = srCall(t, b1, "", "", http.MethodGet, "/subjects/race-value/versions", "")
	if code != http.StatusOK || !jsonEqual(b, []byte(`[1]`)) {
		t.Errorf("versions after the race: %d %s, want [1]", code, b)
	}
	// Different schemas at once: each its own id.
	var mu sync.Mutex
	seen := map[int]string{}
	for i := range 2 * each {
		base := []string{b1, b2}[i%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			subject := fmt.Sprintf("distinct%d-value", i)
			code, b, err := srDo(base, "", "", http.MethodPost, "/subjects/"+subject+"/versions", registerBody("JSON", fmt.Sprintf(`{"type":"object","title":"T%d"}`, i)))
			var r struct {
				ID int `json:"id"`
			}
			if err != nil || code != http.StatusOK || json.Unmarshal(b, &r) != nil {
				t.Errorf("register %s: %d %s %v", subject, code, b, err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if other, dup := seen[r.ID]; dup || r.ID == id || r.ID == ids[0] {
				t.Errorf("id %d given to %s and %s", r.ID, subject, other)
			}
			seen[r.ID] = subject
		}()
	}
	wg.Wait()
}

// Through the real listener with Basic logins and ACLs: a user without
// WRITE on the topic is refused registering its subject with 403 and
// error_code 40301, one with WRITE may, READ lets read, a missing login is
// 401, and levels need ALTER_CONFIGS.
func TestSchemaRegistryACL(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	pwFile := filepath.Join(t.TempDir(), "admin.password")
	if err := os.WriteFile(pwFile, []byte("root-secret-3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := testbed.StartRedis(t)
	p := startKorvetWith(t, r, func(kafkaAddr, httpAddr string) string {
		return fmt.Sprintf(`admin_user = "root"
admin_password_file = %q
[kafka]
listen = %q
auth = "sasl"
acls = true
[http]
listen = %q
auth = "basic"
`, pwFile, kafkaAddr, httpAddr)
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rootCl, err := kgo.NewClient(kgo.SeedBrokers(p.kafkaAddr), kgo.SASL(scram.Auth{User: "root", Pass: "root-secret-3"}.AsSha256Mechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer rootCl.Close()
	adm := kadm.NewClient(rootCl)
	for user, pw := range map[string]string{"writer": "writer-pw-1", "reader": "reader-pw-1"} {
		res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: user, Mechanism: kadm.ScramSha256, Iterations: 4096, Password: pw}})
		if err != nil || res.Error() != nil {
			t.Fatalf("create %s: %v %v", user, err, res.Error())
		}
	}
	acls := []*kadm.ACLBuilder{
		kadm.NewACLs().Topics("orders").Allow("User:writer").Operations(kadm.OpRead, kadm.OpWrite),
		kadm.NewACLs().Topics("orders").Allow("User:reader").Operations(kadm.OpRead),
	}
	for _, a := range acls {
		if res, err := adm.CreateACLs(ctx, a); err != nil || res[0].Err != nil {
			t.Fatalf("create ACLs: %v %+v", err, res)
		}
	}
	base := p.registryBase
	body := registerBody("AVRO", readingV1)
	for _, c := range []struct {
		who, user, pass, method, path, body string
		code, errCode                       int
	}{
		{"no login", "", "", http.MethodPost, "/subjects/orders-value/versions", body, 401, 401},
		{"wrong password", "writer", "nope", http.MethodPost, "/subjects/orders-value/versions", body, 401, 401},
		{"READ only", "reader", "reader-pw-1", http.MethodPost, "/subjects/orders-value/versions", body, 403, 40301},
		{"WRITE", "writer", "writer-pw-1", http.MethodPost, "/subjects/orders-value/versions", body, 200, 0},
		{"READ", "reader", "reader-pw-1", http.MethodGet, "/subjects/orders-value/versions/latest", "", 200, 0},
		{"READ on the key subject's topic", "reader", "reader-pw-1", http.MethodGet, "/subjects/orders-key/versions", "", 404, 40401},
		{"root on another topic", "root", "root-secret-3", http.MethodPost, "/subjects/payments-value/versions", body, 200, 0},
		{"no READ on payments", "reader", "reader-pw-1", http.MethodGet, "/subjects/payments-value/versions/latest", "", 403, 40301},
		{"no WRITE on payments", "writer", "writer-pw-1", http.MethodDelete, "/subjects/payments-value", "", 403, 40301},
		{"level without ALTER_CONFIGS", "writer", "writer-pw-1", http.MethodPut, "/config/orders-value", `{"compatibility":"NONE"}`, 403, 40301},
		{"global level without ALTER_CONFIGS", "writer", "writer-pw-1", http.MethodPut, "/config", `{"compatibility":"NONE"}`, 403, 40301},
		{"level as a super user", "root", "root-secret-3", http.MethodPut, "/config/orders-value", `{"compatibility":"NONE"}`, 200, 0},
	} {
		code, b := srCall(t, base, c.user, c.pass, c.method, c.path, c.body)
		if code != c.code || srErrorCode(b) != c.errCode {
			t.Errorf("%s: %s %s: %d %s; want %d with error_code %d", c.who, c.method, c.path, code, b, c.code, c.errCode)
		}
		if strings.Contains(string(b), "pw-1") || strings.Contains(string(b), "secret-3") {
			t.Errorf("%s: the answer holds a password: %s", c.who, b)
		}
	}
	// The reader's list holds only what it may read.
	code, b := srCall(t, base, "reader", "reader-pw-1", http.MethodGet, "/subjects", "")
	if code != http.StatusOK || !jsonEqual(b, []byte(`["orders-value"]`)) {
		t.Errorf("reader's subjects: %d %s, want [\"orders-value\"]", code, b)
	}
	if strings.Contains(p.logs.String(), "pw-1") || strings.Contains(p.logs.String(), "root-secret-3") {
		t.Error("korvet's log holds a password")
	}
}

// [schema_registry] cert_file and key_file serve the registry over HTTPS.
func TestSchemaRegistryTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	cert, key, roots := selfSigned(t, t.TempDir())
	p := startKorvet(t, fmt.Sprintf("schema_registry.cert_file = %q\nschema_registry.key_file = %q", cert, key))
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	url := strings.Replace(p.registryBase, "http://", "https://", 1) + "/schemas/types"
	resp, err := hc.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "AVRO") {
		t.Errorf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	rcl, err := sr.NewClient(sr.URLs(strings.Replace(p.registryBase, "http://", "https://", 1)), sr.DialTLSConfig(&tls.Config{RootCAs: roots}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if s, err := rcl.CreateSchema(ctx, "tls-value", sr.Schema{Schema: readingV1}); err != nil || s.ID <= 0 {
		t.Errorf("register over HTTPS: %+v %v", s, err)
	}
}
