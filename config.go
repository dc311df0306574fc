package main

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"time"
	"unicode"

	"github.com/BurntSushi/toml"

	"github.com/korvet/korvet/cold"
	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/engine/group"
	"github.com/korvet/korvet/internal/redact"
	"github.com/korvet/korvet/resp"
)

// Config is korvet.toml. Every key is documented in README.md with its
// default; defaults live in defaultConfig.
type Config struct {
	DataDir  string `toml:"data_dir"`
	LogLevel string `toml:"log_level"`
	// AdminUser, with the password in AdminPasswordFile, is created at
	// start-up when it has no credentials yet, and is a super user on
	// every door (security.go).
	AdminUser         string `toml:"admin_user"`
	AdminPasswordFile string `toml:"admin_password_file"`
	Kafka             struct {
		Listen     string `toml:"listen"`
		Advertised string `toml:"advertised"`
		NodeID     int32  `toml:"node_id"`
		// Rack is this broker's rack (Kafka's broker.rack), shown to
		// clients; BrokerSessionTimeout is the lease of its registration
		// among the brokers on one Redis (engine/cluster.go).
		Rack                 string   `toml:"rack"`
		BrokerSessionTimeout duration `toml:"broker_session_timeout"`
		AutoCreateTopics     bool     `toml:"auto_create_topics"`
		DefaultPartitions    int32    `toml:"default_partitions"`
		MaxRequestBytes      int32    `toml:"max_request_bytes"`
		MaxConnections       int      `toml:"max_connections"`
		MaxInFlightBytes     int64    `toml:"max_inflight_bytes"`
		// FetchReadAhead starts a partition's next read when a fetch's
		// stops at its limits (kafkawire/fetch_ahead.go).
		FetchReadAhead bool `toml:"fetch_read_ahead"`
		// GroupInitialRebalanceDelay is Kafka's group.initial.rebalance.delay.ms.
		GroupInitialRebalanceDelay duration `toml:"group_initial_rebalance_delay"`
		// GroupCleanupInterval is Kafka's offsets.retention.check.interval.ms.
		GroupCleanupInterval duration `toml:"group_cleanup_interval"`
		// Transactions (engine/txn): Kafka's transaction.max.timeout.ms,
		// transactional.id.expiration.ms and
		// transaction.abort.timed.out.transaction.cleanup.interval.ms.
		TransactionMaxTimeout     duration `toml:"transaction_max_timeout"`
		TransactionalIDExpiration duration `toml:"transactional_id_expiration"`
		TransactionCheckInterval  duration `toml:"transaction_check_interval"`
		// Share groups (KIP-932; engine/share.go).
		ShareRecordLockDuration duration `toml:"share_record_lock_duration"`
		ShareDeliveryCountLimit int      `toml:"share_delivery_count_limit"`
		ShareMaxPartitionLocks  int      `toml:"share_max_partition_locks"`
		ShareSessionTimeout     duration `toml:"share_session_timeout"`
		ShareHeartbeatInterval  duration `toml:"share_heartbeat_interval"`
		ShareMaxGroupMembers    int      `toml:"share_max_group_members"`
		ShareMaxSessions        int      `toml:"share_max_sessions"`
		// Consumer groups (KIP-848): Kafka's
		// group.consumer.session.timeout.ms, heartbeat.interval.ms,
		// the default server assignor and group.consumer.max.size.
		ConsumerGroupSessionTimeout    duration `toml:"consumer_group_session_timeout"`
		ConsumerGroupHeartbeatInterval duration `toml:"consumer_group_heartbeat_interval"`
		ConsumerGroupAssignor          string   `toml:"consumer_group_assignor"`
		ConsumerGroupMaxSize           int      `toml:"consumer_group_max_size"`
		// Kafka's group.consumer.migration.policy.
		ConsumerGroupMigrationPolicy string `toml:"consumer_group_migration_policy"`

		// Bounds on what one client can make korvet (and Redis) hold.
		MaxProduceDecompressedBytes int      `toml:"max_produce_decompressed_bytes"`
		MaxPartitionsPerTopic       int32    `toml:"max_partitions_per_topic"`
		MaxPartitions               int      `toml:"max_partitions"`
		MaxConnectionsPerIP         int      `toml:"max_connections_per_ip"`
		SASLAuthTimeout             duration `toml:"sasl_auth_timeout"`
		ConnectionsMaxIdle          duration `toml:"connections_max_idle"`

		// Security (security.go): authentication per listener, SASL
		// mechanisms, ACLs, and the TLS listener.
		Auth                 string            `toml:"auth"`
		SASLMechanisms       []string          `toml:"sasl_mechanisms"`
		AllowPlainWithoutTLS bool              `toml:"allow_plain_without_tls"`
		ACLs                 bool              `toml:"acls"`
		SuperUsers           []string          `toml:"super_users"`
		TLS                  tlsListenerConfig `toml:"tls"`
	} `toml:"kafka"`
	HTTP struct {
		Listen     string `toml:"listen"`
		AdminToken string `toml:"admin_token"`
		// Who may use the HTTP side (security.go).
		Auth           string   `toml:"auth"`
		AllowAnonymous bool     `toml:"allow_anonymous"`
		Hosts          []string `toml:"hosts"`
		CertFile       string   `toml:"cert_file"`
		KeyFile        string   `toml:"key_file"`

		// Limits of the HTTP listener and the KV view (http_server.go).
		ReadHeaderTimeout duration `toml:"read_header_timeout"`
		ReadTimeout       duration `toml:"read_timeout"`
		WriteTimeout      duration `toml:"write_timeout"`
		IdleTimeout       duration `toml:"idle_timeout"`
		MaxConnections    int      `toml:"max_connections"`
		KVMgetMaxBytes    int64    `toml:"kv_mget_max_bytes"`
	} `toml:"http"`
	// SchemaRegistry is the Confluent-compatible schema registry's own
	// listener (registry_listener.go); logins, anonymity, timeouts and
	// max_connections are [http]'s.
	SchemaRegistry struct {
		Listen   string `toml:"listen"`
		CertFile string `toml:"cert_file"`
		KeyFile  string `toml:"key_file"`
	} `toml:"schema_registry"`
	Redis struct {
		URL      string   `toml:"url"`
		Keyspace string   `toml:"keyspace"`
		PoolSize int      `toml:"pool_size"`
		Timeout  duration `toml:"timeout"`
		// Redis Cluster: url names any one node, seeds more.
		Cluster bool     `toml:"cluster"`
		Seeds   []string `toml:"seeds"`
		// acks=all produce waits until this many replicas have the
		// append (WAIT), Kafka's min.insync.replicas mapped to Redis.
		WaitReplicas int      `toml:"wait_replicas"`
		WaitTimeout  duration `toml:"wait_timeout"`
		// How often the memory sampler measures what each topic takes in
		// Redis (engine/memory.go); "0s" turns it off.
		MemorySampleInterval duration `toml:"memory_sample_interval"`
		// rediss:// URLs: how korvet checks Redis and proves itself.
		TLSCAFile             string `toml:"tls_ca_file"`
		TLSCertFile           string `toml:"tls_cert_file"`
		TLSKeyFile            string `toml:"tls_key_file"`
		TLSInsecureSkipVerify bool   `toml:"tls_insecure_skip_verify"`
	} `toml:"redis"`
	Cold struct {
		Warehouse          string   `toml:"warehouse"`
		Namespace          string   `toml:"namespace"`
		Endpoint           string   `toml:"endpoint"`
		AccessKey          string   `toml:"access_key"`
		SecretKey          string   `toml:"secret_key"`
		Region             string   `toml:"region"`
		PathStyle          bool     `toml:"path_style"`
		TLS                bool     `toml:"tls"`
		InsecureSkipVerify bool     `toml:"insecure_skip_verify"`
		RESTCatalogURL     string   `toml:"rest_catalog_url"`
		RESTCatalogToken   string   `toml:"rest_catalog_token"`
		CacheDir           string   `toml:"cache_dir"`
		ArchiveInterval    duration `toml:"archive_interval"`
	} `toml:"cold"`
	// Memory is what korvet may use (memory.go): it sizes the caches and
	// sets the Go runtime's soft limit.
	Memory struct {
		Budget byteSize `toml:"budget"`
	} `toml:"memory"`
	// TopicDefaults holds broker-level topic config defaults. TOML reads an
	// unquoted dotted name (retention.ms = 1) as nested tables, and values
	// may be numbers or booleans: flattenTopicDefaults turns it all into
	// Kafka's name=string form.
	TopicDefaults map[string]any `toml:"topic_defaults"`
	ShutdownGrace duration       `toml:"shutdown_grace"`

	topicDefaults map[string]string
}

