package web

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/engine/auth"
)

// The KV view: GET/HEAD /v1/kv/{topic}/{key}, POST /v1/kv/{topic}/_mget
// and GET /v1/kv/{topic} (index figures). Keys are percent-encoded in the
// path, or base64url with ?key_encoding=base64url for binary keys.

// KV is what the KV view needs of the engine; *engine.Engine has it.
type KV interface {
	KVGet(ctx context.Context, topic string, key []byte) (engine.KVRecord, error)
	KVTopicStats(ctx context.Context, topic string, count bool) (engine.KVTopicStats, error)
}

const (
	// kvTimeout bounds a request; the engine's own budget for a stale
	// pointer (2 s) fits inside it.
	kvTimeout = 5 * time.Second
	// mgetMax bounds the keys of one _mget, mgetBody its body.
	mgetMax  = 1000
	mgetBody = 4 << 20
	// mgetWorkers reads that many keys of one _mget at a time.
	mgetWorkers = 8
)

type kvHandler struct {
	kv KV
}

// registerKV adds the KV routes to mux. guard puts each behind an ACL on
// its topic: values take READ, the index figures DESCRIBE.
func registerKV(mux *http.ServeMux, kv KV, guard func(auth.Operation, http.HandlerFunc) http.HandlerFunc) {
	h := &kvHandler{kv: kv}
	// Patterns with GET also match HEAD.
	mux.HandleFunc("GET /v1/kv/{topic}/{key...}", guard(auth.OpRead, h.get))
	mux.HandleFunc("POST /v1/kv/{topic}/_mget", guard(auth.OpRead, h.mget))
	mux.HandleFunc("GET /v1/kv/{topic}", guard(auth.OpDescribe, h.stats))
}

// decodeKey reads a key as the request encodes it.
func decodeKey(r *http.Request, raw string) ([]byte, error) {
	switch enc := r.URL.Query().Get("key_encoding"); enc {
	case "", "utf8", "raw":
		return []byte(raw), nil
	case "base64url":
		// Padding is optional.
		b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(raw, "="))
		if err != nil {
			return nil, fmt.Errorf("key is not base64url: %v", err)
		}
		return b, nil
	default:
		return nil, fmt.Errorf("unknown key_encoding %q (use base64url, or percent-encode the key in the path)", enc)
	}
}

// kvStatus maps an engine error to an HTTP status.
func kvStatus(err error) int {
	switch {
	case errors.Is(err, engine.ErrKVGone):
		return http.StatusGone
	case errors.Is(err, engine.ErrKVUnavailable), errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable
	case errors.Is(err, engine.ErrKVNotFound), errors.Is(err, engine.ErrKVNotIndexed), errors.Is(err, engine.ErrUnknownTopic):
		return http.StatusNotFound
	case errors.Is(err, engine.ErrKVDisabled):
		return http.StatusNotImplemented
	default:
		return http.StatusInternalServerError
	}
}

// kvReason is a stable word for the error, for clients that branch on it.
func kvReason(err error) string {
	switch {
	case errors.Is(err, engine.ErrKVGone):
		return "gone"
	case errors.Is(err, engine.ErrKVUnavailable), errors.Is(err, context.DeadlineExceeded):
		return "unavailable"
	case errors.Is(err, engine.ErrKVNotFound):
		return "key_not_found"
	case errors.Is(err, engine.ErrKVNotIndexed):
		return "topic_not_indexed"
	case errors.Is(err, engine.ErrUnknownTopic):
		return "topic_not_found"
	case errors.Is(err, engine.ErrKVDisabled):
		return "index_disabled"
	default:
		return "error"
	}
}

func kvError(w http.ResponseWriter, err error) {
	code := kvStatus(err)
	if code == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, code, map[string]string{"error": err.Error(), "reason": kvReason(err)})
}

// etag names one record: a new value of a key is a new offset, and the
// topic id keeps a re-created topic's offsets apart.
func etag(topicID [16]byte, rec *engine.KVRecord) string {
	return `"` + hex.EncodeToString(topicID[:4]) + "-" + strconv.Itoa(int(rec.Partition)) + "-" + strconv.FormatInt(rec.Offset, 10) + `"`
}

// etagMatch implements If-None-Match (weak comparison, lists, "*").
func etagMatch(header, tag string) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimSpace(t)
		if t == "*" || strings.TrimPrefix(t, "W/") == tag {
			return true
		}
	}
	return false
}

