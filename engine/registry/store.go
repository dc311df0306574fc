package registry

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"slices"
	"strconv"
	"unicode"
	"unicode/utf8"

	"github.com/korvet/korvet/engine/schema"
	"github.com/korvet/korvet/resp"
)

// subjectState is a subject's field in the Subjects hash: every version
// not permanently deleted, by version number.
type subjectState struct {
	Versions []versionEntry `json:"versions"`
}

type versionEntry struct {
	Version int   `json:"version"`
	ID      int32 `json:"id"`
	Deleted bool  `json:"deleted,omitempty"`
}

// live returns the versions not soft-deleted, oldest first.
func (st *subjectState) live() []versionEntry {
	if st == nil {
		return nil
	}
	var out []versionEntry
	for _, v := range st.Versions {
		if !v.Deleted {
			out = append(out, v)
		}
	}
	return out
}

// find returns the index of version v, or -1.
func (st *subjectState) find(v int) int {
	if st == nil {
		return -1
	}
	return slices.IndexFunc(st.Versions, func(e versionEntry) bool { return e.Version == v })
}

// maxVersion is the highest version number stored (soft-deleted ones
// included), 0 for none.
func (st *subjectState) maxVersion() int {
	m := 0
	if st != nil {
		for _, v := range st.Versions {
			m = max(m, v.Version)
		}
	}
	return m
}

// checkSubject refuses subject names Confluent clients cannot round-trip
// or that would confuse logs: empty, longer than MaxSubjectBytes, not
// UTF-8, or holding control characters.
func checkSubject(subject string) error {
	switch {
	case subject == "":
		return unprocessable(CodeInvalidSubject, "Invalid subject: empty")
	case len(subject) > MaxSubjectBytes:
		return unprocessable(CodeInvalidSubject, "Invalid subject: %d bytes, at most %d", len(subject), MaxSubjectBytes)
	case !utf8.ValidString(subject):
		return unprocessable(CodeInvalidSubject, "Invalid subject: not valid UTF-8")
	}
	for _, c := range subject {
		if unicode.IsControl(c) {
			return unprocessable(CodeInvalidSubject, "Invalid subject %q: control characters are not allowed", subject)
		}
	}
	return nil
}

// checkSource bounds a schema a client sends before it is parsed.
func checkSource(src schema.Source) error {
	if len(src.Text) > MaxSchemaBytes {
		return unprocessable(CodeSchemaTooLarge, "Schema too large: %d bytes, at most %d", len(src.Text), MaxSchemaBytes)
	}
	if len(src.References) > MaxReferences {
		return unprocessable(CodeInvalidSchema, "Invalid schema: %d references, at most %d", len(src.References), MaxReferences)
	}
	if src.Text == "" {
		return unprocessable(CodeInvalidSchema, "Invalid schema: empty")
	}
	for _, ref := range src.References {
		if err := checkSubject(ref.Subject); err != nil {
			return unprocessable(CodeInvalidSchema, "Invalid schema: reference %q: %v", ref.Name, err)
		}
		if ref.Name == "" || ref.Version < 1 {
			return unprocessable(CodeInvalidSchema, "Invalid schema: reference %q to %s version %d: a reference needs a name and a version >= 1", ref.Name, ref.Subject, ref.Version)
		}
	}
	return nil
}

// fingerprint identifies a schema across subjects: the same format,
// canonical text and references are the same schema, with one id.
func fingerprint(s schema.Schema) string {
	refs, _ := json.Marshal(s.Source().References)
	h := sha256.New()
	h.Write([]byte(s.Format()))
	h.Write([]byte{0})
	h.Write([]byte(s.Canonical()))
	h.Write([]byte{0})
	h.Write(refs)
	return hex.EncodeToString(h.Sum(nil))
}

// subject reads a subject's state and its raw JSON (for the
// compare-and-set); nil, "" when the subject does not exist.
func (r *Registry) subject(ctx context.Context, subject string) (*subjectState, string, error) {
	v, err := r.do(ctx, "HGET", r.k.Subjects(), subject)
	if err != nil {
		return nil, "", fmt.Errorf("read subject %q: %w", subject, err)
	}
	if v.IsNil() {
		return nil, "", nil
	}
	raw := string(v.Bytes())
	var st subjectState
	if err := json.Unmarshal(v.Bytes(), &st); err != nil {
		return nil, "", fmt.Errorf("subject %q: stored state: %w", subject, err)
	}
	return &st, raw, nil
}

// allSubjects reads every subject's state.
func (r *Registry) allSubjects(ctx context.Context) (map[string]*subjectState, error) {
	v, err := r.do(ctx, "HGETALL", r.k.Subjects())
	if err != nil {
		return nil, fmt.Errorf("read subjects: %w", err)
	}
	out := map[string]*subjectState{}
	var name string
	i := 0
	var perr error
	v.ForEach(func(e resp.Reply) bool {
		if i%2 == 0 {
			name = string(e.Bytes())
		} else {
			var st subjectState
			if err := json.Unmarshal(e.Bytes(), &st); err != nil {
				perr = fmt.Errorf("subject %q: stored state: %w", name, err)
				return false
			}
			out[name] = &st
		}
		i++
		return true
	})
	return out, perr
}