type duration struct{ time.Duration }

func (d *duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("bad duration %q (use e.g. \"10s\", \"500ms\")", b)
	}
	d.Duration = v
	return nil
}

func defaultConfig() Config {
	var c Config
	c.DataDir = "/var/lib/korvet"
	c.LogLevel = "info"
	c.Kafka.Listen = "0.0.0.0:9092"
	c.Kafka.AutoCreateTopics = true
	c.Kafka.DefaultPartitions = 1
	c.Kafka.MaxRequestBytes = 100 << 20
	c.Kafka.MaxConnections = 10000
	c.Kafka.MaxInFlightBytes = 64 << 20
	c.Kafka.FetchReadAhead = true
	c.Kafka.GroupInitialRebalanceDelay.Duration = 3 * time.Second
	c.Kafka.GroupCleanupInterval.Duration = 10 * time.Minute
	c.Kafka.TransactionMaxTimeout.Duration = 15 * time.Minute
	c.Kafka.TransactionalIDExpiration.Duration = 168 * time.Hour
	c.Kafka.TransactionCheckInterval.Duration = 10 * time.Second
	c.Kafka.ShareRecordLockDuration.Duration = 30 * time.Second
	c.Kafka.ShareDeliveryCountLimit = 5
	c.Kafka.ShareMaxPartitionLocks = 2000
	c.Kafka.ShareSessionTimeout.Duration = 45 * time.Second
	c.Kafka.ShareHeartbeatInterval.Duration = 5 * time.Second
	c.Kafka.ShareMaxGroupMembers = 200
	c.Kafka.ShareMaxSessions = 1000
	c.Kafka.ConsumerGroupSessionTimeout.Duration = 45 * time.Second
	c.Kafka.ConsumerGroupHeartbeatInterval.Duration = 5 * time.Second
	c.Kafka.ConsumerGroupAssignor = "uniform"
	c.Kafka.ConsumerGroupMaxSize = 1000
	c.Kafka.ConsumerGroupMigrationPolicy = "bidirectional"
	c.Kafka.MaxProduceDecompressedBytes = 64 << 20
	c.Kafka.MaxPartitionsPerTopic = 1000
	c.Kafka.MaxPartitions = 10000
	c.Kafka.MaxConnectionsPerIP = 1000
	c.Kafka.SASLAuthTimeout.Duration = 10 * time.Second
	c.Kafka.ConnectionsMaxIdle.Duration = 10 * time.Minute
	c.Kafka.BrokerSessionTimeout.Duration = 4 * time.Second
	c.Kafka.Auth = authNone
	c.Kafka.SASLMechanisms = []string{"SCRAM-SHA-256", "SCRAM-SHA-512"}
	c.Kafka.SuperUsers = []string{}
	c.Kafka.TLS.Auth = authNone
	c.HTTP.Listen = "127.0.0.1:8080"
	c.HTTP.Auth = authNone
	c.HTTP.Hosts = []string{}
	c.HTTP.ReadHeaderTimeout.Duration = 10 * time.Second
	c.HTTP.ReadTimeout.Duration = 30 * time.Second
	c.HTTP.WriteTimeout.Duration = 60 * time.Second
	c.HTTP.IdleTimeout.Duration = 120 * time.Second
	c.HTTP.MaxConnections = 256
	c.HTTP.KVMgetMaxBytes = 16 << 20
	c.SchemaRegistry.Listen = "127.0.0.1:8081" // Confluent's port
	c.Redis.URL = "redis://127.0.0.1:6379/0"
	c.Redis.Keyspace = "korvet"
	c.Redis.PoolSize = 16
	c.Redis.Timeout.Duration = 10 * time.Second
	c.Redis.Seeds = []string{}
	c.Redis.WaitTimeout.Duration = time.Second
	c.Redis.MemorySampleInterval.Duration = time.Minute
	c.ShutdownGrace.Duration = 10 * time.Second
	c.Cold.Namespace = "korvet"
	c.Cold.Region = "us-east-1"
	c.Cold.PathStyle = true
	c.Cold.ArchiveInterval.Duration = 2 * time.Second
	c.Memory.Budget = defaultMemoryBudget
	return c
}

