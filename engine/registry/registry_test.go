package registry

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/korvet/korvet/engine/keys"
	"github.com/korvet/korvet/engine/schema"
	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/resp"
)

func open(t *testing.T, url string) *Registry {
	t.Helper()
	rc, err := resp.New(url, resp.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rc.Close() })
	r, err := Open(context.Background(), rc, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// avroRecord is an Avro record schema named name with the given fields
// (each a JSON field object).
func avroRecord(name string, fields ...string) schema.Source {
	fs := ""
	for i, f := range fields {
		if i > 0 {
			fs += ","
		}
		fs += f
	}
	return schema.Source{Format: schema.Avro, Text: `{"type":"record","name":"` + name + `","fields":[` + fs + `]}`}
}

const (
	fA        = `{"name":"a","type":"string"}`
	fBDefault = `{"name":"b","type":"int","default":0}`
	fBNoDef   = `{"name":"b","type":"int"}`
)

func wantCode(t *testing.T, err error, code int) {
	t.Helper()
	e, ok := AsError(err)
	if !ok || e.Code != code {
		t.Fatalf("error %v, want code %d", err, code)
	}
}

func TestRegisterIdempotentAndShared(t *testing.T) {
	rd := testbed.StartRedis(t)
	r := open(t, rd.URL)
	ctx := context.Background()
	v1 := avroRecord("R", fA)
	id, ver, err := r.Register(ctx, "a-value", v1, RegisterOptions{})
	if err != nil || id != 1 || ver != 1 {
		t.Fatalf("register: id %d version %d %v, want 1 1", id, ver, err)
	}
	// The same schema, written differently (whitespace): the same version.
	same := v1
	same.Text = "  " + v1.Text + "\n"
	if id2, ver2, err := r.Register(ctx, "a-value", same, RegisterOptions{}); err != nil || id2 != 1 || ver2 != 1 {
		t.Fatalf("again: id %d version %d %v, want 1 1", id2, ver2, err)
	}
	// The same schema in another subject: the same id, that subject's v1.
	if id3, ver3, err := r.Register(ctx, "b-value", v1, RegisterOptions{}); err != nil || id3 != 1 || ver3 != 1 {
		t.Fatalf("other subject: id %d version %d %v, want 1 1", id3, ver3, err)
	}
	// A compatible evolution: a new id, version 2.
	v2 := avroRecord("R", fA, fBDefault)
	if id4, ver4, err := r.Register(ctx, "a-value", v2, RegisterOptions{}); err != nil || id4 != 2 || ver4 != 2 {
		t.Fatalf("evolve: id %d version %d %v, want 2 2", id4, ver4, err)
	}
	// A field without a default cannot be read from old data: BACKWARD refuses.
	_, _, err = r.Register(ctx, "a-value", avroRecord("R", fA, fBDefault, `{"name":"c","type":"int"}`), RegisterOptions{})
	wantCode(t, err, CodeIncompatible)

	got, err := r.Version(ctx, "a-value", Latest, false)
	if err != nil || got.Version != 2 || got.ID != 2 || got.Source.Text != v2.Text {
		t.Fatalf("latest: %+v %v", got, err)
	}
	if src, err := r.Source(ctx, 1); err != nil || src.Text != v1.Text || src.Format != schema.Avro {
		t.Fatalf("schema 1: %+v %v", src, err)
	}
	_, err = r.Source(ctx, 99)
	wantCode(t, err, CodeSchemaNotFound)
	if us, err := r.Usages(ctx, 1, false); err != nil || !slices.Equal(us, []SubjectVersion{{"a-value", 1}, {"b-value", 1}}) {
		t.Fatalf("usages of 1: %v %v", us, err)
	}
	if l, err := r.Lookup(ctx, "b-value", same, false); err != nil || l.ID != 1 || l.Version != 1 {
		t.Fatalf("lookup: %+v %v", l, err)
	}
	_, err = r.Lookup(ctx, "b-value", v2, false)
	wantCode(t, err, CodeSchemaNotFound)
	_, err = r.Lookup(ctx, "nope", v2, false)
	wantCode(t, err, CodeSubjectNotFound)
	// Bad input: refused with clear errors.
	_, _, err = r.Register(ctx, "a-value", schema.Source{Text: "{not avro"}, RegisterOptions{})
	wantCode(t, err, CodeInvalidSchema)
	_, _, err = r.Register(ctx, "bad\x01subject", v1, RegisterOptions{})
	wantCode(t, err, CodeInvalidSubject)
	_, _, err = r.Register(ctx, string(make([]byte, 256)), v1, RegisterOptions{})
	wantCode(t, err, CodeInvalidSubject)
	_, _, err = r.Register(ctx, "x", schema.Source{Text: string(make([]byte, MaxSchemaBytes+1))}, RegisterOptions{})
	wantCode(t, err, CodeSchemaTooLarge)

	// Another Registry on the same Redis (a restart, another broker)
	// sees it all.
	r2 := open(t, rd.URL)
	if got, err := r2.Version(ctx, "a-value", 2, false); err != nil || got.ID != 2 {
		t.Fatalf("another registry: %+v %v", got, err)
	}
	if s, err := r2.SchemaByID(ctx, 2); err != nil || s.Source().Text != v2.Text {
		t.Fatalf("another registry's schema 2: %v", err)
	}
}

func TestDeleteRulesAndNumbering(t *testing.T) {
	r := open(t, testbed.StartRedis(t).URL)
	ctx := context.Background()
	s := "d-value"
	for i, src := range []schema.Source{avroRecord("R", fA), avroRecord("R", fA, fBDefault), avroRecord("R", fA, fBDefault, `{"name":"c","type":"int","default":1}`)} {
		if _, v, err := r.Register(ctx, s, src, RegisterOptions{}); err != nil || v != i+1 {
			t.Fatalf("register %d: version %d %v", i, v, err)
		}
	}
	_, err := r.DeleteVersion(ctx, s, 2, DeleteOptions{Permanent: true})
	wantCode(t, err, CodeVersionNotSoftDeleted)
	if v, err := r.DeleteVersion(ctx, s, 2, DeleteOptions{}); err != nil || v != 2 {
		t.Fatalf("soft delete: %d %v", v, err)
	}
	_, err = r.DeleteVersion(ctx, s, 2, DeleteOptions{})
	wantCode(t, err, CodeVersionSoftDeleted)
	_, err = r.Version(ctx, s, 2, false)
	wantCode(t, err, CodeVersionNotFound)
	if v, err := r.Version(ctx, s, 2, true); err != nil || !v.Deleted {
		t.Fatalf("soft-deleted version with deleted=true: %+v %v", v, err)
	}
	if vs, _ := r.Versions(ctx, s, false); !slices.Equal(vs, []int{1, 3}) {
		t.Fatalf("live versions %v, want [1 3]", vs)
	}
	if vs, _ := r.Versions(ctx, s, true); !slices.Equal(vs, []int{1, 2, 3}) {
		t.Fatalf("all versions %v, want [1 2 3]", vs)
	}
	// Numbering goes on past soft-deleted versions.
	if _, v, err := r.Register(ctx, s, avroRecord("R", fA, fBDefault, `{"name":"c","type":"int","default":1}`, `{"name":"d","type":"int","default":1}`), RegisterOptions{}); err != nil || v != 4 {
		t.Fatalf("register after soft delete: version %d %v, want 4", v, err)
	}
	if v, err := r.DeleteVersion(ctx, s, 2, DeleteOptions{Permanent: true}); err != nil || v != 2 {
		t.Fatalf("permanent delete: %d %v", v, err)
	}
	_, err = r.Version(ctx, s, 2, true)
	wantCode(t, err, CodeVersionNotFound)

	// Subjects: permanent only after soft; soft twice is 40404.
	_, err = r.DeleteSubject(ctx, s, DeleteOptions{Permanent: true})
	wantCode(t, err, CodeSubjectNotSoftDeleted)
	if vs, err := r.DeleteSubject(ctx, s, DeleteOptions{}); err != nil || !slices.Equal(vs, []int{1, 3, 4}) {
		t.Fatalf("soft delete subject: %v %v", vs, err)
	}
	_, err = r.DeleteSubject(ctx, s, DeleteOptions{})
	wantCode(t, err, CodeSubjectSoftDeleted)
	_, err = r.Versions(ctx, s, false)
	wantCode(t, err, CodeSubjectNotFound)
	if names, _ := r.SubjectNames(ctx, false); len(names) != 0 {
		t.Fatalf("live subjects %v after soft delete", names)
	}
	if names, _ := r.SubjectNames(ctx, true); !slices.Equal(names, []string{s}) {
		t.Fatalf("subjects with deleted %v", names)
	}
	// Registering into a soft-deleted subject continues its numbering.
	if _, v, err := r.Register(ctx, s, avroRecord("Other", fA), RegisterOptions{}); err != nil || v != 5 {
		t.Fatalf("register into soft-deleted subject: version %d %v, want 5", v, err)
	}
	if _, err := r.DeleteSubject(ctx, s, DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if vs, err := r.DeleteSubject(ctx, s, DeleteOptions{Permanent: true}); err != nil || !slices.Equal(vs, []int{1, 3, 4, 5}) {
		t.Fatalf("permanent delete subject: %v %v", vs, err)
	}
	_, err = r.DeleteSubject(ctx, s, DeleteOptions{})
	wantCode(t, err, CodeSubjectNotFound)
	// Gone for good: numbering starts over, ids stay what they were.
	if id, v, err := r.Register(ctx, s, avroRecord("R", fA), RegisterOptions{}); err != nil || v != 1 || id != 1 {
		t.Fatalf("register after permanent delete: id %d version %d %v, want 1 1", id, v, err)
	}
}

func TestConfigAndMode(t *testing.T) {
	r := open(t, testbed.StartRedis(t).URL)
	ctx := context.Background()
	if l, own, err := r.Level(ctx, "c-value"); err != nil || l != schema.Backward || own {
		t.Fatalf("default level %s %v %v", l, own, err)
	}
	_, err := r.SubjectLevel(ctx, "c-value")
	wantCode(t, err, CodeSubjectLevelNotFound)
	wantCode(t, r.SetLevel(ctx, "", "SIDEWAYS"), CodeInvalidLevel)
	if err := r.SetLevel(ctx, "", schema.Full); err != nil {
		t.Fatal(err)
	}
	if err := r.SetLevel(ctx, "c-value", schema.None); err != nil {
		t.Fatal(err)
	}
	if l, own, _ := r.Level(ctx, "c-value"); l != schema.None || !own {
		t.Fatalf("subject level %s %v", l, own)
	}
	if l, own, _ := r.Level(ctx, "other"); l != schema.Full || own {
		t.Fatalf("global level for other subject %s %v", l, own)
	}
	// NONE lets an incompatible schema in.
	if _, _, err := r.Register(ctx, "c-value", avroRecord("R", fA), RegisterOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, v, err := r.Register(ctx, "c-value", avroRecord("R", fBNoDef), RegisterOptions{}); err != nil || v != 2 {
		t.Fatalf("NONE: %d %v", v, err)
	}
	if l, err := r.DeleteLevel(ctx, "c-value"); err != nil || l != schema.None {
		t.Fatalf("delete level: %s %v", l, err)
	}
	_, err = r.DeleteLevel(ctx, "c-value")
	wantCode(t, err, CodeSubjectLevelNotFound)
	why, err := r.CheckCompatibility(ctx, "c-value", avroRecord("R", fA), Latest)
	if err != nil || len(why) == 0 {
		t.Fatalf("check against latest at FULL: %v %v, want reasons", why, err)
	}
	if why, err := r.CheckCompatibility(ctx, "empty-value", avroRecord("R", fA), Latest); err != nil || why != nil {
		t.Fatalf("check against an empty subject: %v %v", why, err)
	}
	_, err = r.CheckCompatibility(ctx, "c-value", avroRecord("R", fA), 9)
	wantCode(t, err, CodeVersionNotFound)

	// Modes.
	if m, _ := r.Mode(ctx, ""); m != ReadWrite {
		t.Fatalf("default mode %s", m)
	}
	wantCode(t, r.SetMode(ctx, "", "SIDEWAYS", false), CodeInvalidMode)
	if err := r.SetMode(ctx, "c-value", ReadOnly, false); err != nil {
		t.Fatal(err)
	}
	_, _, err = r.Register(ctx, "c-value", avroRecord("R2", fA), RegisterOptions{})
	wantCode(t, err, CodeOperationNotPermitted)
	_, err = r.DeleteVersion(ctx, "c-value", 1, DeleteOptions{})
	wantCode(t, err, CodeOperationNotPermitted)
	if m, err := r.DeleteMode(ctx, "c-value"); err != nil || m != ReadOnly {
		t.Fatalf("delete mode: %s %v", m, err)
	}
	_, err = r.SubjectMode(ctx, "c-value")
	wantCode(t, err, CodeSubjectModeNotFound)
	// READONLY_OVERRIDE reads as itself globally and beats a subject's own mode.
	if err := r.SetMode(ctx, "c-value", ReadWrite, false); err != nil {
		t.Fatal(err)
	}
	if err := r.SetMode(ctx, "", ReadOnlyOverride, false); err != nil {
		t.Fatal(err)
	}
	if g, _ := r.Mode(ctx, ""); g != ReadOnlyOverride {
		t.Fatalf("global mode %s, want READONLY_OVERRIDE", g)
	}
	_, _, err = r.Register(ctx, "c-value", avroRecord("R3", fA), RegisterOptions{})
	wantCode(t, err, CodeOperationNotPermitted)
	if _, err := r.DeleteMode(ctx, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := r.DeleteMode(ctx, "c-value"); err != nil {
		t.Fatal(err)
	}
	// Global IMPORT needs an empty registry, unless forced.
	wantCode(t, r.SetMode(ctx, "", Import, false), CodeOperationNotPermitted)
	if err := r.SetMode(ctx, "", Import, true); err != nil {
		t.Fatal(err)
	}
	id, v, err := r.Register(ctx, "imp-value", avroRecord("Imp", fA), RegisterOptions{ID: 100, Version: 7})
	if err != nil || id != 100 || v != 7 {
		t.Fatalf("import: id %d version %d %v, want 100 7", id, v, err)
	}
	// An id that names another schema is refused.
	_, _, err = r.Register(ctx, "imp2-value", avroRecord("Imp2", fA), RegisterOptions{ID: 100})
	wantCode(t, err, CodeOperationNotPermitted)
	if err := r.SetMode(ctx, "", ReadWrite, false); err != nil {
		t.Fatal(err)
	}
	// New ids continue above the imported one.
	if id, _, err := r.Register(ctx, "after-value", avroRecord("After", fA), RegisterOptions{}); err != nil || id != 101 {
		t.Fatalf("id after import: %d %v, want 101", id, err)
	}
	_, _, err = r.Register(ctx, "x-value", avroRecord("X", fA), RegisterOptions{ID: 5})
	wantCode(t, err, CodeOperationNotPermitted)
	// A permanent subject delete drops its config.
	if err := r.SetLevel(ctx, "after-value", schema.None); err != nil {
		t.Fatal(err)
	}
	if _, err := r.DeleteSubject(ctx, "after-value", DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.DeleteSubject(ctx, "after-value", DeleteOptions{Permanent: true}); err != nil {
		t.Fatal(err)
	}
	_, err = r.SubjectLevel(ctx, "after-value")
	wantCode(t, err, CodeSubjectLevelNotFound)

	infos, err := r.Subjects(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, in := range infos {
		names = append(names, in.Subject)
	}
	if !slices.Equal(names, []string{"c-value", "imp-value"}) || infos[0].Level != schema.Full || infos[0].LevelOwn || infos[0].LatestVersion != 2 || infos[0].Format != schema.Avro {
		t.Fatalf("status subjects %+v", infos)
	}
}

func TestAvroReferences(t *testing.T) {
	r := open(t, testbed.StartRedis(t).URL)
	ctx := context.Background()
	// A reference to a version that does not exist is an invalid schema.
	withRef := schema.Source{Format: schema.Avro, Text: `{"type":"record","name":"Outer","fields":[{"name":"x","type":"string"}]}`,
		References: []schema.Reference{{Name: "Inner", Subject: "inner", Version: 1}}}
	_, _, err := r.Register(ctx, "outer-value", withRef, RegisterOptions{})
	wantCode(t, err, CodeInvalidSchema)
	if _, _, err := r.Register(ctx, "inner", avroRecord("Inner", fA), RegisterOptions{}); err != nil {
		t.Fatal(err)
	}
	id, _, err := r.Register(ctx, "outer-value", withRef, RegisterOptions{})
	if err != nil {
		t.Fatalf("register with a reference: %v", err)
	}
	if by, err := r.ReferencedBy(ctx, "inner", 1); err != nil || !slices.Equal(by, []int32{id}) {
		t.Fatalf("referenced by: %v %v", by, err)
	}
	// A referenced version cannot be deleted, softly or for good.
	_, err = r.DeleteVersion(ctx, "inner", 1, DeleteOptions{})
	wantCode(t, err, CodeReferenceExists)
	_, err = r.DeleteSubject(ctx, "inner", DeleteOptions{})
	wantCode(t, err, CodeReferenceExists)
	// Once the referencing version is gone, it can.
	if _, err := r.DeleteVersion(ctx, "outer-value", 1, DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.DeleteVersion(ctx, "inner", 1, DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.DeleteVersion(ctx, "inner", 1, DeleteOptions{Permanent: true}); err != nil {
		t.Fatal(err)
	}
}

// TestConcurrentRegistration registers from two Registry instances (two
// connections, as two brokers) at once: the same schema from everyone,
// and schemas of their own into shared subjects. Every schema ends with
// one id, every subject's versions are dense, and nothing is lost.
func TestConcurrentRegistration(t *testing.T) {
	rd := testbed.StartRedis(t)
	regs := []*Registry{open(t, rd.URL), open(t, rd.URL)}
	ctx := context.Background()
	for _, r := range regs {
		if err := r.SetLevel(ctx, "", schema.None); err != nil {
			t.Fatal(err)
		}
	}
	const workers, each = 8, 6
	type result struct {
		subject string
		src     string
		id      int32
		version int
	}
	var mu sync.Mutex
	var results []result
	var wg sync.WaitGroup
	errs := make(chan error, workers*each*2)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := regs[w%2]
			for i := range each {
				shared := avroRecord("Shared", fA)
				own := avroRecord(fmt.Sprintf("W%dI%d", w, i), fA)
				subject := fmt.Sprintf("s%d", i%3)
				for _, src := range []schema.Source{shared, own} {
					id, v, err := r.Register(ctx, subject, src, RegisterOptions{})
					if err != nil {
						errs <- err
						return
					}
					mu.Lock()
					results = append(results, result{subject, src.Text, id, v})
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	idOf := map[string]int32{}
	srcOf := map[int32]string{}
	for _, res := range results {
		if id, ok := idOf[res.src]; ok && id != res.id {
			t.Errorf("schema %s got ids %d and %d", res.src, id, res.id)
		}
		if s, ok := srcOf[res.id]; ok && s != res.src {
			t.Errorf("id %d names %s and %s", res.id, s, res.src)
		}
		idOf[res.src], srcOf[res.id] = res.id, res.src
	}
	if len(idOf) != 1+workers*each {
		t.Errorf("%d distinct schemas, want %d", len(idOf), 1+workers*each)
	}
	total := 0
	for i := range 3 {
		subject := fmt.Sprintf("s%d", i)
		vs, err := regs[0].Versions(ctx, subject, true)
		if err != nil {
			t.Fatal(err)
		}
		for j, v := range vs {
			if v != j+1 {
				t.Fatalf("%s versions %v: not dense", subject, vs)
			}
		}
		total += len(vs)
		// Every registration's version holds its schema.
		for _, res := range results {
			if res.subject != subject {
				continue
			}
			got, err := regs[1].Version(ctx, subject, res.version, false)
			if err != nil || got.ID != res.id {
				t.Errorf("%s version %d: %+v %v, want id %d", subject, res.version, got, err, res.id)
			}
		}
	}
	// Each subject holds the shared schema once and every own schema.
	if want := 3 + workers*each; total != want {
		t.Errorf("%d versions in all, want %d", total, want)
	}
}

// TestClusterLayoutOneSlot: on a Redis Cluster every registry key hashes
// to one slot, so that one script can touch them all.
func TestClusterLayoutOneSlot(t *testing.T) {
	k := keys.New("korvet", true)
	slot := resp.Slot(k.Subjects())
	for _, key := range []string{k.Schemas(), k.SchemaIDs(), k.SchemaConfig()} {
		if resp.Slot(key) != slot {
			t.Errorf("%s is in slot %d, %s in %d", key, resp.Slot(key), k.Subjects(), slot)
		}
	}
}

// TestFormatsAndReferences registers Avro, JSON Schema and Protobuf
// schemas that reference a schema that references another (resolved from
// Redis), refuses incompatible changes in each format, and keeps
// referenced versions from being deleted.
func TestFormatsAndReferences(t *testing.T) {
	r := open(t, testbed.StartRedis(t).URL)
	ctx := context.Background()
	type chain struct {
		format                schema.Format
		geo, addr, order, bad string
		geoRef, addrRef       string
	}
	for _, c := range []chain{
		{schema.Avro,
			`{"type":"record","name":"Geo","namespace":"com.acme","fields":[{"name":"lat","type":"double"}]}`,
			`{"type":"record","name":"Address","namespace":"com.acme","fields":[{"name":"street","type":"string"},{"name":"geo","type":"com.acme.Geo"}]}`,
			`{"type":"record","name":"Order","namespace":"com.acme","fields":[{"name":"to","type":"com.acme.Address"}]}`,
			`{"type":"record","name":"Order","namespace":"com.acme","fields":[{"name":"to","type":"string"}]}`,
			"com.acme.Geo", "com.acme.Address"},
		{schema.JSON,
			`{"type":"object","properties":{"lat":{"type":"number"}}}`,
			`{"type":"object","properties":{"street":{"type":"string"},"geo":{"$ref":"geo.json"}},"required":["street"]}`,
			`{"type":"object","properties":{"to":{"$ref":"address.json"},"n":{"type":"string"}}}`,
			`{"type":"object","properties":{"to":{"$ref":"address.json"},"n":{"type":"number"}}}`,
			"geo.json", "address.json"},
		{schema.Protobuf,
			`syntax = "proto3"; package acme; message Geo { double lat = 1; }`,
			`syntax = "proto3"; package acme; import "acme/geo.proto"; message Address { string street = 1; Geo geo = 2; }`,
			`syntax = "proto3"; package acme; import "acme/address.proto"; message Order { Address to = 1; string n = 2; }`,
			`syntax = "proto3"; package acme; import "acme/address.proto"; message Order { Address to = 1; int64 n = 2; }`,
			"acme/geo.proto", "acme/address.proto"},
	} {
		p := strings.ToLower(string(c.format)) + "-"
		if _, _, err := r.Register(ctx, p+"geo", schema.Source{Format: c.format, Text: c.geo}, RegisterOptions{}); err != nil {
			t.Fatalf("%s geo: %v", c.format, err)
		}
		addr := schema.Source{Format: c.format, Text: c.addr, References: []schema.Reference{{Name: c.geoRef, Subject: p + "geo", Version: 1}}}
		if _, _, err := r.Register(ctx, p+"address", addr, RegisterOptions{}); err != nil {
			t.Fatalf("%s address: %v", c.format, err)
		}
		order := schema.Source{Format: c.format, Text: c.order, References: []schema.Reference{{Name: c.addrRef, Subject: p + "address", Version: 1}}}
		id, v, err := r.Register(ctx, p+"order-value", order, RegisterOptions{})
		if err != nil || v != 1 {
			t.Fatalf("%s order: %d %v", c.format, v, err)
		}
		if again, _, err := r.Register(ctx, p+"order-value", order, RegisterOptions{}); err != nil || again != id {
			t.Fatalf("%s order again: id %d %v, want %d", c.format, again, err, id)
		}
		s, err := r.SchemaByID(ctx, id)
		if err != nil || s.Format() != c.format || len(s.Source().References) != 1 {
			t.Fatalf("%s order by id: %v", c.format, err)
		}
		bad := order
		bad.Text = c.bad
		_, _, err = r.Register(ctx, p+"order-value", bad, RegisterOptions{})
		wantCode(t, err, CodeIncompatible)
		if by, err := r.ReferencedBy(ctx, p+"geo", 1); err != nil || len(by) != 1 {
			t.Fatalf("%s geo referenced by %v %v", c.format, by, err)
		}
		_, err = r.DeleteVersion(ctx, p+"address", 1, DeleteOptions{})
		wantCode(t, err, CodeReferenceExists)
		// A reference by the wrong name leaves the $ref or import
		// unresolved. (Avro reference names are labels, as in Confluent's
		// registry: the referenced schema's types count whatever the name.)
		if c.format != schema.Avro {
			wrong := order
			wrong.References = []schema.Reference{{Name: "nope", Subject: p + "address", Version: 1}}
			_, _, err = r.Register(ctx, p+"wrong-value", wrong, RegisterOptions{})
			wantCode(t, err, CodeInvalidSchema)
		}
	}
	// Another format in the same subject is incompatible.
	_, _, err := r.Register(ctx, "avro-geo", schema.Source{Format: schema.JSON, Text: `{"type":"object"}`}, RegisterOptions{})
	wantCode(t, err, CodeIncompatible)
}

// TestRegistryOnRedisCluster: on a real Redis Cluster the registry's keys
// share one slot, so its scripts run; two registries (two brokers) see
// the same registrations, references included.
func TestRegistryOnRedisCluster(t *testing.T) {
	c := testbed.StartRedisCluster(t, 3, 0)
	ctx := context.Background()
	var regs []*Registry
	for range 2 {
		rc, err := resp.New(c.URL, resp.Options{Cluster: true, Seeds: c.Seeds})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rc.Close() })
		r, err := Open(ctx, rc, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		regs = append(regs, r)
	}
	if _, _, err := regs[0].Register(ctx, "inner", avroRecord("Inner", fA), RegisterOptions{}); err != nil {
		t.Fatal(err)
	}
	outer := schema.Source{Format: schema.Avro, Text: `{"type":"record","name":"Outer","fields":[{"name":"in","type":"Inner"}]}`,
		References: []schema.Reference{{Name: "Inner", Subject: "inner", Version: 1}}}
	id, _, err := regs[1].Register(ctx, "outer-value", outer, RegisterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := regs[1].SetLevel(ctx, "outer-value", schema.Full); err != nil {
		t.Fatal(err)
	}
	if got, err := regs[0].Version(ctx, "outer-value", Latest, false); err != nil || got.ID != id {
		t.Fatalf("the other registry: %+v %v", got, err)
	}
	_, err = regs[0].DeleteVersion(ctx, "inner", 1, DeleteOptions{})
	wantCode(t, err, CodeReferenceExists)
	k := keys.New(keys.Default, true)
	home := c.MasterOf(t, k.Subjects())
	for _, key := range []string{k.Schemas(), k.SchemaIDs(), k.SchemaConfig()} {
		if m := c.MasterOf(t, key); m != home {
			t.Errorf("%s lives on %s, %s on %s", key, m.Addr, k.Subjects(), home.Addr)
		}
	}
}

// TestValueTyped reads a topic's value subject, soft-deleted versions
// included; a topic without one has no typed columns.
func TestValueTyped(t *testing.T) {
	r := open(t, testbed.StartRedis(t).URL)
	ctx := context.Background()
	if typed, err := r.ValueTyped(ctx, "plain"); err != nil || typed != nil {
		t.Fatalf("no subject: %v %v, want nil", typed, err)
	}
	for _, src := range []schema.Source{avroRecord("R", fA), avroRecord("R", fA, fBDefault)} {
		if _, _, err := r.Register(ctx, "orders-value", src, RegisterOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.DeleteVersion(ctx, "orders-value", 1, DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.ValueTyped(ctx, "orders"); err != nil {
		t.Fatalf("typed columns of orders: %v", err)
	}
}