// Source returns the source of schema id as first registered.
func (r *Registry) Source(ctx context.Context, id int32) (schema.Source, error) {
	v, err := r.do(ctx, "HGET", r.k.Schemas(), strconv.Itoa(int(id)))
	if err != nil {
		return schema.Source{}, fmt.Errorf("read schema %d: %w", id, err)
	}
	if v.IsNil() {
		return schema.Source{}, errSchemaNotFound(id)
	}
	var src schema.Source
	if err := json.Unmarshal(v.Bytes(), &src); err != nil {
		return schema.Source{}, fmt.Errorf("schema %d: stored source: %w", id, err)
	}
	if src.Format == "" {
		src.Format = schema.Avro
	}
	return src, nil
}

// allSources reads every stored schema source by id.
func (r *Registry) allSources(ctx context.Context) (map[int32]schema.Source, error) {
	v, err := r.do(ctx, "HGETALL", r.k.Schemas())
	if err != nil {
		return nil, fmt.Errorf("read schemas: %w", err)
	}
	out := map[int32]schema.Source{}
	var id int64
	i := 0
	var perr error
	v.ForEach(func(e resp.Reply) bool {
		if i%2 == 0 {
			id, perr = strconv.ParseInt(string(e.Bytes()), 10, 32)
		} else if perr == nil {
			var src schema.Source
			if perr = json.Unmarshal(e.Bytes(), &src); perr == nil {
				out[int32(id)] = src
			}
		}
		i++
		return perr == nil
	})
	if perr != nil {
		return nil, fmt.Errorf("stored schemas: %w", perr)
	}
	return out, nil
}

// resolved is what resolving a schema's references read: the state of
// each referenced subject as stored, so that the write can check nothing
// moved.
type resolved map[string]string

// parse parses src, reading its references (and theirs) from Redis. Each
// must be a live version; at most MaxReferences are resolved in all.
func (r *Registry) parse(ctx context.Context, src schema.Source) (schema.Schema, error) {
	s, _, err := r.parseGuarded(ctx, src, false)
	return s, err
}

// parseGuarded is parse that also returns the raw state of the subjects
// src references directly. With live set, a referenced version that is
// soft-deleted is refused (registration); a stored schema's references
// may have been soft-deleted since.
func (r *Registry) parseGuarded(ctx context.Context, src schema.Source, live bool) (schema.Schema, resolved, error) {
	guards := resolved{}
	for _, ref := range src.References {
		st, raw, err := r.subject(ctx, ref.Subject)
		if err != nil {
			return nil, nil, err
		}
		guards[ref.Subject] = raw
		i := st.find(ref.Version)
		if i < 0 || (live && st.Versions[i].Deleted) {
			return nil, nil, unprocessable(CodeInvalidSchema, "Invalid schema: reference %q: subject %s has no version %d", ref.Name, ref.Subject, ref.Version)
		}
	}
	n := 0
	var rerr error
	resolve := func(ref schema.Reference) (schema.Source, error) {
		n++
		if n > MaxReferences {
			return schema.Source{}, fmt.Errorf("more than %d references in all", MaxReferences)
		}
		st, _, err := r.subject(ctx, ref.Subject)
		if err != nil {
			rerr = err
			return schema.Source{}, err
		}
		i := st.find(ref.Version)
		if i < 0 {
			return schema.Source{}, fmt.Errorf("reference %q: subject %s has no version %d", ref.Name, ref.Subject, ref.Version)
		}
		s, err := r.Source(ctx, st.Versions[i].ID)
		if err != nil {
			rerr = err
		}
		return s, err
	}
	s, err := schema.Parse(src, resolve)
	if err != nil {
		if rerr != nil {
			if _, ok := AsError(rerr); !ok {
				return nil, nil, rerr // Redis failed: not the schema's fault
			}
		}
		return nil, nil, unprocessable(CodeInvalidSchema, "Invalid schema: %v", err)
	}
	return s, guards, nil
}

// do runs one command and turns an error reply into an error.
func (r *Registry) do(ctx context.Context, args ...any) (resp.Reply, error) {
	v, err := r.rc.Do(ctx, args...)
	if err == nil {
		err = v.Err()
	}
	return v, err
}

// script is a Lua script run with EVALSHA, loaded again on NOSCRIPT.
type script struct{ src, sha string }

func newScript(src string) *script {
	h := sha1.Sum([]byte(src))
	return &script{src: src, sha: hex.EncodeToString(h[:])}
}

