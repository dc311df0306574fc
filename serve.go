package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/cold"
	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/engine/auth"
	"github.com/korvet/korvet/engine/events"
	"github.com/korvet/korvet/engine/group"
	"github.com/korvet/korvet/engine/registry"
	"github.com/korvet/korvet/kafkawire"
	"github.com/korvet/korvet/resp"
	"github.com/korvet/korvet/web"
)

// serve runs korvet until ctx ends: Redis, the cold tier, the engine and
// the users first, then the doors (Kafka listeners, HTTP, the admin
// socket). On the way out the Kafka listeners drain, then HTTP stops.
func serve(ctx context.Context, cfg Config, logOut io.Writer) error {
	log := newLogger(cfg, logOut)
	started := time.Now()
	defer applyMemoryLimit(cfg.memoryPlan(), log)()

	rc, err := connectRedis(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer rc.Close()
	schemas, err := registry.Open(ctx, rc, registry.Options{Keyspace: cfg.Redis.Keyspace, Logger: log})
	if err != nil {
		return fmt.Errorf("schema registry: %w", err)
	}
	// The cold tier opens even while the object store is down: archiving
	// waits for it, and data stays in Redis meanwhile.
	store, err := cold.Open(ctx, cfg.coldConfig(), log)
	if err != nil {
		return fmt.Errorf("cold tier: %w", err)
	}
	defer store.Close()
	// Archived segments of a topic with a value schema in the registry get
	// typed columns next to the raw value.
	store.SetTyped(schemas.ValueTyped)
	// The Kafka listeners bind first: the broker registers its listeners'
	// real ports (an advertised port 0 is the bound one) with the others.
	kls, err := kafkaListeners(cfg)
	if err != nil {
		return err
	}
	eo := engineOptions(cfg, store, log)
	eo.Listeners = engineListeners(kls)
	eng, err := engine.Open(ctx, rc, eo)
	if err != nil {
		closeListeners(kls)
		return fmt.Errorf("open engine: %w", err)
	}
	defer eng.Close()
	users, policy, err := openUsers(ctx, cfg, rc, eng.Events(), log)
	if err != nil {
		closeListeners(kls)
		return err
	}
	// One registry per process (no global default): tests run several
	// korvets in one binary.
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	kmetrics := kafkawire.NewMetrics(reg)
	ks := newKafkaServer(cfg, eng, users, policy, kmetrics, log)

	hln, err := net.Listen("tcp", cfg.HTTP.Listen)
	if err != nil {
		closeListeners(kls)
		return fmt.Errorf("http listen on %s: %w", cfg.HTTP.Listen, err)
	}
	rln, err := registryListener(cfg)
	if err != nil {
		hln.Close()
		closeListeners(kls)
		return err
	}
	shown, logListeners := describeListeners(kls)
	shown = append(shown, web.Listener{Name: "HTTP", Address: hln.Addr().String()})
	logListeners = append(logListeners, "http", hln.Addr().String())
	if rln != nil {
		shown = append(shown, web.Listener{Name: "Schema registry", Address: rln.Addr().String()})
		logListeners = append(logListeners, "schema_registry", rln.Addr().String())
	}
	wopts := web.Options{
		Version:       version,
		Started:       started,
		Listeners:     shown,
		Kafka:         kafkaStats(ks, kmetrics),
		Admin:         adminVia(ks),
		Context:       ctx,
		Metrics:       reg,
		AdminToken:    cfg.HTTP.AdminToken,
		Login:         cfg.HTTP.Auth,
		Passwords:     users,
		Policy:        policy,
		RestrictHosts: cfg.HTTP.Auth == authNone,
		Hosts:         cfg.HTTP.Hosts,
		Logger:        log,
		Registry:      schemas,
		Schemas:       schemas, // the KV view's Accept: application/json

		KVMgetMaxBytes: cfg.HTTP.KVMgetMaxBytes,
	}
	hs := serveHTTP(cfg, hln, web.New(eng, wopts), log)
	var rs *http.Server
	if rln != nil {
		rs = serveDoor(cfg, registryDoor(cfg), rln, web.NewRegistry(schemas, wopts), log)
	}
	// The same API on a unix socket in data_dir, owner-only: local
	// administration (korvet index rebuild, the nightly timer) without a
	// token, as the file permissions already say who may.
	us, err := serveAdminSocket(adminSocket(cfg), hs.Handler, log)
	if err != nil {
		log.Warn("no local admin socket; korvet index rebuild needs [http] admin_token while korvet runs", "err", err)
	}
	log.Info("korvet started", append(append([]any{"version", version}, logListeners...), "redis", cfg.shownRedisURL(), "keyspace", cfg.Redis.Keyspace)...)

	serveCtx, stopServe := leaveFirst(ctx, cfg, eng, log)
	err = ks.ServeListeners(serveCtx, cfg.ShutdownGrace.Duration, kls...)
	stopServe()
	stopHTTP(cfg, hs, us, rs)
	log.Info("korvet stopped")
	return err
}

// leaveFirst returns a context that ends once ctx has ended (SIGTERM) and
// the engine has handed its partitions to the other brokers (bounded by
// shutdown_grace): the Kafka listeners keep answering meanwhile, so
// clients are told where the partitions went rather than losing the
// connection first.
func leaveFirst(ctx context.Context, cfg Config, eng *engine.Engine, log *slog.Logger) (context.Context, context.CancelFunc) {
	serveCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	go func() {
		defer cancel()
		select {
		case <-ctx.Done():
		case <-serveCtx.Done():
			return // the listeners stopped by themselves
		}
		leaveCtx, stop := context.WithTimeout(context.Background(), cfg.ShutdownGrace.Duration)
		defer stop()
		if err := eng.Leave(leaveCtx); err != nil {
			log.Warn("controlled shutdown incomplete; the other brokers take over when this one's lease lapses", "err", err)
		}
	}()
	return serveCtx, cancel
}

func newLogger(cfg Config, out io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.LogLevel))
	return slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: level}))
}

