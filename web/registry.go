package web

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/korvet/korvet/engine/auth"
	"github.com/korvet/korvet/engine/registry"
	"github.com/korvet/korvet/engine/schema"
)

// The schema registry speaks Confluent's Schema Registry REST API at the
// root of its own listener, so that serializers and tools configured with
// "schema.registry.url" work unchanged. Requests log in as on the HTTP
// side (the same gate); what a principal may do follows the topic a
// subject belongs to: "T-key" and "T-value" are topic T's, any other
// subject is checked as a topic of its own name (so a PREFIXED topic ACL
// covers record-name subjects). Reads need READ, registering and deleting
// WRITE, a subject's config and mode ALTER_CONFIGS on its topic, the
// global config and mode ALTER_CONFIGS on the cluster (or a super user).

// registryMaxBody bounds a request body: a schema is at most
// registry.MaxSchemaBytes, escaped in JSON.
const registryMaxBody = 2 << 20

// srContentType is what Confluent's registry answers with.
const srContentType = "application/vnd.schemaregistry.v1+json"

// regAPI serves the Confluent REST API over a registry.Registry.
type regAPI struct {
	s   *server
	reg *registry.Registry
}

// NewRegistry returns the handler of the schema registry listener: the
// Confluent Schema Registry REST API at its root, behind the same logins
// (opts.Login, Passwords, AdminToken) and policy as the HTTP side.
func NewRegistry(reg *registry.Registry, opts Options) http.Handler {
	s := newServer(opts)
	s.failBody = func(w http.ResponseWriter, code int, msg string) {
		ec := code
		if code == http.StatusForbidden {
			ec = 40301
		}
		srJSON(w, code, srErrorBody{ec, msg})
	}
	a := &regAPI{s: s, reg: reg}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { srJSON(w, http.StatusOK, struct{}{}) })
	mux.HandleFunc("GET /schemas/types", func(w http.ResponseWriter, r *http.Request) {
		srJSON(w, http.StatusOK, []schema.Format{schema.JSON, schema.Protobuf, schema.Avro})
	})
	mux.HandleFunc("GET /schemas", a.listSchemas)
	mux.HandleFunc("GET /schemas/ids/{id}", a.schemaByID)
	mux.HandleFunc("GET /schemas/ids/{id}/schema", a.schemaTextByID)
	mux.HandleFunc("GET /schemas/ids/{id}/subjects", a.subjectsByID)
	mux.HandleFunc("GET /schemas/ids/{id}/versions", a.versionsByID)
	mux.HandleFunc("GET /subjects", a.listSubjects)
	mux.HandleFunc("GET /subjects/{s}/versions", a.read(a.subjectVersions))
	mux.HandleFunc("POST /subjects/{s}/versions", a.write(a.register))
	mux.HandleFunc("GET /subjects/{s}/versions/{v}", a.read(a.version))
	mux.HandleFunc("GET /subjects/{s}/versions/{v}/schema", a.read(a.versionText))
	mux.HandleFunc("GET /subjects/{s}/versions/{v}/referencedby", a.read(a.referencedBy))
	mux.HandleFunc("DELETE /subjects/{s}/versions/{v}", a.write(a.deleteVersion))
	mux.HandleFunc("POST /subjects/{s}", a.read(a.lookup))
	mux.HandleFunc("DELETE /subjects/{s}", a.write(a.deleteSubject))
	mux.HandleFunc("POST /compatibility/subjects/{s}/versions/{v}", a.read(a.compatibility))
	mux.HandleFunc("POST /compatibility/subjects/{s}/versions", a.read(a.compatibility))
	mux.HandleFunc("GET /config", a.getLevel)
	mux.HandleFunc("PUT /config", a.cluster(a.putLevel))
	mux.HandleFunc("DELETE /config", a.cluster(a.deleteLevel))
	mux.HandleFunc("GET /config/{s}", a.read(a.getLevel))
	mux.HandleFunc("PUT /config/{s}", a.alter(a.putLevel))
	mux.HandleFunc("DELETE /config/{s}", a.alter(a.deleteLevel))
	mux.HandleFunc("GET /mode", a.getMode)
	mux.HandleFunc("PUT /mode", a.cluster(a.putMode))
	mux.HandleFunc("DELETE /mode", a.cluster(a.deleteMode))
	mux.HandleFunc("GET /mode/{s}", a.read(a.getMode))
	mux.HandleFunc("PUT /mode/{s}", a.alter(a.putMode))
	mux.HandleFunc("DELETE /mode/{s}", a.alter(a.deleteMode))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		srJSON(w, http.StatusNotFound, srErrorBody{http.StatusNotFound, "HTTP 404 Not Found"})
	})
	return s.gate(mux)
}