func (s *script) run(ctx context.Context, rc *resp.Client, keys []string, args ...any) (resp.Reply, error) {
	cmd := make([]any, 0, 3+len(keys)+len(args))
	cmd = append(cmd, "EVALSHA", s.sha, len(keys))
	for _, k := range keys {
		cmd = append(cmd, k)
	}
	cmd = append(cmd, args...)
	for attempt := 0; ; attempt++ {
		v, err := rc.Do(ctx, cmd...)
		if err == nil {
			err = v.Err()
		}
		var re *resp.Error
		if err != nil && errors.As(err, &re) && re.Prefix == "NOSCRIPT" && attempt == 0 {
			if err := rc.ScriptLoad(ctx, s.src); err != nil {
				return resp.Reply{}, fmt.Errorf("load script: %w", err)
			}
			continue
		}
		return v, err
	}
}

// registerScript adds a version to a subject if the subject (and every
// subject the schema references) still holds what the caller read, giving
// the schema its id: the fingerprint's, or the next from the counter (or
// the one asked for, in IMPORT mode). Replies {status, id}: 0 done, 1 the
// state moved (read again), 2 the schema has another id already, 3 the id
// asked for names another schema.
//
// KEYS: subjects, schemas, schemaids. ARGV: subject, expected JSON ("" for
// none), fingerprint, source JSON, the new JSON before and after the id,
// the id asked for or "0", "1" when the schema has references, then pairs
// of referenced subject and its expected JSON.
var registerScript = newScript(`
if (redis.call('HGET', KEYS[1], ARGV[1]) or '') ~= ARGV[2] then return {1, 0} end
for i = 9, #ARGV, 2 do
  if (redis.call('HGET', KEYS[1], ARGV[i]) or '') ~= ARGV[i+1] then return {1, 0} end
end
local want = tonumber(ARGV[7])
local id = redis.call('HGET', KEYS[3], ARGV[3])
if id then
  if want ~= 0 and tonumber(id) ~= want then return {2, tonumber(id)} end
else
  if want ~= 0 then
    if redis.call('HEXISTS', KEYS[2], ARGV[7]) == 1 then return {3, want} end
    id = ARGV[7]
    if want > tonumber(redis.call('HGET', KEYS[3], 'next') or '0') then
      redis.call('HSET', KEYS[3], 'next', ARGV[7])
    end
  else
    id = redis.call('HINCRBY', KEYS[3], 'next', 1)
  end
  redis.call('HSET', KEYS[2], id, ARGV[4])
  redis.call('HSET', KEYS[3], ARGV[3], id)
end
if ARGV[8] == '1' then redis.call('HINCRBY', KEYS[3], 'refrev', 1) end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[5] .. id .. ARGV[6])
return {0, tonumber(id)}
`)

// putScript replaces (or, given "", removes) a subject's JSON if it still
// holds what the caller read and no registration with references came in
// between (refrev), so that a delete cannot miss a new reference to what
// it deletes. With ARGV[5] "1" it also drops the subject's config.
//
// KEYS: subjects, schemaids, schemaconfig. ARGV: subject, expected JSON,
// new JSON, expected refrev, drop config.
var putScript = newScript(`
if (redis.call('HGET', KEYS[1], ARGV[1]) or '') ~= ARGV[2] then return 1 end
if (redis.call('HGET', KEYS[2], 'refrev') or '0') ~= ARGV[4] then return 1 end
if ARGV[3] == '' then
  redis.call('HDEL', KEYS[1], ARGV[1])
else
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
end
if ARGV[5] == '1' then
  redis.call('HDEL', KEYS[3], 'compatibility:' .. ARGV[1], 'mode:' .. ARGV[1])
end
return 0
`)

// getDelScript removes a hash field and returns what it held.
var getDelScript = newScript(`
local v = redis.call('HGET', KEYS[1], ARGV[1])
if v then redis.call('HDEL', KEYS[1], ARGV[1]) end
return v
`)

// refrev reads the count of registrations with references.
func (r *Registry) refrev(ctx context.Context) (string, error) {
	v, err := r.do(ctx, "HGET", r.k.SchemaIDs(), "refrev")
	if err != nil {
		return "", fmt.Errorf("read reference revision: %w", err)
	}
	if v.IsNil() {
		return "0", nil
	}
	return string(v.Bytes()), nil
}

// put writes a subject's new state (nil removes it) if it is still old.
// It reports false when the state moved.
func (r *Registry) put(ctx context.Context, subject, old string, st *subjectState, rev string, dropConfig bool) (bool, error) {
	js := ""
	if st != nil && len(st.Versions) > 0 {
		b, err := json.Marshal(st)
		if err != nil {
			return false, err
		}
		js = string(b)
	}
	drop := "0"
	if dropConfig {
		drop = "1"
	}
	v, err := putScript.run(ctx, r.rc, []string{r.k.Subjects(), r.k.SchemaIDs(), r.k.SchemaConfig()}, subject, old, js, rev, drop)
	if err != nil {
		return false, fmt.Errorf("write subject %q: %w", subject, err)
	}
	n, err := v.Int()
	if err != nil {
		return false, fmt.Errorf("write subject %q: %w", subject, err)
	}
	return n == 0, nil
}
