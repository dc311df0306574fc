package web

import (
	_ "embed"
	"net/http"
)

// openAPI is the admin API's OpenAPI 3.1 document; TestOpenAPIListsEveryRoute
// holds it to the routes registered under /api/v1.
//
//go:embed openapi.json
var openAPI []byte

func (s *server) apiOpenAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(openAPI)
}
