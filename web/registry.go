package web

import (
	"net/http"

	"github.com/korvet/korvet/engine/registry"
)

// NewRegistry returns the handler of the schema registry listener: the
// Confluent Schema Registry REST API at its root, behind the same logins
// (opts.Login, Passwords, AdminToken) and policy as the HTTP side.
func NewRegistry(reg *registry.Registry, opts Options) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotImplemented, "schema registry: not implemented yet")
	})
}
