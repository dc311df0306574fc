// Package web serves korvet's HTTP side: the status page (embedded, no
// build step), its JSON API under /api/v1/, /metrics, and health. It reads
// the engine and never talks to Redis itself. Everything is read-only but
// the endpoints behind the admin token.
package web

import (
	"cmp"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/json"
	"io/fs"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/engine/auth"
	"github.com/korvet/korvet/engine/group"
	"github.com/korvet/korvet/engine/registry"
	"github.com/korvet/korvet/engine/schema"
)

// Options configure the handler. Everything but Version and Started may
// be left out; a part left out is shown as absent.
type Options struct {
	Version string
	Started time.Time
	// Listeners are the addresses korvet serves, for the status page.
	Listeners []Listener
	// Kafka reports the Kafka server's connections and traffic.
	Kafka func() KafkaStats
	// Admin runs Kafka requests as the HTTP caller
	// (kafkawire.Server.Local); nil turns the admin API off (503).
	Admin AdminFunc
	// Context bounds the handler's background work (the groups' lag
	// history sampler); nil: no lag history is kept.
	Context context.Context
	// LagSampleEvery is how often each group's total lag is sampled for
	// its lag history; 0 means 30s.
	LagSampleEvery time.Duration
	// Groups lists consumer groups with their lag; default eng.Groups().
	Groups Groups
	// Metrics is the process's Prometheus registry (the Kafka server's
	// metrics, Go runtime); /metrics adds the engine's gauges to it.
	Metrics prometheus.Gatherer
	// AdminToken, sent as "Authorization: Bearer <token>", logs a request
	// in as a super user; empty disables tokens.
	AdminToken string
	// Login says whether requests without credentials are served, as
	// User:ANONYMOUS (LoginNone, the default), or must log in with HTTP
	// Basic (LoginBasic). Basic credentials are accepted in both modes.
	Login string
	// Passwords checks HTTP Basic logins; nil turns Basic off.
	Passwords Passwords
	// Policy decides what each principal may see and do: the Kafka
	// listeners' own. Nil allows everything.
	Policy *auth.Policy
	// RestrictHosts makes anonymous requests name korvet in Host: an IP
	// address, localhost, or one of Hosts (against DNS rebinding).
	RestrictHosts bool
	Hosts         []string
	Logger        *slog.Logger

	// Registry is the schema registry, for the status page's Schemas
	// card, /api/v1/schemas and the korvet_schema_* gauges; nil hides
	// them.
	Registry *registry.Registry

	// KVMgetMaxBytes caps the value bytes of one _mget answer; 0 means
	// DefaultKVMgetMaxBytes.
	KVMgetMaxBytes int64
	// Schemas finds registry schemas by id, for the KV view's JSON
	// rendering of registry-framed values (Accept: application/json); nil
	// turns that off: values are served as their bytes whatever Accept
	// says.
	Schemas schema.Lookup
}

// Listener is one address korvet serves.
type Listener struct {
	Name    string `json:"name"`
	Address string `json:"address"`
}

// KafkaStats are the Kafka server's figures since start.
type KafkaStats struct {
	Connections     int64
	Requests        int64
	BytesIn         int64
	BytesOut        int64
	ProducedRecords int64
	FetchedRecords  int64
}

// Groups is what the page needs of the group coordinator.
type Groups interface {
	List() []group.Summary
	Lag(ctx context.Context, group string) ([]group.PartitionLag, error)
	DescribeConsumer(group string) (group.ConsumerDescription, error)
}

//go:embed static
var static embed.FS

type server struct {
	eng    *engine.Engine
	opts   Options
	groups Groups
	log    *slog.Logger
	// adminHash is the token's SHA-256; hashing both sides first makes the
	// comparison constant-time whatever the lengths.
	adminHash *[32]byte
	// openPage serves the page's files without a login (gate, pageShell).
	openPage bool
	logins   *loginCache
	// failBody, when set, writes the gate's refusals (default writeError).
	failBody func(w http.ResponseWriter, code int, msg string)
	// lagHistory is every group's recent total lag (admin_lag.go).
	lagHistory *lagHistory
	// apiRoutes are the routes registered under /api/v1 ("METHOD path").
	apiRoutes []string
	// leaderMoves counts leader events (korvet_leadership_moves_total).
	leaderMoves atomic.Int64
}

// New returns korvet's HTTP handler.
func New(eng *engine.Engine, opts Options) http.Handler {
	_, h := build(eng, opts)
	return h
}

