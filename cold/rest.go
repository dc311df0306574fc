package cold

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/korvet/korvet/cold/icemeta"
)

// RESTHandler serves the topic tables through the read side of the Iceberg
// REST catalog API, so DuckDB, Trino, Spark or PyIceberg can attach korvet
// by URL and read the tables straight from the warehouse:
//
//	GET  /v1/config
//	GET  /v1/namespaces
//	GET  /v1/namespaces/{ns}                 (HEAD too)
//	GET  /v1/namespaces/{ns}/tables
//	GET  /v1/namespaces/{ns}/tables/{table}  (HEAD too)
//	GET  /v1/namespaces/{ns}/views           (always empty)
//
// Writes answer 405: korvet is the tables' only writer. Mount it under a
// prefix with http.StripPrefix; the catalog URI is then that prefix. The
// table config names the S3 endpoint and addressing, never credentials.
// readable says whether the request may see a topic's table; tables it may
// not are left out of lists and answer 403.
func (s *Store) RESTHandler(readable func(r *http.Request, topic string) bool) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/config", s.restConfig)
	mux.HandleFunc("GET /v1/namespaces", s.restNamespaces)
	mux.HandleFunc("GET /v1/namespaces/{ns}", s.restNamespace)
	mux.HandleFunc("GET /v1/namespaces/{ns}/tables", func(w http.ResponseWriter, r *http.Request) {
		s.restTables(w, r, readable)
	})
	mux.HandleFunc("GET /v1/namespaces/{ns}/tables/{table}", func(w http.ResponseWriter, r *http.Request) {
		if t := r.PathValue("table"); !readable(r, t) {
			restError(w, http.StatusForbidden, "ForbiddenException", "not authorized to read table "+s.cfg.Namespace+"."+t+" (needs READ on topic "+t+")")
			return
		}
		s.restTable(w, r)
	})
	mux.HandleFunc("GET /v1/namespaces/{ns}/views", s.restViews)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			restError(w, http.StatusMethodNotAllowed, "NotAllowedException", "korvet's Iceberg catalog is read-only")
			return
		}
		restError(w, http.StatusNotFound, "NotFoundException", "no such endpoint: "+r.URL.Path)
	})
	return mux
}

var restEndpoints = []string{
	"GET /v1/{prefix}/namespaces",
	"GET /v1/{prefix}/namespaces/{namespace}",
	"HEAD /v1/{prefix}/namespaces/{namespace}",
	"GET /v1/{prefix}/namespaces/{namespace}/tables",
	"GET /v1/{prefix}/namespaces/{namespace}/tables/{table}",
	"HEAD /v1/{prefix}/namespaces/{namespace}/tables/{table}",
	"GET /v1/{prefix}/namespaces/{namespace}/views",
}

func (s *Store) restConfig(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, map[string]any{
		"defaults":  map[string]string{},
		"overrides": map[string]string{},
		"endpoints": restEndpoints,
	})
}

// namespace decodes a namespace path element: levels are separated by the
// unit separator (0x1f); korvet has a single level.
func (s *Store) namespace(w http.ResponseWriter, r *http.Request) bool {
	if ns := r.PathValue("ns"); ns != s.cfg.Namespace {
		restError(w, http.StatusNotFound, "NoSuchNamespaceException", "namespace does not exist: "+strings.ReplaceAll(ns, "\x1f", "."))
		return false
	}
	return true
}

func (s *Store) restNamespaces(w http.ResponseWriter, r *http.Request) {
	nss := [][]string{{s.cfg.Namespace}}
	if r.URL.Query().Get("parent") != "" {
		nss = [][]string{}
	}
	writeJSON(w, map[string]any{"namespaces": nss})
}

func (s *Store) restNamespace(w http.ResponseWriter, r *http.Request) {
	if !s.namespace(w, r) {
		return
	}
	writeJSON(w, map[string]any{"namespace": []string{s.cfg.Namespace}, "properties": map[string]string{}})
}

func (s *Store) restViews(w http.ResponseWriter, r *http.Request) {
	if !s.namespace(w, r) {
		return
	}
	writeJSON(w, map[string]any{"identifiers": []any{}})
}

type restIdent struct {
	Namespace []string `json:"namespace"`
	Name      string   `json:"name"`
}

func (s *Store) restTables(w http.ResponseWriter, r *http.Request, readable func(*http.Request, string) bool) {
	if !s.namespace(w, r) {
		return
	}
	var names []string
	err := s.ready(r.Context())
	if err == nil {
		names, err = s.cat.listTables(r.Context(), s.cfg.Namespace)
	}
	if err != nil {
		s.log.Warn("cold: rest catalog: list tables", "err", err)
		restError(w, http.StatusServiceUnavailable, "ServiceUnavailableException", "listing tables failed: "+err.Error())
		return
	}
	ids := make([]restIdent, 0, len(names))
	for _, n := range names {
		if !readable(r, n) {
			continue
		}
		ids = append(ids, restIdent{Namespace: []string{s.cfg.Namespace}, Name: n})
	}
	writeJSON(w, map[string]any{"identifiers": ids})
}

func (s *Store) restTable(w http.ResponseWriter, r *http.Request) {
	if !s.namespace(w, r) {
		return
	}
	name := r.PathValue("table")
	if validTopic(name) != nil {
		restError(w, http.StatusNotFound, "NoSuchTableException", "table does not exist: "+name)
		return
	}
	err := s.ready(r.Context())
	var meta *icemeta.Metadata
	var loc string
	if err == nil {
		meta, loc, err = s.cat.loadTable(r.Context(), s.ident(name))
	}
	if errors.Is(err, errNoTable) {
		restError(w, http.StatusNotFound, "NoSuchTableException", "table does not exist: "+s.cfg.Namespace+"."+name)
		return
	}
	if err != nil {
		s.log.Warn("cold: rest catalog: load table", "table", name, "err", err)
		restError(w, http.StatusServiceUnavailable, "ServiceUnavailableException", "loading the table failed: "+err.Error())
		return
	}
	if r.Method == http.MethodHead {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	writeJSON(w, loadTableResult{
		MetadataLocation: loc,
		Metadata:         meta,
		Config:           s.clientConfig(),
	})
}

type loadTableResult struct {
	MetadataLocation string            `json:"metadata-location"`
	Metadata         *icemeta.Metadata `json:"metadata"`
	Config           map[string]string `json:"config,omitempty"`
}

// clientConfig tells readers how to reach the warehouse (the keys
// PyIceberg and the Java FileIO read), without credentials.
func (s *Store) clientConfig() map[string]string {
	if !strings.HasPrefix(s.root, "s3://") {
		return nil
	}
	c := map[string]string{"s3.region": "us-east-1"}
	if s.cfg.Region != "" {
		c["s3.region"] = s.cfg.Region
	}
	if ep := s.cfg.Endpoint; ep != "" {
		if !strings.Contains(ep, "://") {
			if s.cfg.TLS {
				ep = "https://" + ep
			} else {
				ep = "http://" + ep
			}
		}
		// User info in the endpoint is never used to sign (the keys are),
		// and readers must not see it.
		if u, err := url.Parse(ep); err == nil && u.User != nil {
			u.User = nil
			ep = u.String()
		}
		c["s3.endpoint"] = ep
	}
	if s.cfg.PathStyle {
		c["s3.path-style-access"] = "true"
	}
	return c
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// restError answers with the Iceberg REST error model.
func restError(w http.ResponseWriter, code int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"error": map[string]any{"message": msg, "type": typ, "code": code},
	})
}