// loadConfig reads path over the defaults. Any unknown key or bad value is
// an error naming the file, the line and the key.
func loadConfig(path string) (Config, error) {
	c := defaultConfig()
	text, err := os.ReadFile(path)
	if err != nil {
		return c, fmt.Errorf("read config: %w", err)
	}
	_, err = toml.Decode(string(text), &c)
	if err != nil {
		var perr toml.ParseError
		if errors.As(err, &perr) {
			if perr.LastKey != "" {
				return c, fmt.Errorf("%s:%d: %s: %s", path, perr.Position.Line, perr.LastKey, perr.Message)
			}
			return c, fmt.Errorf("%s:%d: %s", path, perr.Position.Line, perr.Message)
		}
		// Type mismatches come as "toml: line N (last key "k"): ...".
		if m := tomlTypeErr.FindStringSubmatch(err.Error()); m != nil {
			return c, fmt.Errorf("%s:%s: %s: %s", path, m[1], m[2], m[3])
		}
		return c, fmt.Errorf("%s: %w", path, err)
	}
	// Unknown keys: walk everything the file sets (inline tables included,
	// which MetaData.Undecoded does not report) against Config's keys.
	var raw map[string]any
	if _, err := toml.Decode(string(text), &raw); err != nil {
		return c, fmt.Errorf("%s: %w", path, err)
	}
	if k := unknownKey(raw, reflect.TypeFor[Config](), nil); k != nil {
		return c, fmt.Errorf("%s:%d: unknown key %q (see README.md for the keys korvet knows)", path, keyLine(text, k), k.String())
	}
	bad := func(k toml.Key, format string, args ...any) error {
		return fmt.Errorf("%s:%d: %s: %s", path, keyLine(text, k), k.String(), fmt.Sprintf(format, args...))
	}
	c.topicDefaults = map[string]string{}
	flat := map[string]toml.Key{}
	flattenTopicDefaults(c.TopicDefaults, toml.Key{"topic_defaults"}, c.topicDefaults, flat)
	for name, v := range c.topicDefaults {
		k := flat[name]
		d, ok := engine.LookupConfig(name)
		if !ok {
			return c, bad(k, "unknown topic config %q", name)
		}
		if err := d.Check(v); err != nil {
			return c, bad(k, "%v", err)
		}
	}
	if _, _, err := net.SplitHostPort(c.Kafka.Listen); err != nil && c.Kafka.Listen != "" {
		return c, bad(toml.Key{"kafka", "listen"}, "want host:port (or \"\" for no plain listener), got %q", c.Kafka.Listen)
	}
	if c.Kafka.Advertised != "" {
		if _, _, err := net.SplitHostPort(c.Kafka.Advertised); err != nil {
			return c, bad(toml.Key{"kafka", "advertised"}, "want host:port, got %q", c.Kafka.Advertised)
		}
	}
	if _, _, err := net.SplitHostPort(c.HTTP.Listen); err != nil {
		return c, bad(toml.Key{"http", "listen"}, "want host:port, got %q", c.HTTP.Listen)
	}
	if t := c.HTTP.AdminToken; t != "" && (len(t) < 16 || strings.TrimSpace(t) != t) {
		return c, bad(toml.Key{"http", "admin_token"}, "use at least 16 characters without surrounding spaces (e.g. from openssl rand -hex 16), or \"\" to disable admin endpoints")
	}
	if _, err := resp.ParseURL(c.Redis.URL); err != nil {
		return c, bad(toml.Key{"redis", "url"}, "%v", err)
	}
	if c.Redis.Keyspace == "" || strings.ContainsAny(c.Redis.Keyspace, " \t\r\n") {
		return c, bad(toml.Key{"redis", "keyspace"}, "must be non-empty without spaces")
	}
	// One connection is held for good by the reader of the event stream
	// (engine/events), so one is not enough.
	if c.Redis.PoolSize < 2 || c.Redis.PoolSize > 1024 {
		return c, bad(toml.Key{"redis", "pool_size"}, "must be 2 to 1024")
	}
	if c.Redis.Timeout.Duration <= 0 {
		return c, bad(toml.Key{"redis", "timeout"}, "must be positive")
	}
	if err := c.checkRedisCluster(bad); err != nil {
		return c, err
	}
	if c.Kafka.DefaultPartitions < 1 {
		return c, bad(toml.Key{"kafka", "default_partitions"}, "must be at least 1")
	}
	if c.Kafka.MaxRequestBytes < 1024 {
		return c, bad(toml.Key{"kafka", "max_request_bytes"}, "must be at least 1024")
	}
	if c.Kafka.MaxInFlightBytes < 1<<20 {
		return c, bad(toml.Key{"kafka", "max_inflight_bytes"}, "must be at least 1048576")
	}
	if c.Kafka.GroupInitialRebalanceDelay.Duration < 0 || c.Kafka.GroupInitialRebalanceDelay.Duration > 5*time.Minute {
		return c, bad(toml.Key{"kafka", "group_initial_rebalance_delay"}, "must be 0s to 5m")
	}
	if d := c.Kafka.GroupCleanupInterval.Duration; d < time.Second || d > 24*time.Hour {
		return c, bad(toml.Key{"kafka", "group_cleanup_interval"}, "must be 1s to 24h")
	}
	if d := c.Kafka.TransactionMaxTimeout.Duration; d < time.Second || d > 24*time.Hour {
		return c, bad(toml.Key{"kafka", "transaction_max_timeout"}, "must be 1s to 24h")
	}
	if d := c.Kafka.TransactionalIDExpiration.Duration; d < time.Minute || d > 365*24*time.Hour {
		return c, bad(toml.Key{"kafka", "transactional_id_expiration"}, "must be 1m to 8760h")
	}
	if d := c.Kafka.TransactionCheckInterval.Duration; d < 100*time.Millisecond || d > time.Hour {
		return c, bad(toml.Key{"kafka", "transaction_check_interval"}, "must be 100ms to 1h")
	}
	if d := c.Kafka.ConsumerGroupSessionTimeout.Duration; d < time.Second || d > time.Hour {
		return c, bad(toml.Key{"kafka", "consumer_group_session_timeout"}, "must be 1s to 1h")
	}
	if d := c.Kafka.ConsumerGroupHeartbeatInterval.Duration; d < 100*time.Millisecond || d >= c.Kafka.ConsumerGroupSessionTimeout.Duration {
		return c, bad(toml.Key{"kafka", "consumer_group_heartbeat_interval"}, "must be at least 100ms and less than kafka.consumer_group_session_timeout")
	}
	if !group.KnownAssignor(c.Kafka.ConsumerGroupAssignor) {
		return c, bad(toml.Key{"kafka", "consumer_group_assignor"}, `must be "uniform" or "range"`)
	}
	if n := c.Kafka.ConsumerGroupMaxSize; n < 1 || n > 100000 {
		return c, bad(toml.Key{"kafka", "consumer_group_max_size"}, "must be 1 to 100000")
	}
	if !group.KnownMigrationPolicy(c.Kafka.ConsumerGroupMigrationPolicy) {
		return c, bad(toml.Key{"kafka", "consumer_group_migration_policy"}, `must be "bidirectional", "upgrade", "downgrade" or "disabled"`)
	}
	if c.Kafka.MaxConnections < 1 {
		return c, bad(toml.Key{"kafka", "max_connections"}, "must be at least 1")
	}
	if err := c.checkShare(bad); err != nil {
		return c, err
	}
	if err := c.checkKafkaLimits(bad); err != nil {
		return c, err
	}
	if c.Kafka.NodeID < 0 {
		return c, bad(toml.Key{"kafka", "node_id"}, "must be >= 0")
	}
	if d := c.Kafka.BrokerSessionTimeout.Duration; d < time.Second || d > 5*time.Minute {
		return c, bad(toml.Key{"kafka", "broker_session_timeout"}, "must be from 1s to 5m, got %s", d)
	}
	if len(c.Kafka.Rack) > 255 || strings.ContainsFunc(c.Kafka.Rack, unicode.IsControl) {
		return c, bad(toml.Key{"kafka", "rack"}, "must be at most 255 characters without control characters")
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		return c, bad(toml.Key{"log_level"}, "must be debug, info, warn or error")
	}
	if c.DataDir == "" {
		return c, bad(toml.Key{"data_dir"}, "must not be empty")
	}
	if w := c.Cold.Warehouse; w != "" && !strings.HasPrefix(w, "s3://") && !strings.HasPrefix(w, "file:///") {
		return c, bad(toml.Key{"cold", "warehouse"}, "want s3://bucket/prefix or file:///absolute/dir, got %q", redact.URL(w))
	}
	if strings.HasPrefix(c.Cold.Warehouse, "s3://") && c.Cold.Endpoint == "" && c.Cold.Region == "" {
		return c, bad(toml.Key{"cold", "region"}, "an s3:// warehouse needs a region or an endpoint")
	}
	if c.Cold.ArchiveInterval.Duration <= 0 {
		return c, bad(toml.Key{"cold", "archive_interval"}, "must be positive")
	}
	if b := c.Memory.Budget; b != 0 && b < minMemoryBudget {
		return c, bad(toml.Key{"memory", "budget"}, "must be 0 (unlimited) or at least 32MiB, got %s", b)
	}
	if err := c.checkListeners(bad); err != nil {
		return c, err
	}
	if err := c.checkHTTPLimits(bad); err != nil {
		return c, err
	}
	if err := c.checkSchemaRegistry(bad); err != nil {
		return c, err
	}
	return c, nil
}