type srErrorBody struct {
	Code    int    `json:"error_code"`
	Message string `json:"message"`
}

func srJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", srContentType)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// fail answers err: a registry refusal with its Confluent code, anything
// else as a backend error (logged; the client learns only that).
func (a *regAPI) fail(w http.ResponseWriter, r *http.Request, err error) {
	if e, ok := registry.AsError(err); ok {
		srJSON(w, e.HTTP, srErrorBody{e.Code, e.Message})
		return
	}
	if errors.Is(err, r.Context().Err()) && r.Context().Err() != nil {
		srJSON(w, http.StatusInternalServerError, srErrorBody{50002, "Operation timed out"})
		return
	}
	a.s.log.Warn("schema registry: backend error", "method", r.Method, "path", r.URL.Path, "err", err)
	srJSON(w, http.StatusInternalServerError, srErrorBody{registry.CodeBackend, "Error in the backend data store (see korvet's log)"})
}

// topicOf is the topic whose ACLs cover subject.
func topicOf(subject string) string {
	if t, ok := strings.CutSuffix(subject, "-value"); ok && t != "" {
		return t
	}
	if t, ok := strings.CutSuffix(subject, "-key"); ok && t != "" {
		return t
	}
	return subject
}

func (a *regAPI) may(r *http.Request, op auth.Operation, subject string) bool {
	return a.s.allowed(r, op, auth.ResTopic, topicOf(subject))
}

func denied(w http.ResponseWriter, r *http.Request, op, what string) {
	srJSON(w, http.StatusForbidden, srErrorBody{40301, fmt.Sprintf("%s is denied operation %s on %s", identityOf(r).principal, op, what)})
}

// guard wraps a {s} route: it runs only for principals that may do op on
// the subject's topic.
func (a *regAPI) guard(op auth.Operation, name string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		subject := r.PathValue("s")
		if !a.may(r, op, subject) {
			denied(w, r, name, "Subject: "+subject)
			return
		}
		h(w, r)
	}
}

func (a *regAPI) read(h http.HandlerFunc) http.HandlerFunc  { return a.guard(auth.OpRead, "Read", h) }
func (a *regAPI) write(h http.HandlerFunc) http.HandlerFunc { return a.guard(auth.OpWrite, "Write", h) }
func (a *regAPI) alter(h http.HandlerFunc) http.HandlerFunc {
	return a.guard(auth.OpAlterConfigs, "AlterConfigs", h)
}

// cluster guards the global config and mode: ALTER_CONFIGS on the cluster.
func (a *regAPI) cluster(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !a.s.allowed(r, auth.OpAlterConfigs, auth.ResCluster, auth.ClusterName) {
			denied(w, r, "AlterConfigs", "Cluster: "+auth.ClusterName)
			return
		}
		h(w, r)
	}
}

func flag(r *http.Request, name string) bool {
	v, _ := strconv.ParseBool(r.URL.Query().Get(name))
	return v
}

// parseID reads the {id} path value; a malformed id finds no schema.
func parseID(r *http.Request) (int32, error) {
	s := r.PathValue("id")
	id, err := strconv.ParseInt(s, 10, 32)
	if err != nil || id < 1 {
		return 0, &registry.Error{Code: registry.CodeSchemaNotFound, HTTP: http.StatusNotFound, Message: fmt.Sprintf("Schema %s not found", s)}
	}
	return int32(id), nil
}

// parseVersion reads the {v} path value: 1..2^31-1, "latest" or -1.
func parseVersion(r *http.Request) (int, error) {
	s := r.PathValue("v")
	if s == "latest" || s == "-1" {
		return registry.Latest, nil
	}
	v, err := strconv.ParseInt(s, 10, 32)
	if err != nil || v < 1 {
		return 0, &registry.Error{Code: registry.CodeInvalidVersion, HTTP: http.StatusUnprocessableEntity,
			Message: fmt.Sprintf("The specified version '%s' is not a valid version id. Allowed values are between [1, 2^31-1] and the string \"latest\"", s)}
	}
	return int(v), nil
}

