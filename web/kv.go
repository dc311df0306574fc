package web

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/engine/auth"
	"github.com/korvet/korvet/engine/schema"
)

// The KV view: GET/HEAD /v1/kv/{topic}/{key}, POST /v1/kv/{topic}/_mget
// and GET /v1/kv/{topic} (index figures). Keys are percent-encoded in the
// path, or base64url with ?key_encoding=base64url for binary keys.

// KV is what the KV view needs of the engine; *engine.KV has it.
type KV interface {
	Get(ctx context.Context, topic string, key []byte) (engine.KVRecord, error)
	TopicStats(ctx context.Context, topic string, count bool) (engine.KVTopicStats, error)
}

// kvWaiter waits for read-your-writes tokens; *engine.KV has it.
type kvWaiter interface {
	WaitToken(ctx context.Context, topic string, tokens ...string) error
}

// maxTokenBytes bounds the read-your-writes tokens of one request, read
// before the engine bounds their pairs by the topic's partitions.
const maxTokenBytes = 64 << 10

// awaitToken makes the request wait for its read-your-writes tokens
// (?after=P:O[,P:O...] and the Korvet-After header, same syntax): the
// broker answers once its index has applied those offsets. false when it
// answered the request itself: 400 for a malformed token, 503 with
// Retry-After when the index is still behind after the engine's wait.
func (h *kvHandler) awaitToken(ctx context.Context, w http.ResponseWriter, r *http.Request, topic string) bool {
	var tokens []string
	if r.URL.RawQuery != "" {
		tokens = r.URL.Query()["after"]
	}
	tokens = append(tokens, r.Header.Values("Korvet-After")...)
	if len(tokens) == 0 {
		return true
	}
	n := 0
	for _, t := range tokens {
		n += len(t)
	}
	if n > maxTokenBytes {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("read-your-writes tokens of %d bytes, at most %d", n, maxTokenBytes), "reason": "bad_token"})
		return false
	}
	waiter, ok := h.kv.(kvWaiter)
	if !ok {
		writeJSON(w, http.StatusNotImplemented, map[string]string{"error": "this KV view takes no read-your-writes tokens", "reason": "bad_token"})
		return false
	}
	err := waiter.WaitToken(ctx, topic, tokens...)
	var behind *engine.KVBehindError
	switch {
	case err == nil:
		return true
	case errors.Is(err, engine.ErrKVBadToken):
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error(), "reason": "bad_token"})
	case errors.As(err, &behind):
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"error": err.Error(), "reason": "index_behind",
			"partition": behind.Partition, "behind": behind.Behind})
	default:
		kvError(w, err)
	}
	return false
}

const (
	// kvTimeout bounds a request; the engine's own budget for a stale
	// pointer (2 s) fits inside it.
	kvTimeout = 5 * time.Second
	// mgetMax bounds the keys of one _mget, mgetBody its body.
	mgetMax  = 1000
	mgetBody = 4 << 20
	// mgetWorkers reads that many keys of one _mget at a time at most.
	mgetWorkers = 8
	// mgetReadAhead bounds the value bytes one _mget holds read ahead of
	// its writer (see mgetFlow); a smaller cap bounds it instead.
	mgetReadAhead = 4 << 20
	// DefaultKVMgetMaxBytes caps the value bytes of one _mget answer
	// ([http] kv_mget_max_bytes).
	DefaultKVMgetMaxBytes = 16 << 20
)

type kvHandler struct {
	kv KV
	// mgetMaxBytes caps the value bytes of one _mget answer.
	mgetMaxBytes int64
	// schemas renders registry-framed values as JSON on request; nil: off.
	schemas schema.Lookup
}