// checkKafkaLimits validates the bounds on what clients can make korvet
// hold.
func (c *Config) checkKafkaLimits(bad func(k toml.Key, format string, args ...any) error) error {
	k := &c.Kafka
	if k.MaxProduceDecompressedBytes < 1<<20 || k.MaxProduceDecompressedBytes > 1<<30 {
		return bad(toml.Key{"kafka", "max_produce_decompressed_bytes"}, "must be 1048576 (1 MiB) to 1073741824 (1 GiB)")
	}
	if k.MaxPartitionsPerTopic < 1 || k.MaxPartitionsPerTopic > 100000 {
		return bad(toml.Key{"kafka", "max_partitions_per_topic"}, "must be 1 to 100000")
	}
	if k.MaxPartitions < 2 || k.MaxPartitions > 1000000 {
		return bad(toml.Key{"kafka", "max_partitions"}, "must be 2 to 1000000")
	}
	if k.DefaultPartitions > k.MaxPartitionsPerTopic {
		return bad(toml.Key{"kafka", "default_partitions"}, "%d is more than kafka.max_partitions_per_topic (%d): auto-created topics would be refused", k.DefaultPartitions, k.MaxPartitionsPerTopic)
	}
	if k.MaxConnectionsPerIP < 1 {
		return bad(toml.Key{"kafka", "max_connections_per_ip"}, "must be at least 1")
	}
	if k.SASLAuthTimeout.Duration <= 0 {
		return bad(toml.Key{"kafka", "sasl_auth_timeout"}, "must be positive")
	}
	if k.ConnectionsMaxIdle.Duration <= 0 {
		return bad(toml.Key{"kafka", "connections_max_idle"}, "must be positive")
	}
	return nil
}