// decode reads a JSON body of at most registryMaxBody bytes into v; a
// body that is not what the route takes is code (HTTP 422).
func decode(w http.ResponseWriter, r *http.Request, v any, code int) error {
	body := http.MaxBytesReader(w, r.Body, registryMaxBody)
	dec := json.NewDecoder(body)
	if err := dec.Decode(v); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return &registry.Error{Code: http.StatusRequestEntityTooLarge, HTTP: http.StatusRequestEntityTooLarge,
				Message: fmt.Sprintf("Request body larger than %d bytes", registryMaxBody)}
		}
		if errors.Is(err, io.EOF) {
			err = errors.New("empty body")
		}
		return &registry.Error{Code: code, HTTP: http.StatusUnprocessableEntity, Message: "Unrecognized request body: " + err.Error()}
	}
	return nil
}

// schemaBody is the body of a registration, lookup or compatibility check.
type schemaBody struct {
	Schema     string             `json:"schema"`
	SchemaType string             `json:"schemaType"`
	References []schema.Reference `json:"references"`
	ID         int32              `json:"id"`
	Version    int                `json:"version"`
}

func (a *regAPI) source(w http.ResponseWriter, r *http.Request) (schemaBody, schema.Source, error) {
	var b schemaBody
	if err := decode(w, r, &b, registry.CodeInvalidSchema); err != nil {
		return b, schema.Source{}, err
	}
	f, err := schema.ParseFormat(b.SchemaType)
	if err != nil {
		return b, schema.Source{}, &registry.Error{Code: registry.CodeInvalidSchema, HTTP: http.StatusUnprocessableEntity, Message: "Invalid schema: " + err.Error()}
	}
	return b, schema.Source{Format: f, Text: b.Schema, References: b.References}, nil
}

// schemaJSON is a schema as Confluent answers it: schemaType left out for
// Avro, references when there are any.
type schemaJSON struct {
	Subject    string             `json:"subject,omitempty"`
	Version    int                `json:"version,omitempty"`
	ID         int32              `json:"id,omitempty"`
	SchemaType schema.Format      `json:"schemaType,omitempty"`
	Schema     string             `json:"schema"`
	References []schema.Reference `json:"references,omitempty"`
}

func sourceJSON(src schema.Source) schemaJSON {
	j := schemaJSON{SchemaType: src.Format, Schema: src.Text, References: src.References}
	if j.SchemaType == schema.Avro {
		j.SchemaType = ""
	}
	return j
}

func versionJSON(v registry.Version) schemaJSON {
	j := sourceJSON(v.Source)
	j.Subject, j.Version, j.ID = v.Subject, v.Version, v.ID
	return j
}

// writeText answers a schema's text alone, as registered (Confluent's
// registry does the same for every format: Avro and JSON Schema are JSON
// themselves, a .proto goes as its text).
func writeText(w http.ResponseWriter, src schema.Source) {
	w.Header().Set("Content-Type", srContentType)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = io.WriteString(w, src.Text)
}

// readableUsages lists the subject versions holding id (soft-deleted ones
// too: old records still carry the id) that the principal may read; none
// is 40403, so that ids of other subjects do not leak.
func (a *regAPI) readableUsages(r *http.Request, id int32) ([]registry.SubjectVersion, error) {
	us, err := a.reg.Usages(r.Context(), id, true)
	if err != nil {
		return nil, err
	}
	out := []registry.SubjectVersion{}
	for _, u := range us {
		if a.may(r, auth.OpRead, u.Subject) {
			out = append(out, u)
		}
	}
	if len(out) == 0 {
		return nil, &registry.Error{Code: registry.CodeSchemaNotFound, HTTP: http.StatusNotFound, Message: fmt.Sprintf("Schema %d not found", id)}
	}
	return out, nil
}

func (a *regAPI) schemaByIDSource(r *http.Request) (schema.Source, error) {
	id, err := parseID(r)
	if err != nil {
		return schema.Source{}, err
	}
	if _, err := a.readableUsages(r, id); err != nil {
		return schema.Source{}, err
	}
	return a.reg.Source(r.Context(), id)
}

