package web

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics serves the process's registry together with gauges read from
// the engine at scrape time. Those are collected on a registry made for
// the one scrape, so that the Redis calls behind them run under the
// request's context.
func (s *server) metrics(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), apiTimeout)
	defer cancel()
	scrape := prometheus.NewRegistry()
	scrape.MustRegister(&engineCollector{s: s, ctx: ctx}, &shareCollector{s: s, ctx: ctx}, &redisCollector{s: s, ctx: ctx}, &schemaCollector{s: s, ctx: ctx})
	g := prometheus.Gatherers{scrape}
	if s.opts.Metrics != nil {
		g = append(g, s.opts.Metrics)
	}
	promhttp.HandlerFor(g, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}).ServeHTTP(w, r)
}

var (
	descBuild      = desc("korvet_build_info", "korvet's version; always 1.", "version")
	descStart      = desc("korvet_start_time_seconds", "When korvet started, in Unix seconds.")
	descConns      = desc("korvet_kafka_connections", "Open Kafka client connections.")
	descTopics     = desc("korvet_topics", "Topics.")
	descHW         = desc("korvet_partition_high_watermark", "Offset after the last committed record.", "topic", "partition")
	descLogStart   = desc("korvet_partition_log_start_offset", "First offset still in the log.", "topic", "partition")
	descPartBytes  = desc("korvet_partition_appended_bytes_total", "Bytes appended over the partition's life, in Redis entry encoding.", "topic", "partition")
	descGroupLag   = desc("korvet_group_lag", "Records between a group's committed offset and the high watermark.", "group", "topic", "partition")
	descGroupMemb  = desc("korvet_group_members", "Members of a consumer group.", "group", "state")
	descRedisUp    = desc("korvet_redis_up", "1 when Redis answered this scrape's PING.")
	descRedisRTT   = desc("korvet_redis_round_trip_seconds", "Time of one PING to Redis, measured at scrape.")
	descRedisMem   = desc("korvet_redis_used_memory_bytes", "Redis used_memory.")
	descRedisMax   = desc("korvet_redis_maxmemory_bytes", "Redis maxmemory (0: no limit).")
	descRedisAOF   = desc("korvet_redis_aof_enabled", "1 when Redis runs with appendonly yes.")
	descIndexOpen  = desc("korvet_index_open", "1 when the KV index is open.")
	descIndexKeys  = desc("korvet_index_keys", "Keys in the KV index.")
	descIndexSize  = desc("korvet_index_size_bytes", "Size of the KV index on disk.")
	descIndexLag   = desc("korvet_index_lag_records", "Records below the last stable offset not yet in the KV index.")
	descTierBack   = desc("korvet_tiering_backlog_segments", "Sealed segments waiting to be archived.")
	descTierBytes  = desc("korvet_tiering_backlog_bytes", "Bytes of the segments waiting to be archived.")
	descTierErrors = desc("korvet_tiering_errors_total", "Archiving errors since start.")
	descBrokers    = desc("korvet_brokers_live", "Live brokers on this Redis and keyspace, this one included.")
	descLed        = desc("korvet_partitions_led", "Partitions this broker leads.")
	descEpoch      = desc("korvet_partition_leader_epoch", "The partition's leader epoch as this broker last saw it.", "topic", "partition")
	descMoves      = desc("korvet_leadership_moves_total", "Partition leadership moves (in the whole cluster) this broker has heard of since it started.")
	descCoord      = desc("korvet_groups_coordinated", "Stored consumer and share groups this broker coordinates.")
	// From the memory sampler (partitions this broker leads).
	descTopicRedis  = desc("korvet_topic_redis_bytes", "What the topic's partitions led by this broker take in Redis (MEMORY USAGE, sampled).", "topic")
	descTopicPerRec = desc("korvet_topic_redis_bytes_per_record", "Redis bytes per record of the topic, sampled.", "topic")
	descTopicIngest = desc("korvet_topic_redis_ingest_bytes_per_second", "Rate the topic adds to Redis's memory, between the last two samples.", "topic")
	descTopicHot    = desc("korvet_topic_hot_retention_seconds", "How much time of the topic Redis holds at the current rates (absent when nothing bounds it).", "topic")
)

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, labels, nil)
}

