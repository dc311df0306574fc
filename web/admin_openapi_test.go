package web

import (
	"encoding/json"
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

// The OpenAPI document lists exactly the routes registered under /api/v1,
// every $ref in it resolves, and it is served behind the gate.
func TestOpenAPIListsEveryRoute(t *testing.T) {
	eng, _ := openEngine(t)
	s, h := build(eng, Options{Version: "t", Started: time.Now(), Logger: quiet})
	var doc struct {
		OpenAPI string                    `json:"openapi"`
		Paths   map[string]map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(openAPI, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.OpenAPI != "3.1.0" {
		t.Errorf("openapi %q", doc.OpenAPI)
	}
	var documented []string
	for path, item := range doc.Paths {
		for method := range item {
			switch method {
			case "get", "put", "post", "delete", "patch", "head", "options", "trace":
				documented = append(documented, strings.ToUpper(method)+" "+path)
			}
		}
	}
	registered := slices.Clone(s.apiRoutes)
	sort.Strings(documented)
	sort.Strings(registered)
	for _, r := range registered {
		if !slices.Contains(documented, r) {
			t.Errorf("route %s is not in web/openapi.json", r)
		}
	}
	for _, d := range documented {
		if !slices.Contains(registered, d) {
			t.Errorf("web/openapi.json documents %s, which no route serves", d)
		}
	}
	if len(registered) < 20 {
		t.Errorf("only %d routes registered: %v", len(registered), registered)
	}

	// Every $ref points into the document.
	var raw any
	_ = json.Unmarshal(openAPI, &raw)
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if ref, ok := x.(string); ok && k == "$ref" {
					if !resolves(raw, ref) {
						t.Errorf("$ref %s does not resolve", ref)
					}
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(raw)

	w := get(t, h, "/api/v1/openapi.json", nil)
	if w.Code != http.StatusOK || w.Header().Get("Content-Type") != "application/json" || w.Body.Len() != len(openAPI) {
		t.Errorf("GET /api/v1/openapi.json: %d %s", w.Code, w.Header())
	}
}

func resolves(doc any, ref string) bool {
	path, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return false
	}
	cur := doc
	for _, part := range strings.Split(path, "/") {
		m, ok := cur.(map[string]any)
		if !ok {
			return false
		}
		if cur, ok = m[part]; !ok {
			return false
		}
	}
	return true
}