// registerKV adds the KV routes to mux; mgetMaxBytes <= 0 means
// DefaultKVMgetMaxBytes. guard puts each route behind an ACL on its topic:
// values take READ, the index figures DESCRIBE. schemas (may be nil)
// finds the schemas of registry-framed values for GET's JSON rendering.
func registerKV(mux *http.ServeMux, kv KV, mgetMaxBytes int64, schemas schema.Lookup, guard func(auth.Operation, http.HandlerFunc) http.HandlerFunc) {
	if mgetMaxBytes <= 0 {
		mgetMaxBytes = DefaultKVMgetMaxBytes
	}
	h := &kvHandler{kv: kv, mgetMaxBytes: mgetMaxBytes, schemas: schemas}
	// Patterns with GET also match HEAD.
	mux.HandleFunc("GET /v1/kv/{topic}/{key...}", guard(auth.OpRead, h.get))
	mux.HandleFunc("POST /v1/kv/{topic}/_mget", guard(auth.OpRead, h.mget))
	mux.HandleFunc("GET /v1/kv/{topic}", guard(auth.OpDescribe, h.stats))
}

// decodeKey reads a key as the request encodes it.
func decodeKey(r *http.Request, raw string) ([]byte, error) {
	enc := ""
	if r.URL.RawQuery != "" {
		enc = r.URL.Query().Get("key_encoding")
	}
	switch enc {
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

// appendETag appends the ETag of a record to dst. It names one record: a
// new value of a key is a new offset, and the topic id keeps a re-created
// topic's offsets apart. rep tells a representation other than the
// value's bytes apart ("json"), so that a cache never answers one with
// the other.
func appendETag(dst []byte, topicID [16]byte, rec *engine.KVRecord, rep string) []byte {
	dst = append(dst, '"')
	dst = hex.AppendEncode(dst, topicID[:4])
	dst = append(dst, '-')
	dst = strconv.AppendInt(dst, int64(rec.Partition), 10)
	dst = append(dst, '-')
	dst = strconv.AppendInt(dst, rec.Offset, 10)
	if rep != "" {
		dst = append(dst, '-')
		dst = append(dst, rep...)
	}
	return append(dst, '"')
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

// contentType is the Content-Type to serve a record's value with: its
// content-type header, normalized, when that is a well-formed media type
// that browsers show passively, else application/octet-stream. Values are
// producers' bytes, so a type a browser would render actively (run
// scripts, load subresources, follow links) is never passed on. The rule,
// as README.md states it:
//   - text/plain, text/csv, text/tab-separated-values and text/markdown;
//   - application/*, image/*, audio/*, video/* and font/* types whose
//     subtype (suffix included) contains none of activeWords: no HTML,
//     XHTML, SVG, XML or +xml, XSLT, JavaScript/ECMAScript, PDF, Flash;
//   - nothing else: other text/* (text/html, text/xml, text/javascript,
//     text/css...), multipart/* (x-mixed-replace), message/*, model/*,
//     wildcards.
func contentType(rec *engine.KVRecord) string {
	for _, h := range rec.Headers {
		if strings.EqualFold(string(h.Key), "content-type") && h.Value != nil {
			if ct := passiveType(string(h.Value)); ct != "" {
				return ct
			}
			break
		}
	}
	return "application/octet-stream"
}

// activeWords in a media subtype mark a type browsers may render actively.
var activeWords = []string{"html", "xml", "script", "svg", "xsl", "pdf", "flash"}

// passiveType returns v normalized when the rule of contentType lets it
// through, else "".
func passiveType(v string) string {
	mt, params, err := mime.ParseMediaType(v)
	if err != nil {
		return ""
	}
	top, sub, ok := strings.Cut(mt, "/") // mt is lower case
	if !ok || sub == "" || strings.Contains(sub, "*") {
		return ""
	}
	switch top {
	case "text":
		switch sub {
		case "plain", "csv", "tab-separated-values", "markdown":
		default:
			return ""
		}
	case "application", "image", "audio", "video", "font":
		for _, w := range activeWords {
			if strings.Contains(sub, w) {
				return ""
			}
		}
	default:
		return ""
	}
	// Formatted again, so that the header carries exactly what was checked.
	return mime.FormatMediaType(mt, params)
}

// setKVHeaders marks a response as data, not a page: no MIME sniffing,
// and should a browser render it anyway, a sandbox (no scripts, no
// plugins, no forms, an opaque origin).
func setKVHeaders(h http.Header) {
	vals := []string{"nosniff", "sandbox"} // one allocation for both
	h["X-Content-Type-Options"] = vals[0:1:1]
	h["Content-Security-Policy"] = vals[1:2:2]
}

// withKVHeaders sets the KV headers on every answer under /v1/kv, the
// mux's own (405, 404, the redirect to a cleaned path) included. Keep it
// the outermost wrapper, so that answers of anything it wraps (such as
// an authentication check) carry them too.
func withKVHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isKVPath(r.URL.Path) {
			setKVHeaders(w.Header())
		}
		next.ServeHTTP(w, r)
	})
}