// connectRedis returns a client of the Redis in [redis] once it answers.
func connectRedis(ctx context.Context, cfg Config, log *slog.Logger) (*resp.Client, error) {
	rc, err := resp.New(cfg.Redis.URL, cfg.redisOptions(cfg.Redis.PoolSize, log))
	if err != nil {
		return nil, fmt.Errorf("redis: %w", err)
	}
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err = rc.Ping(pingCtx)
	cancel()
	if err != nil {
		rc.Close()
		return nil, fmt.Errorf("redis at %s does not answer (is redis-server running? set [redis] url in the config): %w", cfg.shownRedisURL(), err)
	}
	return rc, nil
}

func engineOptions(cfg Config, store *cold.Store, log *slog.Logger) engine.Options {
	return engine.Options{
		Keyspace:          cfg.Redis.Keyspace,
		WaitReplicas:      cfg.Redis.WaitReplicas,
		WaitTimeout:       cfg.Redis.WaitTimeout.Duration,
		AutoCreateTopics:  cfg.Kafka.AutoCreateTopics,
		DefaultPartitions: cfg.Kafka.DefaultPartitions,
		TopicDefaults:     cfg.topicDefaults,
		Cold:              store,
		TieringInterval:   cfg.Cold.ArchiveInterval.Duration,
		ArchiveMemory:     cfg.memoryPlan().archive,
		// The engine reads 0 as its default; "0s" in the file means off.
		MemorySampleInterval: cmp.Or(cfg.Redis.MemorySampleInterval.Duration, -1),
		Index:                engine.IndexOptions{Dir: indexDir(cfg), CacheSize: cfg.memoryPlan().indexCache},
		// The engine reads 0 as its default; "0s" in the file means none.
		GroupInitialRebalanceDelay: cmp.Or(cfg.Kafka.GroupInitialRebalanceDelay.Duration, -1),
		GroupCleanupInterval:       cfg.Kafka.GroupCleanupInterval.Duration,
		Transactions: engine.TxnOptions{
			MaxTimeout:    cfg.Kafka.TransactionMaxTimeout.Duration,
			IDExpiration:  cfg.Kafka.TransactionalIDExpiration.Duration,
			CheckInterval: cfg.Kafka.TransactionCheckInterval.Duration,
		},
		Share: engine.ShareOptions{
			LockDuration:      cfg.Kafka.ShareRecordLockDuration.Duration,
			DeliveryLimit:     cfg.Kafka.ShareDeliveryCountLimit,
			MaxPartitionLocks: cfg.Kafka.ShareMaxPartitionLocks,
			SessionTimeout:    cfg.Kafka.ShareSessionTimeout.Duration,
			HeartbeatInterval: cfg.Kafka.ShareHeartbeatInterval.Duration,
			MaxMembers:        cfg.Kafka.ShareMaxGroupMembers,
			MaxSessions:       cfg.Kafka.ShareMaxSessions,
		},
		ConsumerGroups: group.ConsumerOptions{
			SessionTimeout:    cfg.Kafka.ConsumerGroupSessionTimeout.Duration,
			HeartbeatInterval: cfg.Kafka.ConsumerGroupHeartbeatInterval.Duration,
			Assignor:          cfg.Kafka.ConsumerGroupAssignor,
			MaxSize:           cfg.Kafka.ConsumerGroupMaxSize,
			MigrationPolicy:   cfg.Kafka.ConsumerGroupMigrationPolicy,
		},
		Logger: log,

		// Bounds on what clients can create.
		MaxPartitionsPerTopic: cfg.Kafka.MaxPartitionsPerTopic,
		MaxPartitions:         cfg.Kafka.MaxPartitions,

		// Several brokers on one Redis (engine/cluster.go).
		NodeID:    cfg.Kafka.NodeID,
		Rack:      cfg.Kafka.Rack,
		LeaseTime: cfg.Kafka.BrokerSessionTimeout.Duration,
		LeaseFile: filepath.Join(cfg.DataDir, "broker.lease"),
	}
}

