package engine

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// ConfigDef describes one topic config korvet understands: its Kafka name,
// its built-in default and how a value is checked.
type ConfigDef struct {
	Name    string
	Default string
	// Broker is the broker-level config that sets the default in Kafka
	// (DescribeConfigs lists it as a synonym); empty when there is none.
	Broker string
	// Doc is a one-line description for DescribeConfigs and the README.
	Doc   string
	check func(string) error
}

// Check validates v for this config.
func (d *ConfigDef) Check(v string) error {
	if d.check == nil {
		return nil
	}
	if err := d.check(v); err != nil {
		return fmt.Errorf("config %s=%q: %w", d.Name, v, err)
	}
	return nil
}

func checkInt(min int64) func(string) error {
	return func(v string) error {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return fmt.Errorf("not an integer")
		}
		if n < min {
			return fmt.Errorf("must be >= %d", min)
		}
		return nil
	}
}

// checkIntRange accepts an integer from min to max.
func checkIntRange(min, max int64) func(string) error {
	atLeast := checkInt(min)
	return func(v string) error {
		if err := atLeast(v); err != nil {
			return err
		}
		if n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64); n > max {
			return fmt.Errorf("must be <= %d", max)
		}
		return nil
	}
}

func checkOneOf(opts ...string) func(string) error {
	return func(v string) error {
		for _, o := range opts {
			if v == o {
				return nil
			}
		}
		return fmt.Errorf("must be one of %s", strings.Join(opts, ", "))
	}
}

func checkPolicy(v string) error {
	parts := strings.Split(v, ",")
	for _, p := range parts {
		p = strings.TrimSpace(p)
		if p != "delete" && p != "compact" {
			return fmt.Errorf("must be delete, compact or both")
		}
	}
	return nil
}

func checkBool(v string) error {
	if v != "true" && v != "false" {
		return fmt.Errorf("must be true or false")
	}
	return nil
}

// configDefs lists every topic config korvet accepts. Kafka configs that
// have no meaning on a single node backed by Redis are accepted and stored
// (clients and tools set them routinely) but change nothing; their Doc says so.
var configDefs = []ConfigDef{
	{Name: "cleanup.policy", Broker: "log.cleanup.policy", Default: "delete", Doc: "delete and/or compact", check: checkPolicy},
	{Name: "compression.type", Broker: "compression.type", Default: "producer", Doc: "stored; korvet keeps records uncompressed in Redis", check: checkOneOf("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd")},
	{Name: "delete.retention.ms", Broker: "log.cleaner.delete.retention.ms", Default: "86400000", Doc: "how long tombstones stay on compacted topics", check: checkInt(0)},
	{Name: "file.delete.delay.ms", Broker: "log.segment.delete.delay.ms", Default: "60000", Doc: "accepted for compatibility; no effect", check: checkInt(0)},
	{Name: "flush.messages", Broker: "log.flush.interval.messages", Default: "9223372036854775807", Doc: "accepted for compatibility; Redis persistence decides", check: checkInt(1)},
	{Name: "flush.ms", Broker: "log.flush.interval.ms", Default: "9223372036854775807", Doc: "accepted for compatibility; Redis persistence decides", check: checkInt(0)},
	{Name: "index.interval.bytes", Broker: "log.index.interval.bytes", Default: "4096", Doc: "accepted for compatibility; no effect", check: checkInt(0)},
	{Name: "korvet.storage.compression", Default: "none", Doc: "zstd: store new record values compressed in Redis, with a dictionary trained on the topic", check: checkOneOf("none", "zstd")},
	{Name: "korvet.storage.compression.min.bytes", Default: "32", Doc: "with korvet.storage.compression=zstd, values shorter than this are stored uncompressed: their frames would rarely be smaller", check: checkIntRange(0, 1<<30)},
	{Name: "korvet.index.enable", Default: "false", Doc: "keep a key index for the KV view even without compaction", check: checkBool},
	{Name: "local.retention.bytes", Broker: "log.local.retention.bytes", Default: "-2", Doc: "bytes kept in Redis before archived data leaves it (-2: same as retention.bytes)", check: checkInt(-2)},
	{Name: "local.retention.ms", Broker: "log.local.retention.ms", Default: "-2", Doc: "time kept in Redis before archived data leaves it (-2: same as retention.ms)", check: checkInt(-2)},
	{Name: "max.compaction.lag.ms", Broker: "log.cleaner.max.compaction.lag.ms", Default: "9223372036854775807", Doc: "longest a record stays uncompacted", check: checkInt(1)},
	{Name: "max.message.bytes", Broker: "message.max.bytes", Default: "1048588", Doc: "largest record batch accepted", check: checkInt(0)},
	{Name: "message.timestamp.type", Broker: "log.message.timestamp.type", Default: "CreateTime", Doc: "CreateTime or LogAppendTime", check: checkOneOf("CreateTime", "LogAppendTime")},
	{Name: "min.cleanable.dirty.ratio", Broker: "log.cleaner.min.cleanable.ratio", Default: "0.5", Doc: "share of records appended since the last compaction pass that starts the next"},
	{Name: "min.compaction.lag.ms", Broker: "log.cleaner.min.compaction.lag.ms", Default: "0", Doc: "shortest time a record stays uncompacted", check: checkInt(0)},
	{Name: "min.insync.replicas", Broker: "min.insync.replicas", Default: "1", Doc: "accepted for compatibility; a single node", check: checkInt(1)},
	{Name: "preallocate", Broker: "log.preallocate", Default: "false", Doc: "accepted for compatibility; no effect", check: checkBool},
	{Name: "remote.storage.enable", Default: "false", Doc: "archive sealed segments to the cold tier", check: checkBool},
	{Name: "retention.bytes", Broker: "log.retention.bytes", Default: "-1", Doc: "bytes kept per partition (-1: no limit)", check: checkInt(-1)},
	{Name: "retention.ms", Broker: "log.retention.ms", Default: "604800000", Doc: "time records are kept (-1: forever)", check: checkInt(-1)},
	{Name: "segment.bytes", Broker: "log.segment.bytes", Default: "1073741824", Doc: "size at which a segment stream is sealed", check: checkInt(14)},
	{Name: "segment.index.bytes", Broker: "log.index.size.max.bytes", Default: "10485760", Doc: "accepted for compatibility; no effect", check: checkInt(4)},
	{Name: "segment.jitter.ms", Broker: "log.roll.jitter.ms", Default: "0", Doc: "accepted for compatibility; no effect", check: checkInt(0)},
	{Name: "segment.ms", Broker: "log.roll.ms", Default: "604800000", Doc: "age at which a segment stream is sealed", check: checkInt(1)},
	{Name: "unclean.leader.election.enable", Broker: "unclean.leader.election.enable", Default: "false", Doc: "accepted for compatibility; a single node", check: checkBool},
}