// keyLine finds the line where key is set, for error messages; 0 when it
// cannot tell. It understands [table] headers (with trailing comments),
// dotted keys, quoted keys and inline tables, which is what hand-written
// configs use.
func keyLine(text []byte, key toml.Key) int {
	full := strings.Join(key, ".")
	table := ""
	fallback := 0
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := stripComment(strings.TrimSpace(sc.Text()))
		if strings.HasPrefix(line, "[") {
			table = unquoteKey(strings.Trim(line, "[] "))
			if table == full || strings.HasPrefix(table, full+".") {
				return n // an unknown table
			}
			continue
		}
		name, rest, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		name = unquoteKey(name)
		if table != "" {
			name = table + "." + name
		}
		if name == full {
			return n
		}
		// Inline table: kafka = { listen = "...", bogus = 1 }.
		if strings.HasPrefix(full, name+".") && strings.Contains(rest, "{") {
			for _, part := range strings.Split(strings.Trim(strings.TrimSpace(rest), "{}"), ",") {
				if k, _, ok := strings.Cut(part, "="); ok && name+"."+unquoteKey(k) == full {
					return n
				}
			}
			fallback = n
		}
	}
	return fallback
}

// unknownKey returns the first key in m that t (a struct with toml tags)
// has no field for; maps in t accept any key.
func unknownKey(m map[string]any, t reflect.Type, prefix toml.Key) toml.Key {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		key := append(append(toml.Key{}, prefix...), k)
		var ft reflect.Type
		for i := 0; i < t.NumField(); i++ {
			if f := t.Field(i); f.Tag.Get("toml") == k {
				ft = f.Type
			}
		}
		if ft == nil {
			return key
		}
		if sub, ok := m[k].(map[string]any); ok && ft.Kind() == reflect.Struct {
			if u := unknownKey(sub, ft, key); u != nil {
				return u
			}
		}
	}
	return nil
}