// openUsers opens the SASL users and ACLs, creates admin_user on first
// start, and returns the one policy of every door: the Kafka listeners
// and HTTP.
func openUsers(ctx context.Context, cfg Config, rc *resp.Client, events *events.Bus, log *slog.Logger) (*auth.Store, *auth.Policy, error) {
	users, err := auth.Open(ctx, rc, auth.Options{Keyspace: cfg.Redis.Keyspace, Logger: log, Events: events})
	if err != nil {
		return nil, nil, fmt.Errorf("open users and ACLs: %w", err)
	}
	if err := ensureAdmin(ctx, cfg, users, log); err != nil {
		return nil, nil, err
	}
	return users, &auth.Policy{Store: users, ACLs: cfg.Kafka.ACLs, SuperUsers: cfg.superUsers()}, nil
}

func newKafkaServer(cfg Config, eng *engine.Engine, users *auth.Store, policy *auth.Policy, m *kafkawire.Metrics, log *slog.Logger) *kafkawire.Server {
	return kafkawire.NewServer(eng, kafkawire.Options{
		MaxRequestBytes:      cfg.Kafka.MaxRequestBytes,
		NodeID:               cfg.Kafka.NodeID,
		MaxConnections:       cfg.Kafka.MaxConnections,
		MaxInFlightBytes:     cfg.memoryPlan().inflight,
		NoFetchReadAhead:     !cfg.Kafka.FetchReadAhead,
		Metrics:              m,
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
}

// kafkaStats feeds the status page from the Kafka server, which web does
// not import.
func kafkaStats(ks *kafkawire.Server, m *kafkawire.Metrics) func() web.KafkaStats {
	return func() web.KafkaStats {
		t := m.Totals()
		return web.KafkaStats{Connections: ks.Connected.Load(), Requests: t.Requests, BytesIn: t.BytesIn, BytesOut: t.BytesOut,
			ProducedRecords: t.ProducedRecords, FetchedRecords: t.FetchedRecords}
	}
}

// stopHTTP gives the requests in flight on HTTP, the admin socket and
// the schema registry (each nil when it did not open) 5s to finish, then
// removes the socket.
func stopHTTP(cfg Config, hs, us, rs *http.Server) {
	shutCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = hs.Shutdown(shutCtx)
	if rs != nil {
		_ = rs.Shutdown(shutCtx)
	}
	if us != nil {
		_ = us.Shutdown(shutCtx)
		_ = os.Remove(adminSocket(cfg))
	}
}

// adminVia runs the HTTP admin API's Kafka requests on ks, as the caller.
func adminVia(ks *kafkawire.Server) web.AdminFunc {
	return func(ctx context.Context, principal string, super bool, host string, req kmsg.Request) (kmsg.Response, error) {
		return ks.Local(ctx, kafkawire.Caller{Principal: principal, Super: super, Host: host}, req)
	}
}
