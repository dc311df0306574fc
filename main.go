// Command korvet is a Kafka-compatible broker whose log lives in Redis
// Streams.
//
// Data flow: Kafka clients → kafkawire (protocol, record batches) →
// engine (topics, partitions, offsets; appends group-committed as Redis
// transactions) → resp (pipelined RESP to Redis). Fetches go the other
// way. web serves the status page, its JSON API, /metrics, health and the
// KV view.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/korvet/korvet/cold"
	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/engine/auth"
	"github.com/korvet/korvet/kafkawire"
	"github.com/korvet/korvet/resp"
	"github.com/korvet/korvet/web"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

const usage = `korvet: a Kafka-compatible broker on Redis Streams

usage:
  korvet serve [--config korvet.toml]   run the broker
  korvet index rebuild|verify [--config korvet.toml] [--topic T]
                                        rebuild the KV key index from the log, or
                                        compare it with the log (korvet stopped)
  korvet user add|delete|list [--config korvet.toml] [NAME]
                                        manage SASL users (password from a
                                        prompt or stdin)
  korvet version                        print the version
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "version", "--version", "-v":
		fmt.Fprintf(stdout, "korvet %s\n", version)
		return 0
	case "serve":
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		fs.SetOutput(stderr)
		cfgPath := fs.String("config", "/etc/korvet/korvet.toml", "path to korvet.toml")
		if err := fs.Parse(args[1:]); err != nil {
			return 2
		}
		cfg, err := loadConfig(*cfgPath)
		if err != nil {
			fmt.Fprintf(stderr, "korvet: %v\n", err)
			return 1
		}
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
		defer stop()
		if err := serve(ctx, cfg, stderr); err != nil {
			fmt.Fprintf(stderr, "korvet: %v\n", err)
			return 1
		}
		return 0
	case "index":
		return runIndex(args[1:], stdout, stderr)
	case "user":
		return runUser(args[1:], os.Stdin, stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "korvet: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
}

func serve(ctx context.Context, cfg Config, logOut io.Writer) error {
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.LogLevel))
	log := slog.New(slog.NewTextHandler(logOut, &slog.HandlerOptions{Level: level}))
	started := time.Now()

	rc, err := resp.New(cfg.Redis.URL, resp.Options{PoolSize: cfg.Redis.PoolSize, Timeout: cfg.Redis.Timeout.Duration, Logger: log})
	if err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	defer rc.Close()
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err = rc.Ping(pingCtx)
	cancel()
	if err != nil {
		return fmt.Errorf("redis at %s does not answer (is redis-server running? set [redis] url in the config): %w", cfg.shownRedisURL(), err)
	}

	// The cold tier opens even while the object store is down: archiving
	// waits for it, and data stays in Redis meanwhile.
	store, err := cold.Open(ctx, cfg.coldConfig(), log)
	if err != nil {
		return fmt.Errorf("cold tier: %w", err)
	}
	defer store.Close()

	eng, err := engine.Open(ctx, rc, engine.Options{
		Keyspace:          cfg.Redis.Keyspace,
		AutoCreateTopics:  cfg.Kafka.AutoCreateTopics,
		DefaultPartitions: cfg.Kafka.DefaultPartitions,
		TopicDefaults:     cfg.topicDefaults,
		Cold:              store,
		TieringInterval:   cfg.Cold.ArchiveInterval.Duration,
		Index:             engine.IndexOptions{Dir: indexDir(cfg)},
		// The engine reads 0 as its default; "0s" in the file means none.
		GroupInitialRebalanceDelay: cmp.Or(cfg.Kafka.GroupInitialRebalanceDelay.Duration, -1),
		Logger:                     log,

		// Bounds on what clients can create.
		MaxPartitionsPerTopic: cfg.Kafka.MaxPartitionsPerTopic,
		MaxPartitions:         cfg.Kafka.MaxPartitions,
	})
	if err != nil {
		return fmt.Errorf("open engine: %w", err)
	}
	defer eng.Close()

	users, err := auth.Open(ctx, rc, auth.Options{Keyspace: cfg.Redis.Keyspace, Logger: log})
	if err != nil {
		return fmt.Errorf("open users and ACLs: %w", err)
	}
	if err := ensureAdmin(ctx, cfg, users, log); err != nil {
		return err
	}
	// One policy for every door: the Kafka listeners and HTTP.
	policy := &auth.Policy{Store: users, ACLs: cfg.Kafka.ACLs, SuperUsers: cfg.superUsers()}
	kls, err := kafkaListeners(cfg)
	if err != nil {
		return err
	}
	// One registry per process (no global default): tests run several
	// korvets in one binary.
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	kmetrics := kafkawire.NewMetrics(reg)
	ks := kafkawire.NewServer(eng, kafkawire.Options{
		MaxRequestBytes:      cfg.Kafka.MaxRequestBytes,
		NodeID:               cfg.Kafka.NodeID,
		MaxConnections:       cfg.Kafka.MaxConnections,
		MaxInFlightBytes:     cfg.Kafka.MaxInFlightBytes,
		Metrics:              kmetrics,
		Auth:                 users,
		ACLs:                 cfg.Kafka.ACLs,
		SuperUsers:           policy.SuperUsers,
		AllowPlainWithoutTLS: cfg.Kafka.AllowPlainWithoutTLS,
		Logger:               log,

		// Bounds on what one client can make korvet hold.
		MaxProduceDecompressedBytes: cfg.Kafka.MaxProduceDecompressedBytes,
		MaxConnectionsPerIP:         cfg.Kafka.MaxConnectionsPerIP,
		SASLAuthTimeout:             cfg.Kafka.SASLAuthTimeout.Duration,
		ConnectionsMaxIdle:          cfg.Kafka.ConnectionsMaxIdle.Duration,
	})

	hln, err := net.Listen("tcp", cfg.HTTP.Listen)
	if err != nil {
		closeListeners(kls)
		return fmt.Errorf("http listen on %s: %w", cfg.HTTP.Listen, err)
	}
	var listeners []web.Listener
	var logListeners []any
	for _, l := range kls {
		name, advertised := listenerName(l), net.JoinHostPort(l.AdvertisedHost, fmt.Sprint(l.AdvertisedPort))
		listeners = append(listeners, web.Listener{Name: name, Address: l.Addr().String()}, web.Listener{Name: name + " advertised", Address: advertised})
		key := strings.ToLower(strings.ReplaceAll(name, " ", "_"))
		logListeners = append(logListeners, key, l.Addr().String(), key+"_advertised", advertised)
	}
	hs := newHTTPServer(cfg, web.New(eng, web.Options{
		Version:   version,
		Started:   started,
		Listeners: append(listeners, web.Listener{Name: "HTTP", Address: hln.Addr().String()}),
		Kafka:     kafkaStats(ks, kmetrics),
		Index:     indexStatus(eng),
		RebuildIndex: func(context.Context) error {
			return eng.KV().StartRebuild()
		},
		Tiering:       tieringStatus(eng),
		Metrics:       reg,
		AdminToken:    cfg.HTTP.AdminToken,
		Login:         cfg.HTTP.Auth,
		Passwords:     users,
		Policy:        policy,
		RestrictHosts: cfg.HTTP.Auth == authNone,
		Hosts:         cfg.HTTP.Hosts,
		Logger:        log,

		KVMgetMaxBytes: cfg.HTTP.KVMgetMaxBytes,
	}))
	if cfg.HTTP.Auth == authBasic && cfg.HTTP.CertFile == "" && !loopbackListen(cfg.HTTP.Listen) {
		log.Warn("HTTP Basic logins cross the network in the clear: set [http] cert_file and key_file for HTTPS", "http", hln.Addr().String())
	}
	go func() {
		var err error
		if ln := limitListener(hln, cfg.HTTP.MaxConnections); cfg.HTTP.CertFile != "" {
			err = hs.ServeTLS(ln, cfg.HTTP.CertFile, cfg.HTTP.KeyFile)
		} else {
			err = hs.Serve(ln)
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("http server", "err", err)
		}
	}()
	// The same API on a unix socket in data_dir, owner-only: local
	// administration (korvet index rebuild, the nightly timer) without a
	// token, as the file permissions already say who may.
	us, err := serveAdminSocket(adminSocket(cfg), hs.Handler, log)
	if err != nil {
		log.Warn("no local admin socket; korvet index rebuild needs [http] admin_token while korvet runs", "err", err)
	}
	log.Info("korvet started", append(append([]any{"version", version}, logListeners...), "http", hln.Addr().String(), "redis", cfg.shownRedisURL(), "keyspace", cfg.Redis.Keyspace)...)

	err = ks.ServeListeners(ctx, cfg.ShutdownGrace.Duration, kls...)
	shutCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = hs.Shutdown(shutCtx)
	if us != nil {
		_ = us.Shutdown(shutCtx)
		_ = os.Remove(adminSocket(cfg))
	}
	log.Info("korvet stopped")
	return err
}

// kafkaStats feeds the status page from the Kafka server.
func kafkaStats(ks *kafkawire.Server, m *kafkawire.Metrics) func() web.KafkaStats {
	return func() web.KafkaStats {
		t := m.Totals()
		return web.KafkaStats{Connections: ks.Connected.Load(), Requests: t.Requests, BytesIn: t.BytesIn, BytesOut: t.BytesOut,
			ProducedRecords: t.ProducedRecords, FetchedRecords: t.FetchedRecords}
	}
}

// tieringStatus feeds the status page from the archiving worker.
func tieringStatus(eng *engine.Engine) func(context.Context) (web.TieringStatus, error) {
	return func(context.Context) (web.TieringStatus, error) {
		st, _ := eng.Tiering()
		out := web.TieringStatus{BacklogSegments: st.BacklogSegments, BacklogBytes: st.BacklogBytes, Errors: st.Errors, LastError: st.LastError, LastErrorAt: st.LastErrorAt}
		if a := st.LastArchived; a != nil {
			out.LastArchived = &web.ArchivedSegment{Topic: a.Topic, Partition: a.Partition, Segment: a.Segment, Records: a.Records, Bytes: a.Bytes, At: a.At}
		}
		return out, nil
	}
}

// serveAdminSocket serves h on a unix socket readable by korvet's user
// only; requests on it count as the local administrator's.
func serveAdminSocket(path string, h http.Handler, log *slog.Logger) (*http.Server, error) {
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
		// Left by a korvet that did not stop cleanly: nothing else can
		// hold it, as the index lock in the same data_dir says.
		_ = os.Remove(path)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("admin socket %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("admin socket %s: %w", path, err)
	}
	us := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ConnContext: func(ctx context.Context, _ net.Conn) context.Context { return web.LocalAdmin(ctx) }}
	go func() {
		if err := us.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("admin socket", "err", err)
		}
	}()
	return us, nil
}