// isKVPath reports whether p, as sent or cleaned as the mux cleans it, is
// under /v1/kv.
func isKVPath(p string) bool {
	under := func(q string) bool { return q == "/v1/kv" || strings.HasPrefix(q, "/v1/kv/") }
	return under(p) || under(path.Clean("/"+p))
}

func (h *kvHandler) get(w http.ResponseWriter, r *http.Request) {
	topic := r.PathValue("topic")
	key, err := decodeKey(r, r.PathValue("key"))
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error(), "reason": "bad_key"})
		return
	}
	// JSON is rendered when the registry is on and Accept prefers it.
	wantJSON, rawOK := false, true
	if h.schemas != nil {
		wantJSON, rawOK = negotiateJSON(r.Header.Values("Accept"))
	}
	// kvTimeout bounds the request as a whole when it waits for a token
	// or renders JSON; a plain read is bounded by the engine's own budget,
	// well within it, and needs no timer of its own.
	ctx := r.Context()
	if wantJSON || r.URL.RawQuery != "" || len(r.Header["Korvet-After"]) > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, kvTimeout)
		defer cancel()
	}
	if !h.awaitToken(ctx, w, r, topic) {
		return
	}
	rec, err := h.kv.Get(ctx, topic, key)
	if err != nil {
		kvError(w, err)
		return
	}
	hd := w.Header()
	body, ctype, rep := rec.Value, "", ""
	if h.schemas != nil {
		// The answer depends on Accept from here on.
		hd.Add("Vary", "Accept")
		if wantJSON {
			js, reason, err := h.valueJSON(ctx, rec.Value)
			switch {
			case err == nil:
				body, ctype, rep = js, "application/json", "json"
			case reason == "unavailable":
				kvError(w, err)
				return
			case !rawOK:
				writeJSON(w, http.StatusNotAcceptable, map[string]string{"error": err.Error(), "reason": reason})
				return
			}
		}
	}
	// The header values: the numbers in one string, and one slice for
	// all of them (Header.Set would allocate a string and a slice each).
	var buf [128]byte
	b := appendETag(buf[:0], rec.TopicID, &rec, rep)
	ends := [4]int{len(b)}
	b = strconv.AppendInt(b, int64(rec.Partition), 10)
	ends[1] = len(b)
	b = strconv.AppendInt(b, rec.Offset, 10)
	ends[2] = len(b)
	b = strconv.AppendInt(b, rec.Timestamp, 10)
	ends[3] = len(b)
	b = strconv.AppendInt(b, int64(len(body)), 10)
	nums := string(b)
	tag := nums[:ends[0]]
	vals := make([]string, 7)
	set := func(i int, name, v string) {
		vals[i] = v
		hd[name] = vals[i : i+1 : i+1]
	}
	set(0, "Etag", tag)
	set(1, "Cache-Control", "no-cache")
	set(2, "X-Korvet-Partition", nums[ends[0]:ends[1]])
	set(3, "X-Korvet-Offset", nums[ends[1]:ends[2]])
	set(4, "X-Korvet-Timestamp", nums[ends[2]:ends[3]])
	if inm := r.Header.Get("If-None-Match"); inm != "" && etagMatch(inm, tag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	if ctype == "" {
		ctype = contentType(&rec)
	}
	set(5, "Content-Type", ctype)
	set(6, "Content-Length", nums[ends[3]:])
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}