// unquoteKey normalizes a TOML key as written: spaces around dots and
// quotes around parts go.
func unquoteKey(k string) string {
	parts := strings.Split(strings.TrimSpace(k), ".")
	for i, p := range parts {
		parts[i] = strings.Trim(strings.TrimSpace(p), `"'`)
	}
	return strings.Join(parts, ".")
}

// stripComment drops a trailing # comment that is not inside a string.
func stripComment(line string) string {
	quote := byte(0)
	for i := 0; i < len(line); i++ {
		switch c := line[i]; {
		case quote != 0 && c == '\\' && quote == '"':
			i++
		case quote != 0 && c == quote:
			quote = 0
		case quote == 0 && (c == '"' || c == '\''):
			quote = c
		case quote == 0 && c == '#':
			return strings.TrimSpace(line[:i])
		}
	}
	return line
}

// flattenTopicDefaults turns [topic_defaults] into name -> value strings,
// remembering each name's TOML key for error messages.
func flattenTopicDefaults(m map[string]any, prefix toml.Key, out map[string]string, keys map[string]toml.Key) {
	for k, v := range m {
		key := append(append(toml.Key{}, prefix...), k)
		name := strings.Join(key[1:], ".")
		switch v := v.(type) {
		case map[string]any:
			flattenTopicDefaults(v, key, out, keys)
			continue
		case string:
			out[name] = v
		default:
			out[name] = fmt.Sprint(v)
		}
		keys[name] = key
	}
}

