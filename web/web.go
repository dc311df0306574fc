// Package web serves korvet's HTTP side: health now; the status page, the
// JSON API, metrics and the KV view as they arrive. It reads the engine and
// never talks to Redis itself.
package web

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/korvet/korvet/engine"
)

// Options configure the handler.
type Options struct {
	Version string
	Started time.Time
}

// New returns korvet's HTTP handler.
func New(eng *engine.Engine, opts Options) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "version": opts.Version, "uptime_seconds": int64(time.Since(opts.Started).Seconds())})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := eng.Ping(ctx); err != nil {
			writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "unavailable", "error": err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"status": "ready"})
	})
	return mux
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