// engineCollector reads the engine and the optional parts for one scrape.
type engineCollector struct {
	s   *server
	ctx context.Context
}

func (c *engineCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descBuild, descStart, descConns, descTopics, descHW, descLogStart, descPartBytes,
		descGroupLag, descGroupMemb, descRedisUp, descRedisRTT, descRedisMem, descRedisMax, descRedisAOF,
		descIndexOpen, descIndexKeys, descIndexSize, descIndexLag, descTierBack, descTierBytes, descTierErrors,
		descBrokers, descLed, descEpoch, descMoves, descCoord, descTopicRedis, descTopicPerRec, descTopicIngest, descTopicHot} {
		ch <- d
	}
}

func (c *engineCollector) Collect(ch chan<- prometheus.Metric) {
	s, ctx := c.s, c.ctx
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	gauge(descBuild, 1, s.opts.Version)
	gauge(descStart, float64(s.opts.Started.UnixMilli())/1000)
	if s.opts.Kafka != nil {
		gauge(descConns, float64(s.opts.Kafka().Connections))
	}

	topics := s.eng.UserTopics()
	gauge(descTopics, float64(len(topics)))
	mem := s.eng.MemoryStatus()
	for _, t := range topics {
		if tm, ok := mem.Topics[t.Name()]; ok {
			gauge(descTopicRedis, float64(tm.RedisBytes), t.Name())
			if tm.Entries > 0 {
				gauge(descTopicPerRec, tm.BytesPerRecord, t.Name())
			}
			gauge(descTopicIngest, tm.IngestBytesPerSecond, t.Name())
			if tm.HotRetentionKnown {
				gauge(descTopicHot, tm.HotRetention.Seconds(), t.Name())
			}
		}
		for _, p := range t.Partitions() {
			part := strconv.Itoa(int(p.ID()))
			gauge(descHW, float64(p.HighWatermark()), t.Name(), part)
			gauge(descLogStart, float64(p.LogStart()), t.Name(), part)
			counter(descPartBytes, float64(p.Bytes()), t.Name(), part)
			_, epoch := p.Leader()
			gauge(descEpoch, float64(epoch), t.Name(), part)
		}
	}
	gauge(descBrokers, float64(len(s.eng.Brokers())))
	gauge(descLed, float64(s.partitionsLed()[s.eng.NodeID()]))
	counter(descMoves, float64(s.leaderMoves.Load()))
	if groups, err := s.groupsCoordinated(ctx); err == nil {
		gauge(descCoord, float64(groups[s.eng.NodeID()]))
	}

	for _, g := range s.groups.List() {
		gauge(descGroupMemb, float64(g.Members), g.Group, g.State.String())
		lags, _ := s.groups.Lag(ctx, g.Group)
		for _, l := range lags {
			gauge(descGroupLag, float64(l.Lag), g.Group, l.Topic, strconv.Itoa(int(l.Partition)))
		}
	}

	start := time.Now()
	if err := s.eng.Ping(ctx); err != nil {
		gauge(descRedisUp, 0)
	} else {
		gauge(descRedisUp, 1)
		gauge(descRedisRTT, time.Since(start).Seconds())
		if info, err := s.eng.RedisInfo(ctx); err == nil {
			gauge(descRedisMem, float64(info.UsedMemory))
			gauge(descRedisMax, float64(info.MaxMemory))
			gauge(descRedisAOF, b2f(info.AOFEnabled))
		}
	}

	if ix, ok := s.indexView(); ok {
		gauge(descIndexOpen, b2f(ix.Open))
		gauge(descIndexKeys, float64(ix.Keys))
		gauge(descIndexSize, float64(ix.SizeBytes))
		gauge(descIndexLag, float64(ix.Lag))
	}
	if tt, ok := s.eng.Tiering(); ok {
		gauge(descTierBack, float64(tt.BacklogSegments))
		gauge(descTierBytes, float64(tt.BacklogBytes))
		counter(descTierErrors, float64(tt.Errors))
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