var tomlTypeErr = regexp.MustCompile(`^toml: line (\d+) \(last key "([^"]*)"\): (.*)$`)

// advertisedAddr returns the host:port clients are told to use for a
// listener: the configured one (a), or listen with an unspecified host
// replaced by this machine's first non-loopback address.
func advertisedAddr(a, listen string) (string, int32, error) {
	if a == "" {
		a = listen
	}
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		return "", 0, err
	}
	var p int32
	if _, err := fmt.Sscanf(port, "%d", &p); err != nil {
		return "", 0, fmt.Errorf("bad port %q", port)
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = firstLANAddress()
	}
	return host, p, nil
}

func firstLANAddress() string {
	addrs, err := net.InterfaceAddrs()
	if err == nil {
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
				return n.IP.String()
			}
		}
	}
	return "127.0.0.1"
}

// checkRedisCluster validates the Redis Cluster and replication keys.
func (c *Config) checkRedisCluster(bad func(toml.Key, string, ...any) error) error {
	u, _ := resp.ParseURL(c.Redis.URL)
	if c.Redis.Cluster {
		if u.Network != "tcp" {
			return bad(toml.Key{"redis", "url"}, "a Redis Cluster is reached over TCP: use redis://host:port, not a unix socket")
		}
		if u.DB != 0 {
			return bad(toml.Key{"redis", "url"}, "a Redis Cluster has only db 0: drop /%d from the URL", u.DB)
		}
		// Braces in the prefix would become the hash tag of every key
		// and put the whole keyspace in one slot.
		if strings.ContainsAny(c.Redis.Keyspace, "{}") {
			return bad(toml.Key{"redis", "keyspace"}, "must not contain { or } with redis.cluster = true (they are Redis Cluster hash tags)")
		}
	} else if len(c.Redis.Seeds) > 0 {
		return bad(toml.Key{"redis", "seeds"}, "seed nodes are for a Redis Cluster: set redis.cluster = true, or remove seeds")
	}
	if len(c.Redis.Seeds) > 64 {
		return bad(toml.Key{"redis", "seeds"}, "at most 64 seed nodes")
	}
	for _, s := range c.Redis.Seeds {
		if _, port, err := net.SplitHostPort(s); err != nil || port == "" {
			return bad(toml.Key{"redis", "seeds"}, "want host:port, got %q", s)
		}
	}
	if _, err := c.redisTLS(); err != nil {
		k := "tls_insecure_skip_verify"
		switch {
		case c.Redis.TLSCAFile != "" && !strings.Contains(err.Error(), "tls_cert_file"):
			k = "tls_ca_file"
		case c.Redis.TLSCertFile != "":
			k = "tls_cert_file"
		case c.Redis.TLSKeyFile != "":
			k = "tls_key_file"
		}
		return bad(toml.Key{"redis", k}, "%v", err)
	}
	if c.Redis.WaitReplicas < 0 || c.Redis.WaitReplicas > 16 {
		return bad(toml.Key{"redis", "wait_replicas"}, "must be 0 (do not wait) to 16")
	}
	if d := c.Redis.WaitTimeout.Duration; d < time.Millisecond || d > time.Minute {
		return bad(toml.Key{"redis", "wait_timeout"}, "must be 1ms to 1m")
	}
	if d := c.Redis.MemorySampleInterval.Duration; d != 0 && (d < time.Second || d > 24*time.Hour) {
		return bad(toml.Key{"redis", "memory_sample_interval"}, "must be 0s (off) or 1s to 24h")
	}
	return nil
}