// contentType is the record's content-type header when it is a valid
// media type.
func contentType(rec *engine.KVRecord) string {
	for _, h := range rec.Headers {
		if strings.EqualFold(string(h.Key), "content-type") && h.Value != nil {
			if _, _, err := mime.ParseMediaType(string(h.Value)); err == nil {
				return string(h.Value)
			}
		}
	}
	return "application/octet-stream"
}

func (h *kvHandler) get(w http.ResponseWriter, r *http.Request) {
	topic := r.PathValue("topic")
	key, err := decodeKey(r, r.PathValue("key"))
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error(), "reason": "bad_key"})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), kvTimeout)
	defer cancel()
	rec, err := h.kv.KVGet(ctx, topic, key)
	if err != nil {
		kvError(w, err)
		return
	}
	hd := w.Header()
	tag := etag(rec.TopicID, &rec)
	hd.Set("ETag", tag)
	hd.Set("Cache-Control", "no-cache")
	hd.Set("X-Korvet-Partition", strconv.Itoa(int(rec.Partition)))
	hd.Set("X-Korvet-Offset", strconv.FormatInt(rec.Offset, 10))
	hd.Set("X-Korvet-Timestamp", strconv.FormatInt(rec.Timestamp, 10))
	if inm := r.Header.Get("If-None-Match"); inm != "" && etagMatch(inm, tag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	hd.Set("Content-Type", contentType(&rec))
	// Values are producers' bytes: never let a browser guess them into
	// something executable.
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Content-Length", strconv.Itoa(len(rec.Value)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(rec.Value)
	}
}

// mgetResult is one key's answer in _mget.
type mgetResult struct {
	Key         string `json:"key"` // as sent
	Status      int    `json:"status"`
	Value       []byte `json:"value,omitempty"` // base64 (standard)
	Partition   *int32 `json:"partition,omitempty"`
	Offset      *int64 `json:"offset,omitempty"`
	Timestamp   *int64 `json:"timestamp,omitempty"`
	ContentType string `json:"content_type,omitempty"`
	Error       string `json:"error,omitempty"`
	Reason      string `json:"reason,omitempty"`
}

func (h *kvHandler) mget(w http.ResponseWriter, r *http.Request) {
	topic := r.PathValue("topic")
	var keys []string
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, mgetBody))
	if err == nil {
		err = json.Unmarshal(body, &keys)
	}
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "body must be a JSON array of keys (at most 4 MiB): " + err.Error(), "reason": "bad_request"})
		return
	}
	if len(keys) > mgetMax {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("%d keys; at most %d per request", len(keys), mgetMax), "reason": "bad_request"})
		return
	}
	raw := make([][]byte, len(keys))
	for i, k := range keys {
		if raw[i], err = decodeKey(r, k); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("key %d: %v", i, err), "reason": "bad_key"})
			return
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), kvTimeout)
	defer cancel()
	results := make([]mgetResult, len(keys))
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range min(mgetWorkers, len(keys)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				results[i] = h.one(ctx, topic, keys[i], raw[i])
			}
		}()
	}
	for i := range keys {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	// A topic that cannot answer at all is the request's failure.
	if len(results) > 0 && (results[0].Reason == "topic_not_found" || results[0].Reason == "topic_not_indexed" || results[0].Reason == "index_disabled") {
		writeJSON(w, results[0].Status, map[string]string{"error": results[0].Error, "reason": results[0].Reason})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"topic": topic, "results": results})
}

func (h *kvHandler) one(ctx context.Context, topic, sent string, key []byte) mgetResult {
	rec, err := h.kv.KVGet(ctx, topic, key)
	if err != nil {
		return mgetResult{Key: sent, Status: kvStatus(err), Error: err.Error(), Reason: kvReason(err)}
	}
	return mgetResult{
		Key: sent, Status: http.StatusOK, Value: rec.Value,
		Partition: &rec.Partition, Offset: &rec.Offset, Timestamp: &rec.Timestamp,
		ContentType: contentType(&rec),
	}
}

func (h *kvHandler) stats(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	st, err := h.kv.KVTopicStats(ctx, r.PathValue("topic"), r.URL.Query().Get("count") == "exact")
	if err != nil {
		kvError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}