// ConfigDefs returns the definitions of all topic configs, sorted by name.
func ConfigDefs() []ConfigDef {
	out := append([]ConfigDef(nil), configDefs...)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// LookupConfig returns the definition of a topic config.
func LookupConfig(name string) (*ConfigDef, bool) {
	for i := range configDefs {
		if configDefs[i].Name == name {
			return &configDefs[i], true
		}
	}
	return nil, false
}

// ValidateConfigs checks a set of topic configs: every key must be known
// and every value valid.
func ValidateConfigs(cfg map[string]string) error {
	for k, v := range cfg {
		d, ok := LookupConfig(k)
		if !ok {
			return fmt.Errorf("unknown topic config %q", k)
		}
		if err := d.Check(v); err != nil {
			return err
		}
	}
	return nil
}

// topicSettings is the parsed form of the configs the engine acts on.
type topicSettings struct {
	segmentBytes        int64
	segmentMs           int64
	remoteStorage       bool
	localRetentionMs    int64
	localRetentionBytes int64
	retentionMs         int64
	retentionBytes      int64
	maxMessageBytes     int64
	logAppendTime       bool
	compact             bool
	zstd                bool // korvet.storage.compression=zstd
	zstdMin             int  // korvet.storage.compression.min.bytes
}

func parseSettings(get func(string) string) topicSettings {
	i := func(name string) int64 {
		n, _ := strconv.ParseInt(get(name), 10, 64)
		return n
	}
	return topicSettings{
		segmentBytes:        i("segment.bytes"),
		segmentMs:           i("segment.ms"),
		remoteStorage:       get("remote.storage.enable") == "true",
		localRetentionMs:    i("local.retention.ms"),
		localRetentionBytes: i("local.retention.bytes"),
		retentionMs:         i("retention.ms"),
		retentionBytes:      i("retention.bytes"),
		maxMessageBytes:     i("max.message.bytes"),
		logAppendTime:       get("message.timestamp.type") == "LogAppendTime",
		compact:             strings.Contains(get("cleanup.policy"), "compact"),
		zstd:                get("korvet.storage.compression") == "zstd",
		zstdMin:             int(i("korvet.storage.compression.min.bytes")),
	}
}

// BrokerDefault returns the broker-level default of a topic config: from
// [topic_defaults] in korvet.toml, else the built-in one.
func (e *Engine) BrokerDefault(name string) (string, ConfigSource) {
	if v, ok := e.opts.TopicDefaults[name]; ok {
		return v, SourceStaticBroker
	}
	if d, ok := LookupConfig(name); ok {
		return d.Default, SourceDefault
	}
	return "", SourceDefault
}