func (a *regAPI) schemaByID(w http.ResponseWriter, r *http.Request) {
	src, err := a.schemaByIDSource(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	srJSON(w, http.StatusOK, sourceJSON(src))
}

func (a *regAPI) schemaTextByID(w http.ResponseWriter, r *http.Request) {
	src, err := a.schemaByIDSource(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeText(w, src)
}

func (a *regAPI) subjectsByID(w http.ResponseWriter, r *http.Request) {
	id, err := parseID(r)
	if err == nil {
		var us []registry.SubjectVersion
		if us, err = a.usagesOf(r, id); err == nil {
			out := []string{}
			for _, u := range us {
				if len(out) == 0 || out[len(out)-1] != u.Subject {
					out = append(out, u.Subject)
				}
			}
			srJSON(w, http.StatusOK, out)
			return
		}
	}
	a.fail(w, r, err)
}

func (a *regAPI) versionsByID(w http.ResponseWriter, r *http.Request) {
	id, err := parseID(r)
	if err == nil {
		var us []registry.SubjectVersion
		if us, err = a.usagesOf(r, id); err == nil {
			srJSON(w, http.StatusOK, us)
			return
		}
	}
	a.fail(w, r, err)
}

// usagesOf lists the readable live (with ?deleted=true, all) usages of
// id; 40403 when the principal can see none at all.
func (a *regAPI) usagesOf(r *http.Request, id int32) ([]registry.SubjectVersion, error) {
	deleted := flag(r, "deleted")
	if _, err := a.readableUsages(r, id); err != nil {
		return nil, err
	}
	us, err := a.reg.Usages(r.Context(), id, deleted)
	if err != nil {
		return nil, err
	}
	out := []registry.SubjectVersion{}
	for _, u := range us {
		if a.may(r, auth.OpRead, u.Subject) {
			out = append(out, u)
		}
	}
	return out, nil
}

func (a *regAPI) listSchemas(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	vs, err := a.reg.AllVersions(r.Context(), q.Get("subjectPrefix"), flag(r, "deleted"), flag(r, "latestOnly"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	out := []schemaJSON{}
	for _, v := range vs {
		if a.may(r, auth.OpRead, v.Subject) {
			out = append(out, versionJSON(v))
		}
	}
	srJSON(w, http.StatusOK, out)
}

func (a *regAPI) listSubjects(w http.ResponseWriter, r *http.Request) {
	names, err := a.reg.SubjectNames(r.Context(), flag(r, "deleted"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	prefix := r.URL.Query().Get("subjectPrefix")
	out := []string{}
	for _, n := range names {
		if strings.HasPrefix(n, prefix) && a.may(r, auth.OpRead, n) {
			out = append(out, n)
		}
	}
	srJSON(w, http.StatusOK, out)
}

func (a *regAPI) subjectVersions(w http.ResponseWriter, r *http.Request) {
	vs, err := a.reg.Versions(r.Context(), r.PathValue("s"), flag(r, "deleted"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	srJSON(w, http.StatusOK, vs)
}

func (a *regAPI) subjectVersion(r *http.Request) (registry.Version, error) {
	v, err := parseVersion(r)
	if err != nil {
		return registry.Version{}, err
	}
	return a.reg.Version(r.Context(), r.PathValue("s"), v, flag(r, "deleted"))
}

func (a *regAPI) version(w http.ResponseWriter, r *http.Request) {
	v, err := a.subjectVersion(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	srJSON(w, http.StatusOK, versionJSON(v))
}

func (a *regAPI) versionText(w http.ResponseWriter, r *http.Request) {
	v, err := a.subjectVersion(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeText(w, v.Source)
}

func (a *regAPI) referencedBy(w http.ResponseWriter, r *http.Request) {
	v, err := parseVersion(r)
	if err == nil {
		var ids []int32
		if ids, err = a.reg.ReferencedBy(r.Context(), r.PathValue("s"), v); err == nil {
			if ids == nil {
				ids = []int32{}
			}
			srJSON(w, http.StatusOK, ids)
			return
		}
	}
	a.fail(w, r, err)
}

func (a *regAPI) register(w http.ResponseWriter, r *http.Request) {
	b, src, err := a.source(w, r)
	if err == nil {
		var id int32
		id, _, err = a.reg.Register(r.Context(), r.PathValue("s"), src, registry.RegisterOptions{
			ID: max(b.ID, 0), Version: max(b.Version, 0), Principal: identityOf(r).principal})
		if err == nil {
			srJSON(w, http.StatusOK, map[string]int32{"id": id})
			return
		}
	}
	a.fail(w, r, err)
}

func (a *regAPI) lookup(w http.ResponseWriter, r *http.Request) {
	_, src, err := a.source(w, r)
	if err == nil {
		var v registry.Version
		if v, err = a.reg.Lookup(r.Context(), r.PathValue("s"), src, flag(r, "deleted")); err == nil {
			srJSON(w, http.StatusOK, versionJSON(v))
			return
		}
	}
	a.fail(w, r, err)
}

func (a *regAPI) deleteSubject(w http.ResponseWriter, r *http.Request) {
	vs, err := a.reg.DeleteSubject(r.Context(), r.PathValue("s"), registry.DeleteOptions{Permanent: flag(r, "permanent"), Principal: identityOf(r).principal})
	if err != nil {
		a.fail(w, r, err)
		return
	}
	srJSON(w, http.StatusOK, vs)
}

func (a *regAPI) deleteVersion(w http.ResponseWriter, r *http.Request) {
	v, err := parseVersion(r)
	if err == nil {
		if v, err = a.reg.DeleteVersion(r.Context(), r.PathValue("s"), v, registry.DeleteOptions{Permanent: flag(r, "permanent"), Principal: identityOf(r).principal}); err == nil {
			srJSON(w, http.StatusOK, v)
			return
		}
	}
	a.fail(w, r, err)
}

func (a *regAPI) compatibility(w http.ResponseWriter, r *http.Request) {
	version := 0 // every version the level names
	if r.PathValue("v") != "" {
		v, err := parseVersion(r)
		if err != nil {
			a.fail(w, r, err)
			return
		}
		version = v
	}
	_, src, err := a.source(w, r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	why, err := a.reg.CheckCompatibility(r.Context(), r.PathValue("s"), src, version)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	out := map[string]any{"is_compatible": len(why) == 0}
	if flag(r, "verbose") {
		if why == nil {
			why = []string{}
		}
		out["messages"] = why
	}
	srJSON(w, http.StatusOK, out)
}

func (a *regAPI) getLevel(w http.ResponseWriter, r *http.Request) {
	subject := r.PathValue("s")
	var l schema.Level
	var err error
	if subject == "" || flag(r, "defaultToGlobal") {
		l, _, err = a.reg.Level(r.Context(), subject)
	} else {
		l, err = a.reg.SubjectLevel(r.Context(), subject)
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	srJSON(w, http.StatusOK, map[string]schema.Level{"compatibilityLevel": l})
}

func (a *regAPI) putLevel(w http.ResponseWriter, r *http.Request) {
	var b struct {
		Compatibility string `json:"compatibility"`
	}
	err := decode(w, r, &b, registry.CodeInvalidLevel)
	if err == nil {
		l, perr := schema.ParseLevel(b.Compatibility)
		if perr != nil {
			err = &registry.Error{Code: registry.CodeInvalidLevel, HTTP: http.StatusUnprocessableEntity, Message: "Invalid compatibility level: " + perr.Error()}
		} else if err = a.reg.SetLevel(r.Context(), r.PathValue("s"), l); err == nil {
			a.s.log.Info("schema registry compatibility set", "subject", r.PathValue("s"), "level", l, "principal", identityOf(r).principal)
			srJSON(w, http.StatusOK, map[string]schema.Level{"compatibility": l})
			return
		}
	}
	a.fail(w, r, err)
}

func (a *regAPI) deleteLevel(w http.ResponseWriter, r *http.Request) {
	l, err := a.reg.DeleteLevel(r.Context(), r.PathValue("s"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	a.s.log.Info("schema registry compatibility deleted", "subject", r.PathValue("s"), "was", l, "principal", identityOf(r).principal)
	// Confluent answers compatibilityLevel; some clients read compatibility.
	srJSON(w, http.StatusOK, map[string]schema.Level{"compatibilityLevel": l, "compatibility": l})
}

func (a *regAPI) getMode(w http.ResponseWriter, r *http.Request) {
	subject := r.PathValue("s")
	var m registry.Mode
	var err error
	if subject == "" || flag(r, "defaultToGlobal") {
		m, err = a.reg.Mode(r.Context(), subject)
	} else {
		m, err = a.reg.SubjectMode(r.Context(), subject)
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	srJSON(w, http.StatusOK, map[string]registry.Mode{"mode": m})
}

func (a *regAPI) putMode(w http.ResponseWriter, r *http.Request) {
	var b struct {
		Mode string `json:"mode"`
	}
	err := decode(w, r, &b, registry.CodeInvalidMode)
	if err == nil {
		var m registry.Mode
		if m, err = registry.ParseMode(b.Mode); err == nil {
			if err = a.reg.SetMode(r.Context(), r.PathValue("s"), m, flag(r, "force")); err == nil {
				a.s.log.Info("schema registry mode set", "subject", r.PathValue("s"), "mode", m, "principal", identityOf(r).principal)
				srJSON(w, http.StatusOK, map[string]registry.Mode{"mode": m})
				return
			}
		}
	}
	a.fail(w, r, err)
}

func (a *regAPI) deleteMode(w http.ResponseWriter, r *http.Request) {
	m, err := a.reg.DeleteMode(r.Context(), r.PathValue("s"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	a.s.log.Info("schema registry mode deleted", "subject", r.PathValue("s"), "was", m, "principal", identityOf(r).principal)
	srJSON(w, http.StatusOK, map[string]registry.Mode{"mode": m})
}