// negotiateJSON reads Accept: wantJSON when the client names
// application/json with a q at least as high as anything else it names
// (a tie goes to JSON, which it named explicitly); rawOK when it accepts
// something else too (*/*, application/*, another type), so that a value
// that cannot be rendered as JSON is served as its bytes rather than
// refused. No Accept, or one without application/json, keeps the bytes.
// Entries with a malformed q are ignored.
func negotiateJSON(accept []string) (wantJSON, rawOK bool) {
	qJSON, qOther := -1.0, -1.0
	for _, line := range accept {
		for _, entry := range strings.Split(line, ",") {
			if strings.TrimSpace(entry) == "" {
				continue
			}
			mt, params, err := mime.ParseMediaType(entry)
			if err != nil {
				continue
			}
			q := 1.0
			if qs, ok := params["q"]; ok {
				if q, err = strconv.ParseFloat(qs, 64); err != nil || q < 0 || q > 1 {
					continue
				}
			}
			if mt == "application/json" {
				qJSON = max(qJSON, q)
			} else {
				qOther = max(qOther, q)
			}
		}
	}
	return qJSON > 0 && qJSON >= qOther, qOther > 0
}

// valueJSON renders a registry-framed value as JSON through its schema.
// On failure reason says why, for the client: not_framed, unknown_schema,
// undecodable, or unavailable (out of time: answered 503, not 406).
func (h *kvHandler) valueJSON(ctx context.Context, v []byte) ([]byte, string, error) {
	id, payload, ok := schema.SplitFrame(v)
	if !ok {
		return nil, "not_framed", errors.New("the value is not registry-framed (magic byte 0 and a schema id): it has no JSON form; ask for */* to get its bytes")
	}
	s, err := h.schemas.SchemaByID(ctx, id)
	if err != nil {
		if ctx.Err() != nil {
			return nil, "unavailable", fmt.Errorf("look up schema %d: %w", id, ctx.Err())
		}
		return nil, "unknown_schema", fmt.Errorf("the value's schema id %d is not known to the registry: %w", id, err)
	}
	js, err := s.JSON(payload)
	if err != nil {
		return nil, "undecodable", fmt.Errorf("the value does not decode with schema %d (%s): %w", id, s.Format(), err)
	}
	return js, "", nil
}

// mgetResult is one key's answer in _mget.
type mgetResult struct {
	Key         string `json:"key"` // as sent
	Status      int    `json:"status"`
	Partition   *int32 `json:"partition,omitempty"`
	Offset      *int64 `json:"offset,omitempty"`
	Timestamp   *int64 `json:"timestamp,omitempty"`
	ContentType string `json:"content_type,omitempty"`
	Error       string `json:"error,omitempty"`
	Reason      string `json:"reason,omitempty"`
	// value is written as "value" (standard base64) by
	// mgetWriter.result, which streams it rather than encoding it whole in
	// memory.
	value []byte
}

// mgetSlot is one distinct key of an _mget on its way from a reader to
// the writer.
type mgetSlot struct {
	at   int    // index of the key's first appearance in the request
	sent string // as sent
	key  []byte // decoded
	done chan struct{}
	rec  engine.KVRecord
	err  error
}

// mgetFlow bounds how far an _mget reads ahead of its writer, in bytes:
// the values read and not yet written, plus the reads in flight counted
// at the largest value seen so far (half the budget until one is seen),
// stay within budget. One read may always run when nothing is held, so a
// value larger than the budget still gets through; with small values all
// mgetWorkers read at once.
type mgetFlow struct {
	mu       sync.Mutex
	budget   int64
	held     int64 // bytes read, not yet written
	inflight int
	est      int64
	seen     bool          // est is a value's size, not the first guess
	changed  chan struct{} // 1-buffered: held or inflight went down
}

func newMgetFlow(budget int64) *mgetFlow {
	return &mgetFlow{budget: budget, est: budget / 2, changed: make(chan struct{}, 1)}
}

// acquire waits until one more read fits; false when stop closes first.
func (f *mgetFlow) acquire(stop <-chan struct{}) bool {
	for {
		f.mu.Lock()
		if f.held == 0 && f.inflight == 0 || f.held+int64(f.inflight+1)*f.est <= f.budget {
			f.inflight++
			f.mu.Unlock()
			return true
		}
		f.mu.Unlock()
		select {
		case <-f.changed:
		case <-stop:
			return false
		}
	}
}

// read records a read that ended with a value of n bytes (0: none).
func (f *mgetFlow) read(n int64) {
	f.mu.Lock()
	f.inflight--
	f.held += n
	if n > 0 {
		if !f.seen {
			f.est, f.seen = n, true
		}
		f.est = max(f.est, n)
	}
	f.mu.Unlock()
	f.notify()
}