// redisTLS is the TLS configuration of rediss:// connections: nil (the
// system roots) unless a tls_* key is set.
func (c *Config) redisTLS() (*tls.Config, error) {
	r := &c.Redis
	if r.TLSCAFile == "" && r.TLSCertFile == "" && r.TLSKeyFile == "" && !r.TLSInsecureSkipVerify {
		return nil, nil
	}
	if u, _ := resp.ParseURL(r.URL); !u.TLS {
		return nil, errors.New("redis.tls_* keys need a rediss:// url")
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: r.TLSInsecureSkipVerify}
	if r.TLSCAFile != "" {
		pem, err := os.ReadFile(r.TLSCAFile)
		if err != nil {
			return nil, fmt.Errorf("read redis.tls_ca_file: %w", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("redis.tls_ca_file %s holds no PEM certificate", r.TLSCAFile)
		}
	}
	if (r.TLSCertFile == "") != (r.TLSKeyFile == "") {
		return nil, errors.New("set both redis.tls_cert_file and redis.tls_key_file (a client certificate), or neither")
	}
	if r.TLSCertFile != "" {
		cert, err := tls.LoadX509KeyPair(r.TLSCertFile, r.TLSKeyFile)
		if err != nil {
			return nil, fmt.Errorf("load redis.tls_cert_file and redis.tls_key_file: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// redisOptions are the resp.Options of [redis].
func (c *Config) redisOptions(pool int, log *slog.Logger) resp.Options {
	tc, _ := c.redisTLS() // checked by load
	return resp.Options{PoolSize: pool, Timeout: c.Redis.Timeout.Duration, Logger: log, Cluster: c.Redis.Cluster, Seeds: c.Redis.Seeds, TLS: tc}
}

// shownRedisURL is the Redis URL as logs and errors show it: without its
// password.
func (c *Config) shownRedisURL() string { return redact.URL(c.Redis.URL) }

// coldConfig is the cold tier's configuration, with paths under data_dir
// where the file leaves them out.
func (c *Config) coldConfig() cold.Config {
	w := c.Cold.Warehouse
	if w == "" {
		w = "file://" + filepath.Join(c.DataDir, "warehouse")
	}
	cache := c.Cold.CacheDir
	if cache == "" {
		cache = filepath.Join(c.DataDir, "cold-cache")
	}
	return cold.Config{
		Warehouse: w, Namespace: c.Cold.Namespace, Endpoint: c.Cold.Endpoint,
		AccessKey: c.Cold.AccessKey, SecretKey: c.Cold.SecretKey, Region: c.Cold.Region,
		PathStyle: c.Cold.PathStyle, TLS: c.Cold.TLS, InsecureSkipVerify: c.Cold.InsecureSkipVerify,
		RESTCatalogURL: c.Cold.RESTCatalogURL, RESTCatalogToken: c.Cold.RESTCatalogToken,
		CacheDir: cache,

		ReadCacheBytes: c.memoryPlan().rowGroups, FooterCacheBytes: c.memoryPlan().footers,
	}
}
