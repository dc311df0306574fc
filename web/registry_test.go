package web

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/korvet/korvet/engine/auth"
	"github.com/korvet/korvet/engine/registry"
	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/resp"
)

// registryServer serves the registry REST API over a real Redis.
func registryServer(t *testing.T, opts Options) (*httptest.Server, *resp.Client) {
	t.Helper()
	rd := testbed.StartRedis(t)
	rc, err := resp.New(rd.URL, resp.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rc.Close() })
	reg, err := registry.Open(context.Background(), rc, registry.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if opts.Logger == nil {
		opts.Logger = quiet
	}
	srv := httptest.NewServer(NewRegistry(reg, opts))
	t.Cleanup(srv.Close)
	return srv, rc
}

func srClient(t *testing.T, url string, opts ...sr.ClientOpt) *sr.Client {
	t.Helper()
	cl, err := sr.NewClient(append([]sr.ClientOpt{sr.URLs(url)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// srCode is the Confluent error code of err, or 0.
func srCode(err error) int {
	var re *sr.ResponseError
	if errors.As(err, &re) {
		return re.ErrorCode
	}
	return 0
}

const (
	avroV1 = `{"type":"record","name":"User","fields":[{"name":"name","type":"string"}]}`
	avroV2 = `{"type":"record","name":"User","fields":[{"name":"name","type":"string"},{"name":"age","type":"int","default":0}]}`
	// avroBad adds a field without a default: BACKWARD refuses it.
	avroBad = `{"type":"record","name":"User","fields":[{"name":"name","type":"string"},{"name":"age","type":"int","default":0},{"name":"email","type":"string"}]}`
)

func TestRegistryWithFranzClient(t *testing.T) {
	srv, _ := registryServer(t, Options{})
	cl := srClient(t, srv.URL)
	ctx := context.Background()

	if types, err := cl.SupportedTypes(ctx); err != nil || len(types) != 3 {
		t.Fatalf("types %v %v", types, err)
	}
	s1, err := cl.CreateSchema(ctx, "users-value", sr.Schema{Schema: avroV1})
	if err != nil || s1.ID != 1 || s1.Version != 1 || s1.Subject != "users-value" {
		t.Fatalf("create: %+v %v", s1, err)
	}
	again, err := cl.CreateSchema(ctx, "users-value", sr.Schema{Schema: avroV1})
	if err != nil || again.ID != 1 || again.Version != 1 {
		t.Fatalf("create again (idempotent): %+v %v", again, err)
	}
	s2, err := cl.CreateSchema(ctx, "users-value", sr.Schema{Schema: avroV2})
	if err != nil || s2.ID != 2 || s2.Version != 2 {
		t.Fatalf("create v2: %+v %v", s2, err)
	}
	_, err = cl.CreateSchema(ctx, "users-value", sr.Schema{Schema: avroBad})
	var re *sr.ResponseError
	if !errors.As(err, &re) || re.ErrorCode != 409 || re.StatusCode != 409 || !strings.Contains(re.Message, "incompatible") {
		t.Fatalf("incompatible: %v, want a 409 ResponseError", err)
	}
	// The same schema in another subject: the same id.
	if other, err := cl.CreateSchema(ctx, "copy-value", sr.Schema{Schema: avroV1}); err != nil || other.ID != 1 || other.Version != 1 {
		t.Fatalf("other subject: %+v %v", other, err)
	}

	if s, err := cl.SchemaByID(ctx, 2); err != nil || s.Schema != avroV2 || s.Type != sr.TypeAvro {
		t.Fatalf("by id: %+v %v", s, err)
	}
	if txt, err := cl.SchemaTextByID(ctx, 1); err != nil || txt != avroV1 {
		t.Fatalf("text by id: %q %v", txt, err)
	}
	if _, err := cl.SchemaByID(ctx, 99); srCode(err) != 40403 {
		t.Fatalf("unknown id: %v", err)
	}
	if s, err := cl.SchemaByVersion(ctx, "users-value", -1); err != nil || s.Version != 2 || s.ID != 2 {
		t.Fatalf("latest: %+v %v", s, err)
	}
	if s, err := cl.SchemaByVersion(ctx, "users-value", 1); err != nil || s.Schema.Schema != avroV1 {
		t.Fatalf("version 1: %+v %v", s, err)
	}
	if subs, err := cl.Subjects(ctx); err != nil || !slices.Equal(subs, []string{"copy-value", "users-value"}) {
		t.Fatalf("subjects %v %v", subs, err)
	}
	if vs, err := cl.SubjectVersions(ctx, "users-value"); err != nil || !slices.Equal(vs, []int{1, 2}) {
		t.Fatalf("versions %v %v", vs, err)
	}
	if subs, err := cl.SubjectsByID(ctx, 1); err != nil || !slices.Equal(subs, []string{"copy-value", "users-value"}) {
		t.Fatalf("subjects of id 1: %v %v", subs, err)
	}
	if vs, err := cl.SchemaVersionsByID(ctx, 1); err != nil || len(vs) != 2 {
		t.Fatalf("versions of id 1: %v %v", vs, err)
	}
	if l, err := cl.LookupSchema(ctx, "users-value", sr.Schema{Schema: avroV2}); err != nil || l.ID != 2 || l.Version != 2 {
		t.Fatalf("lookup: %+v %v", l, err)
	}
	if _, err := cl.LookupSchema(ctx, "users-value", sr.Schema{Schema: avroBad}); srCode(err) != 40403 {
		t.Fatalf("lookup of an unregistered schema: %v", err)
	}
	if all, err := cl.AllSchemas(ctx); err != nil || len(all) != 3 {
		t.Fatalf("all schemas: %d %v", len(all), err)
	}

	// Compatibility checks and levels.
	if res, err := cl.CheckCompatibility(ctx, "users-value", -1, sr.Schema{Schema: avroBad}); err != nil || res.Is {
		t.Fatalf("check bad: %+v %v", res, err)
	}
	if res, err := cl.CheckCompatibility(ctx, "users-value", -1, sr.Schema{Schema: avroV2}); err != nil || !res.Is {
		t.Fatalf("check good: %+v %v", res, err)
	}
	if res := cl.Compatibility(ctx); res[0].Err != nil || res[0].Level != sr.CompatBackward {
		t.Fatalf("global level %+v", res[0])
	}
	if res := cl.Compatibility(ctx, "users-value"); srCode(res[0].Err) != 40408 {
		t.Fatalf("subject level unset: %+v", res[0])
	}
	if res := cl.SetCompatibility(ctx, sr.SetCompatibility{Level: sr.CompatNone}, "users-value"); res[0].Err != nil || res[0].Level != sr.CompatNone {
		t.Fatalf("set level: %+v", res[0])
	}
	if res := cl.Compatibility(ctx, "users-value"); res[0].Err != nil || res[0].Level != sr.CompatNone {
		t.Fatalf("subject level: %+v", res[0])
	}
	if _, err := cl.CreateSchema(ctx, "users-value", sr.Schema{Schema: avroBad}); err != nil {
		t.Fatalf("NONE accepts anything: %v", err)
	}
	if res := cl.ResetCompatibility(ctx, "users-value"); res[0].Err != nil || res[0].Level != sr.CompatNone {
		t.Fatalf("reset level: %+v", res[0])
	}

	// Modes.
	if res := cl.Mode(ctx); res[0].Err != nil || res[0].Mode != sr.ModeReadWrite {
		t.Fatalf("global mode %+v", res[0])
	}
	if res := cl.SetMode(ctx, sr.ModeReadOnly, "copy-value"); res[0].Err != nil || res[0].Mode != sr.ModeReadOnly {
		t.Fatalf("set mode %+v", res[0])
	}
	if _, err := cl.CreateSchema(ctx, "copy-value", sr.Schema{Schema: avroV2}); srCode(err) != 42205 {
		t.Fatalf("register in READONLY: %v", err)
	}
	if res := cl.ResetMode(ctx, "copy-value"); res[0].Err != nil {
		t.Fatalf("reset mode %+v", res[0])
	}
	if res := cl.Mode(ctx, "copy-value"); srCode(res[0].Err) != 40409 {
		t.Fatalf("subject mode unset: %+v", res[0])
	}

	// Deletes.
	if err := cl.DeleteSchema(ctx, "users-value", 3, sr.HardDelete); srCode(err) != 40407 {
		t.Fatalf("hard delete before soft: %v", err)
	}
	if err := cl.DeleteSchema(ctx, "users-value", 3, sr.SoftDelete); err != nil {
		t.Fatal(err)
	}
	if err := cl.DeleteSchema(ctx, "users-value", 3, sr.SoftDelete); srCode(err) != 40406 {
		t.Fatalf("soft delete twice: %v", err)
	}
	if err := cl.DeleteSchema(ctx, "users-value", 3, sr.HardDelete); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.DeleteSubject(ctx, "copy-value", sr.HardDelete); srCode(err) != 40405 {
		t.Fatalf("hard delete subject before soft: %v", err)
	}
	if vs, err := cl.DeleteSubject(ctx, "copy-value", sr.SoftDelete); err != nil || !slices.Equal(vs, []int{1}) {
		t.Fatalf("soft delete subject: %v %v", vs, err)
	}
	if _, err := cl.DeleteSubject(ctx, "copy-value", sr.SoftDelete); srCode(err) != 40404 {
		t.Fatalf("soft delete subject twice: %v", err)
	}
	if vs, err := cl.SubjectVersions(sr.WithParams(ctx, sr.ShowDeleted), "copy-value"); err != nil || !slices.Equal(vs, []int{1}) {
		t.Fatalf("versions with deleted: %v %v", vs, err)
	}
	if vs, err := cl.DeleteSubject(ctx, "copy-value", sr.HardDelete); err != nil || !slices.Equal(vs, []int{1}) {
		t.Fatalf("hard delete subject: %v %v", vs, err)
	}
	if _, err := cl.SubjectVersions(ctx, "copy-value"); srCode(err) != 40401 {
		t.Fatalf("deleted subject: %v", err)
	}

	// References (Avro: a named type of another subject).
	if _, err := cl.CreateSchema(ctx, "address", sr.Schema{Schema: `{"type":"record","name":"Address","fields":[{"name":"city","type":"string"}]}`}); err != nil {
		t.Fatal(err)
	}
	withRef := sr.Schema{Schema: `{"type":"record","name":"Person","fields":[{"name":"name","type":"string"}]}`,
		References: []sr.SchemaReference{{Name: "Address", Subject: "address", Version: 1}}}
	person, err := cl.CreateSchema(ctx, "person-value", withRef)
	if err != nil || len(person.References) != 1 {
		t.Fatalf("register with a reference: %+v %v", person, err)
	}
	if refs, err := cl.SchemaReferences(ctx, "address", 1); err != nil || len(refs) != 1 || refs[0].ID != person.ID {
		t.Fatalf("referenced by: %+v %v", refs, err)
	}
	if err := cl.DeleteSchema(ctx, "address", 1, sr.SoftDelete); srCode(err) != 42206 {
		t.Fatalf("delete a referenced version: %v", err)
	}
	if _, err := cl.CreateSchema(ctx, "dangling-value", sr.Schema{Schema: avroV1, References: []sr.SchemaReference{{Name: "X", Subject: "nope", Version: 1}}}); srCode(err) != 42201 {
		t.Fatalf("a reference to nothing: %v", err)
	}

	// JSON Schema and Protobuf, a Protobuf import as a reference.
	js := `{"type":"object","properties":{"n":{"type":"string"}}}`
	jsID, err := cl.CreateSchema(ctx, "j-value", sr.Schema{Schema: js, Type: sr.TypeJSON})
	if err != nil {
		t.Fatal(err)
	}
	if s, err := cl.SchemaByID(ctx, jsID.ID); err != nil || s.Type != sr.TypeJSON || s.Schema != js {
		t.Fatalf("JSON schema by id: %+v %v", s, err)
	}
	if _, err := cl.CreateSchema(ctx, "j-value", sr.Schema{Schema: `{"type":"object","properties":{"n":{"type":"integer"}}}`, Type: sr.TypeJSON}); srCode(err) != 409 {
		t.Fatalf("incompatible JSON schema: %v", err)
	}
	if _, err := cl.CreateSchema(ctx, "geo.proto", sr.Schema{Schema: `syntax = "proto3"; package acme; message Geo { double lat = 1; }`, Type: sr.TypeProtobuf}); err != nil {
		t.Fatal(err)
	}
	proto := `syntax = "proto3"; package acme; import "acme/geo.proto"; message Place { string name = 1; Geo geo = 2; }`
	place, err := cl.CreateSchema(ctx, "place-value", sr.Schema{Schema: proto, Type: sr.TypeProtobuf,
		References: []sr.SchemaReference{{Name: "acme/geo.proto", Subject: "geo.proto", Version: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	if txt, err := cl.SchemaTextByID(ctx, place.ID); err != nil || txt != proto {
		t.Fatalf("proto text by id: %q %v", txt, err)
	}
	if s, err := cl.SchemaByVersion(ctx, "place-value", 1); err != nil || s.Type != sr.TypeProtobuf || len(s.References) != 1 {
		t.Fatalf("proto by version: %+v %v", s, err)
	}
}

// call makes a raw request and returns the status and the decoded body.
func call(t *testing.T, method, url, body string, hdr ...string) (int, map[string]any, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/vnd.schemaregistry.v1+json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if ct := res.Header.Get("Content-Type"); ct != srContentType {
		t.Errorf("%s %s: Content-Type %q", method, url, ct)
	}
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	return res.StatusCode, m, string(raw)
}

func TestRegistryErrorCodes(t *testing.T) {
	srv, _ := registryServer(t, Options{})
	u := srv.URL
	reg := func(subject, schema string) string {
		b, _ := json.Marshal(map[string]string{"schema": schema})
		return string(b)
	}
	if code, _, raw := call(t, "POST", u+"/subjects/s-value/versions", reg("s-value", avroV1)); code != 200 || strings.TrimSpace(raw) != `{"id":1}` {
		t.Fatalf("register: %d %s", code, raw)
	}
	for _, c := range []struct {
		method, path, body string
		status, code       int
	}{
		{"GET", "/subjects/nope/versions", "", 404, 40401},
		{"GET", "/subjects/nope/versions/1", "", 404, 40401},
		{"GET", "/subjects/s-value/versions/7", "", 404, 40402},
		{"GET", "/schemas/ids/42", "", 404, 40403},
		{"GET", "/schemas/ids/abc", "", 404, 40403},
		{"GET", "/subjects/s-value/versions/abc", "", 422, 42202},
		{"GET", "/subjects/s-value/versions/0", "", 422, 42202},
		{"POST", "/subjects/s-value", reg("", avroV2), 404, 40403},
		{"POST", "/subjects/nope", reg("", avroV2), 404, 40401},
		{"POST", "/subjects/s-value/versions", reg("", avroBad[:30]), 422, 42201},
		{"POST", "/subjects/s-value/versions", `{"schema": 12}`, 422, 42201},
		{"POST", "/subjects/s-value/versions", `{not json`, 422, 42201},
		{"POST", "/subjects/s-value/versions", ``, 422, 42201},
		{"POST", "/subjects/s-value/versions", `{"schema":"\"string\"","schemaType":"XML"}`, 422, 42201},
		{"POST", "/subjects/s-value/versions", reg("", `{"type":"record","name":"User","fields":[{"name":"n","type":"int"}]}`), 409, 409},
		{"POST", "/subjects/s-value/versions", `{"schema":"\"string\"","id":7}`, 422, 42205},
		{"PUT", "/config", `{"compatibility":"SIDEWAYS"}`, 422, 42203},
		{"PUT", "/mode", `{"mode":"SIDEWAYS"}`, 422, 42204},
		{"PUT", "/mode", `{"mode":"IMPORT"}`, 422, 42205},
		{"GET", "/config/s-value", "", 404, 40408},
		{"DELETE", "/config/s-value", "", 404, 40408},
		{"GET", "/mode/s-value", "", 404, 40409},
		{"DELETE", "/subjects/s-value/versions/1?permanent=true", "", 404, 40407},
		{"DELETE", "/subjects/s-value?permanent=true", "", 404, 40405},
		{"GET", "/no/such/route", "", 404, 404},
		{"POST", "/subjects/s-value/versions", `{"schema":"` + strings.Repeat("x", registryMaxBody) + `"}`, 413, 413},
	} {
		code, body, raw := call(t, c.method, u+c.path, c.body)
		if code != c.status || body["error_code"] != float64(c.code) || body["message"] == "" {
			t.Errorf("%s %s: %d %s, want %d with error_code %d", c.method, c.path, code, raw, c.status, c.code)
		}
	}
	// Soft deletes twice, and a soft-deleted version still found with
	// ?deleted=true.
	if code, _, raw := call(t, "DELETE", u+"/subjects/s-value/versions/1", ""); code != 200 || strings.TrimSpace(raw) != "1" {
		t.Fatalf("soft delete version: %d %s", code, raw)
	}
	if code, body, _ := call(t, "DELETE", u+"/subjects/s-value/versions/1", ""); code != 404 || body["error_code"] != float64(40406) {
		t.Errorf("soft delete twice: %d %v", code, body)
	}
	if code, body, _ := call(t, "GET", u+"/subjects/s-value/versions/1?deleted=true", ""); code != 200 || body["id"] != float64(1) {
		t.Errorf("soft-deleted version with deleted=true: %d %v", code, body)
	}
	if code, body, _ := call(t, "DELETE", u+"/subjects/s-value", ""); code != 404 || body["error_code"] != float64(40404) {
		t.Errorf("soft delete of a subject without live versions: %d %v", code, body)
	}
	// Config and mode answers.
	if code, _, raw := call(t, "PUT", u+"/config", `{"compatibility":"full"}`); code != 200 || strings.TrimSpace(raw) != `{"compatibility":"FULL"}` {
		t.Errorf("put config: %d %s", code, raw)
	}
	if code, _, raw := call(t, "GET", u+"/config", ""); code != 200 || strings.TrimSpace(raw) != `{"compatibilityLevel":"FULL"}` {
		t.Errorf("get config: %d %s", code, raw)
	}
	if code, _, raw := call(t, "GET", u+"/config/s-value?defaultToGlobal=true", ""); code != 200 || strings.TrimSpace(raw) != `{"compatibilityLevel":"FULL"}` {
		t.Errorf("get subject config with defaultToGlobal: %d %s", code, raw)
	}
	if code, _, raw := call(t, "GET", u+"/", ""); code != 200 || strings.TrimSpace(raw) != `{}` {
		t.Errorf("root: %d %s", code, raw)
	}
	if code, _, raw := call(t, "POST", u+"/compatibility/subjects/s-value/versions?verbose=true", reg("", avroV1)); code != 200 || !strings.Contains(raw, `"is_compatible":true`) || !strings.Contains(raw, `"messages":[]`) {
		t.Errorf("verbose check: %d %s", code, raw)
	}
}

// TestRegistryACLs: with ACLs on, a user with READ on topic "a" only may
// read "a-value" but not register into it, does not see "b-value", and
// does not learn b's schema by id.
func TestRegistryACLs(t *testing.T) {
	rd := testbed.StartRedis(t)
	rc, err := resp.New(rd.URL, resp.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rc.Close() })
	ctx := context.Background()
	users, err := auth.Open(ctx, rc, auth.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"reader", "admin"} {
		if _, err := users.AddUserIfAbsent(ctx, u, u+"-password", 4096); err != nil {
			t.Fatal(err)
		}
	}
	if err := users.CreateACLs(ctx, []auth.ACL{{Principal: "User:reader", Host: "*", ResourceType: auth.ResTopic, Pattern: auth.PatternLiteral,
		Resource: "a", Operation: auth.OpRead, Permission: auth.PermAllow}}); err != nil {
		t.Fatal(err)
	}
	reg, err := registry.Open(ctx, rc, registry.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(NewRegistry(reg, Options{Logger: quiet, Login: LoginBasic, Passwords: users,
		Policy: &auth.Policy{Store: users, ACLs: true, SuperUsers: []string{"User:admin"}}}))
	t.Cleanup(srv.Close)

	admin := srClient(t, srv.URL, sr.BasicAuth("admin", "admin-password"))
	reader := srClient(t, srv.URL, sr.BasicAuth("reader", "reader-password"))
	a, err := admin.CreateSchema(ctx, "a-value", sr.Schema{Schema: avroV1})
	if err != nil {
		t.Fatal(err)
	}
	b, err := admin.CreateSchema(ctx, "b-value", sr.Schema{Schema: `{"type":"record","name":"B","fields":[{"name":"x","type":"long"}]}`})
	if err != nil {
		t.Fatal(err)
	}

	_, err = reader.CreateSchema(ctx, "a-value", sr.Schema{Schema: avroV2})
	var re *sr.ResponseError
	if !errors.As(err, &re) || re.StatusCode != 403 || re.ErrorCode != 40301 || !strings.Contains(re.Message, "User:reader") {
		t.Fatalf("reader registers: %v, want 403/40301", err)
	}
	if s, err := reader.SchemaByVersion(ctx, "a-value", -1); err != nil || s.ID != a.ID {
		t.Fatalf("reader reads a-value: %+v %v", s, err)
	}
	if s, err := reader.SchemaByID(ctx, a.ID); err != nil || s.Schema != avroV1 {
		t.Fatalf("reader reads a's id: %v", err)
	}
	if subs, err := reader.Subjects(ctx); err != nil || !slices.Equal(subs, []string{"a-value"}) {
		t.Fatalf("reader's subjects %v %v", subs, err)
	}
	if _, err := reader.SchemaByID(ctx, b.ID); srCode(err) != 40403 {
		t.Fatalf("reader reads b's id: %v, want 40403", err)
	}
	if _, err := reader.SchemaByVersion(ctx, "b-value", 1); srCode(err) != 40301 {
		t.Fatalf("reader reads b-value: %v, want 40301", err)
	}
	if all, err := reader.AllSchemas(ctx); err != nil || len(all) != 1 {
		t.Fatalf("reader's schemas %v %v", all, err)
	}
	if res := reader.SetCompatibility(ctx, sr.SetCompatibility{Level: sr.CompatNone}); srCode(res[0].Err) != 40301 {
		t.Fatalf("reader sets the global level: %v", res[0].Err)
	}
	if res := reader.Compatibility(ctx); res[0].Err != nil {
		t.Fatalf("reader reads the global level: %v", res[0].Err)
	}
	if res := admin.SetCompatibility(ctx, sr.SetCompatibility{Level: sr.CompatNone}); res[0].Err != nil {
		t.Fatalf("super user sets the global level: %v", res[0].Err)
	}
	// Logins: none, or a wrong password, is 401 in Confluent's shape.
	if code, body, _ := call(t, "GET", srv.URL+"/subjects", ""); code != 401 || body["error_code"] != float64(401) {
		t.Fatalf("anonymous: %d %v", code, body)
	}
	bad := srClient(t, srv.URL, sr.BasicAuth("reader", "wrong"))
	if _, err := bad.Subjects(ctx); srCode(err) != 401 {
		t.Fatalf("wrong password: %v", err)
	}
}