// written records that n bytes read are no longer held.
func (f *mgetFlow) written(n int64) {
	f.mu.Lock()
	f.held -= n
	f.mu.Unlock()
	f.notify()
}

func (f *mgetFlow) notify() {
	select {
	case f.changed <- struct{}{}:
	default:
	}
}

// mget answers POST /v1/kv/{topic}/_mget: a JSON array of keys in, one
// result per distinct key out, in the order the keys first appear (a key
// sent twice is read and answered once). The answer is streamed: keys are
// read a few at a time ahead of the writer, within mgetFlow's bytes, and
// each result is written as soon as it is its turn, so memory does not
// grow with keys times value sizes. Its value bytes are capped at
// mgetMaxBytes: the answer then ends with "truncated": true and "next",
// the index in the request of the first key not answered, and the client
// sends the keys from there again.
// A value larger than the cap on its own is answered 413 too_large (GET
// it alone), so that every answer makes progress.
func (h *kvHandler) mget(w http.ResponseWriter, r *http.Request) {
	topic := r.PathValue("topic")
	slots, ok := readMgetKeys(w, r)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), kvTimeout)
	defer cancel()
	if !h.awaitToken(ctx, w, r, topic) {
		return
	}
	// Readers take slots from jobs; ordered hands the same slots to the
	// writer in request order. flow bounds the read-ahead.
	jobs := make(chan *mgetSlot)
	ordered := make(chan *mgetSlot, mgetWorkers)
	stop := make(chan struct{}) // the writer wants no more
	flow := newMgetFlow(min(h.mgetMaxBytes, mgetReadAhead))
	var wg sync.WaitGroup
	for range min(mgetWorkers, len(slots)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for s := range jobs {
				s.rec, s.err = h.kv.Get(ctx, topic, s.key)
				flow.read(int64(len(s.rec.Value)))
				close(s.done)
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(ordered)
		defer close(jobs)
		for _, s := range slots {
			if !flow.acquire(stop) {
				return
			}
			select {
			case ordered <- s:
			case <-stop:
				return
			}
			select {
			case jobs <- s:
			case <-stop:
				s.err = errors.New("not read")
				close(s.done)
				return
			}
		}
	}()
	defer func() {
		close(stop)
		for range ordered {
		}
		wg.Wait()
	}()

	out := &mgetWriter{w: w}
	var total int64
	next := -1
	for s := range ordered {
		select {
		case <-s.done:
		default:
			// Nothing to write until this key is read: what is written
			// so far goes to the client meanwhile.
			out.flush()
			<-s.done
		}
		res := h.result(s)
		size := int64(len(s.rec.Value))
		s.rec = engine.KVRecord{} // the writer keeps the value until written
		if s.err != nil && ctx.Err() != nil {
			if !out.started {
				kvError(w, fmt.Errorf("_mget: %w", ctx.Err()))
				return
			}
			// Out of time: what is answered stands, the rest is next.
			next = s.at
			break
		}
		if !out.started {
			// A topic that cannot answer at all is the request's failure.
			if res.Reason == "topic_not_found" || res.Reason == "topic_not_indexed" || res.Reason == "index_disabled" {
				kvError(w, s.err)
				return
			}
			out.start(topic)
		}
		if n := int64(len(res.value)); res.Status == http.StatusOK && n > h.mgetMaxBytes {
			res = mgetResult{Key: res.Key, Status: http.StatusRequestEntityTooLarge, Reason: "too_large",
				Error: fmt.Sprintf("value of %d bytes is over the %d bytes an _mget answer may carry ([http] kv_mget_max_bytes): GET it alone", n, h.mgetMaxBytes)}
		} else if total+n > h.mgetMaxBytes {
			next = s.at
			break
		} else {
			total += n
		}
		err := out.result(&res)
		flow.written(size)
		if err != nil {
			return // the client is gone or too slow
		}
	}
	if !out.started {
		out.start(topic)
	}
	out.end(next)
}