// build is New, with the server behind the handler (for tests).
func build(eng *engine.Engine, opts Options) (*server, http.Handler) {
	s := newServer(opts)
	s.eng, s.groups = eng, opts.Groups
	if s.groups == nil {
		s.groups = eng.Groups()
	}
	s.countLeaderMoves(eng)
	s.lagHistory = newLagHistory()
	if opts.Context != nil {
		go s.lagHistory.run(opts.Context, s.groups, cmp.Or(opts.LagSampleEvery, lagEveryDefault))
	} else {
		close(s.lagHistory.done)
	}

	mux := &apiMux{ServeMux: http.NewServeMux()}
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /readyz", s.readyz)
	mux.HandleFunc("GET /metrics", s.clusterGuard(auth.OpDescribe, s.metrics))

	mux.route("GET /api/v1/status", s.apiStatus)
	mux.route("GET /api/v1/topics", s.apiTopics)
	mux.route("GET /api/v1/brokers", s.apiBrokers)
	mux.route("GET /api/v1/groups", s.apiGroups)
	mux.route("GET /api/v1/share-groups", s.apiShareGroups)
	mux.route("GET /api/v1/redis", s.apiRedis)
	mux.route("GET /api/v1/schemas", s.apiSchemas)
	mux.route("POST /api/v1/index/rebuild", s.admin("index.rebuild", s.apiIndexRebuild))
	s.registerAdmin(mux)
	registerKV(mux.ServeMux, eng.KV(), opts.KVMgetMaxBytes, opts.Schemas, s.topicGuard)
	if store := eng.ColdStore(); store != nil {
		// The Iceberg REST catalog, read-only: DuckDB, Trino, Spark or
		// PyIceberg attach to the archive at http://HOST/iceberg. A table
		// is a topic's archive: it takes READ on the topic.
		readable := func(r *http.Request, topic string) bool { return s.mayTopic(r, auth.OpRead, topic) }
		mux.Handle("/iceberg/", http.StripPrefix("/iceberg", store.RESTHandler(readable)))
	}

	assets, _ := fs.Sub(static, "static")
	s.openPage = true
	files := http.StripPrefix("/static", http.FileServerFS(assets))
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		pageHeaders(w)
		http.ServeFileFS(w, r, assets, "index.html")
	})
	mux.HandleFunc("GET /static/", func(w http.ResponseWriter, r *http.Request) {
		pageHeaders(w)
		files.ServeHTTP(w, r)
	})
	// The KV headers go outermost, so that refusals on KV paths carry
	// them too.
	s.apiRoutes = mux.patterns
	return s, withKVHeaders(s.gate(mux))
}

// newServer returns a server with opts' logins and policy: the HTTP side's
// and the schema registry's share how they log requests in.
func newServer(opts Options) *server {
	s := &server{opts: opts, log: opts.Logger, logins: newLoginCache()}
	if s.log == nil {
		s.log = slog.Default()
	}
	if opts.AdminToken != "" {
		h := sha256.Sum256([]byte(opts.AdminToken))
		s.adminHash = &h
	}
	return s
}

// pageHeaders keep the page self-contained: scripts and styles from
// korvet only, no framing, no referrer leaking LAN addresses.
func pageHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-cache")
}

func (s *server) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "version": s.opts.Version, "uptime_seconds": int64(time.Since(s.opts.Started).Seconds())})
}

// readyz answers 200 when Redis answers and, with a KV index, the index
// is open: what a load balancer or systemd watchdog wants to know.
func (s *server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	checks := map[string]string{}
	ok := true
	if err := s.eng.Ping(ctx); err != nil {
		checks["redis"], ok = err.Error(), false
	} else {
		checks["redis"] = "ok"
	}
	if ix, indexed := s.indexView(); indexed {
		if ix.Open {
			checks["index"] = "ok"
		} else {
			checks["index"], ok = "not open", false
		}
	}
	if !ok {
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "unavailable", "checks": checks})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ready", "checks": checks})
}

// localAdmin marks requests that came over korvet's unix socket in
// data_dir: the socket's file permissions (owner only) are the check, so
// the local korvet user (the nightly index rebuild) needs no token.
type localAdmin struct{}

// LocalAdmin returns ctx marked as a local administrator's: use it as the
// ConnContext of the server on the unix socket.
func LocalAdmin(ctx context.Context) context.Context {
	return context.WithValue(ctx, localAdmin{}, true)
}

func isLocalAdmin(ctx context.Context) bool {
	local, _ := ctx.Value(localAdmin{}).(bool)
	return local
}

// admin lets a request through only for those who may administer korvet
// (mayAdmin). A header (Basic or Bearer, not a cookie) carries the
// credentials, and gate refuses cross-site posts, so other sites' pages
// cannot forge the request.
func (s *server) admin(action string, next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		switch {
		case s.mayAdmin(r):
			next(w, r)
		case identityOf(r).principal == auth.Anonymous:
			s.challenge(w, r, "log in as a super user, or send Authorization: Bearer <[http] admin_token>")
		default:
			err := &apiError{status: http.StatusForbidden, code: "cluster_authorization_failed",
				msg: identityOf(r).principal + " is not authorized for administering korvet (needs a super user, or ALTER on the cluster)"}
			s.audit(r, action, "cluster", err)
			writeAPIError(w, err)
		}
	}
}

// clusterGuard runs h only for principals that may do op on the cluster:
// /metrics names every topic and group.
func (s *server) clusterGuard(op auth.Operation, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.allowed(r, op, auth.ResCluster, auth.ClusterName) {
			forbidden(w, r, op.String()+" on the cluster")
			return
		}
		h(w, r)
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"error": msg})
}
