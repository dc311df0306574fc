package web

import (
	"net/http"
	"strings"
)

// apiMux registers routes and remembers those under /api/v1, so that a
// test can hold them against the OpenAPI document.
type apiMux struct {
	*http.ServeMux
	patterns []string // "METHOD /api/v1/..."
}

func (m *apiMux) route(pattern string, h http.HandlerFunc) {
	if _, path, _ := strings.Cut(pattern, " "); strings.HasPrefix(path, "/api/v1/") {
		m.patterns = append(m.patterns, pattern)
	}
	m.HandleFunc(pattern, h)
}

// registerAdmin adds the admin API's routes (README, "Admin API").
func (s *server) registerAdmin(m *apiMux) {
	m.route("GET /api/v1/openapi.json", s.apiOpenAPI)

	m.route("POST /api/v1/topics", s.topicCreate)
	m.route("GET /api/v1/topics/{topic}", s.topicDescribe)
	m.route("DELETE /api/v1/topics/{topic}", s.topicDelete)
	m.route("PATCH /api/v1/topics/{topic}/configs", s.topicAlterConfigs)
	m.route("POST /api/v1/topics/{topic}/partitions", s.topicAddPartitions)
	m.route("POST /api/v1/topics/{topic}/delete-records", s.topicDeleteRecords)
	m.route("GET /api/v1/topics/{topic}/records", s.topicRecords)
	m.route("POST /api/v1/topics/{topic}/records", s.topicProduce)

	m.route("GET /api/v1/groups/{group}", s.groupDescribe)
	m.route("POST /api/v1/groups/{group}/reset-offsets", s.groupResetOffsets)
	m.route("DELETE /api/v1/groups/{group}", s.groupDelete)

	m.route("GET /api/v1/users", s.usersList)
	m.route("PUT /api/v1/users/{name}", s.userSet)
	m.route("DELETE /api/v1/users/{name}", s.userDelete)

	m.route("GET /api/v1/acls", s.aclsList)
	m.route("POST /api/v1/acls", s.aclCreate)
	m.route("DELETE /api/v1/acls", s.aclDelete)

	// Anything else under /api/v1 is a JSON 404 (or 405), not the page's.
	m.HandleFunc("/api/v1/", m.notFound)
}

// notFound answers a path under /api/v1 that no route serves: 405 with
// Allow when the path has routes for other methods, else 404.
func (m *apiMux) notFound(w http.ResponseWriter, r *http.Request) {
	var allow []string
	for _, method := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		if method == r.Method {
			continue
		}
		probe := r.Clone(r.Context())
		probe.Method = method
		if _, pattern := m.Handler(probe); pattern != "/api/v1/" && pattern != "" {
			allow = append(allow, method)
		}
	}
	if len(allow) > 0 {
		w.Header().Set("Allow", strings.Join(allow, ", "))
		writeAPIError(w, &apiError{status: http.StatusMethodNotAllowed, code: "method_not_allowed",
			msg: r.Method + " is not served on " + r.URL.Path + "; use " + strings.Join(allow, " or ")})
		return
	}
	apiNotFound(w, r)
}