// readMgetKeys reads an _mget body (a JSON array of at most mgetMax keys,
// at most mgetBody bytes) into one slot per distinct key, in the order
// the keys first appear; on bad input it answers 400 and returns false.
func readMgetKeys(w http.ResponseWriter, r *http.Request) ([]*mgetSlot, bool) {
	var keys []string
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, mgetBody))
	if err == nil {
		err = json.Unmarshal(body, &keys)
	}
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "body must be a JSON array of keys (at most 4 MiB): " + err.Error(), "reason": "bad_request"})
		return nil, false
	}
	if len(keys) > mgetMax {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("%d keys; at most %d per request", len(keys), mgetMax), "reason": "bad_request"})
		return nil, false
	}
	var slots []*mgetSlot
	seen := make(map[string]bool, len(keys))
	for i, k := range keys {
		key, err := decodeKey(r, k)
		if err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("key %d: %v", i, err), "reason": "bad_key"})
			return nil, false
		}
		if !seen[string(key)] {
			seen[string(key)] = true
			slots = append(slots, &mgetSlot{at: i, sent: k, key: key, done: make(chan struct{})})
		}
	}
	return slots, true
}

// result is a slot's answer; its value is the record's, not a copy.
func (h *kvHandler) result(s *mgetSlot) mgetResult {
	if s.err != nil {
		return mgetResult{Key: s.sent, Status: kvStatus(s.err), Error: s.err.Error(), Reason: kvReason(s.err)}
	}
	rec := &s.rec
	p, o, ts := rec.Partition, rec.Offset, rec.Timestamp
	return mgetResult{
		Key: s.sent, Status: http.StatusOK, value: rec.Value,
		Partition: &p, Offset: &o, Timestamp: &ts,
		ContentType: contentType(rec),
	}
}

// mgetWriter writes an _mget answer piece by piece:
// {"topic": T, "results": [R, ...], "truncated": B[, "next": N]}.
type mgetWriter struct {
	w       http.ResponseWriter
	bw      *bufio.Writer
	started bool
	n       int // results written
	err     error
}

func (m *mgetWriter) start(topic string) {
	m.started = true
	h := m.w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	m.w.WriteHeader(http.StatusOK)
	m.bw = bufio.NewWriterSize(m.w, 32<<10)
	t, _ := json.Marshal(topic)
	m.write(`{"topic":`, string(t), `,"results":[`)
}

func (m *mgetWriter) write(parts ...string) {
	for _, p := range parts {
		if m.err == nil {
			_, m.err = m.bw.WriteString(p)
		}
	}
}

// result writes one result, its value base64-encoded straight into the
// response.
func (m *mgetWriter) result(res *mgetResult) error {
	meta, err := json.Marshal(res)
	if err != nil {
		return fmt.Errorf("encode _mget result: %w", err)
	}
	if m.n > 0 {
		m.write(",")
	}
	m.n++
	if res.Status != http.StatusOK {
		m.write(string(meta))
		return m.err
	}
	m.write(`{"value":"`)
	if m.err == nil {
		enc := base64.NewEncoder(base64.StdEncoding, m.bw)
		if _, m.err = enc.Write(res.value); m.err == nil {
			m.err = enc.Close()
		}
	}
	// meta is {"key":...}: the value goes in front of its fields.
	m.write(`",`, string(meta[1:]))
	return m.err
}

// flush sends what is written so far.
func (m *mgetWriter) flush() {
	if m.started && m.err == nil {
		if m.err = m.bw.Flush(); m.err == nil {
			m.err = http.NewResponseController(m.w).Flush()
		}
	}
}

// end closes the answer; next >= 0 says it was cut short there.
func (m *mgetWriter) end(next int) {
	if next >= 0 {
		m.write(`],"truncated":true,"next":`, strconv.Itoa(next), "}\n")
	} else {
		m.write(`],"truncated":false}`, "\n")
	}
	if m.err == nil {
		m.err = m.bw.Flush()
	}
}

func (h *kvHandler) stats(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	if !h.awaitToken(ctx, w, r, r.PathValue("topic")) {
		return
	}
	st, err := h.kv.TopicStats(ctx, r.PathValue("topic"), r.URL.Query().Get("count") == "exact")
	if err != nil {
		kvError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}
