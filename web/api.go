package web

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"time"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/engine/auth"
	"github.com/korvet/korvet/engine/group"
)

// apiTimeout bounds the Redis work behind one API call, so that a Redis
// that hangs turns into an error on the page rather than a hung tab.
const apiTimeout = 3 * time.Second

type statusJSON struct {
	Time     time.Time             `json:"time"`
	Broker   brokerJSON            `json:"broker"`
	Redis    redisJSON             `json:"redis"`
	Totals   totalsJSON            `json:"totals"`
	Index    *indexJSON            `json:"index"`             // null: korvet runs without a KV index
	Tiering  *engine.TieringStatus `json:"tiering,omitempty"` // absent: no cold tier
	Warnings []string              `json:"warnings"`
	// Memory is the banner about Redis filling up; null while below 80%
	// of maxmemory (or without maxmemory).
	Memory *memoryWarningJSON `json:"memory_warning"`
	// Viewer is who asked: what the page shows depends on it.
	Viewer viewerJSON `json:"viewer"`
}

// indexJSON is the KV index as the status page shows it: the engine's
// figures summed over the indexed topics.
type indexJSON struct {
	Open        bool      `json:"open"`
	Keys        int64     `json:"keys"`
	SizeBytes   int64     `json:"size_bytes"`
	Lag         int64     `json:"lag"` // records below the last stable offset, not yet indexed
	Topics      []string  `json:"topics,omitempty"`
	Rebuilding  bool      `json:"rebuilding"`
	LastRebuild time.Time `json:"last_rebuild,omitzero"`
	Error       string    `json:"error,omitempty"`
}

type viewerJSON struct {
	Principal string `json:"principal"`
	Super     bool   `json:"super"`
}

type brokerJSON struct {
	Version          string     `json:"version"`
	Started          time.Time  `json:"started"`
	UptimeSeconds    int64      `json:"uptime_seconds"`
	ClusterID        string     `json:"cluster_id"`
	Keyspace         string     `json:"keyspace"`
	Listeners        []Listener `json:"listeners"`
	ClientsConnected int64      `json:"clients_connected"`
	Requests         int64      `json:"requests_total"`
	BytesIn          int64      `json:"bytes_in_total"`
	BytesOut         int64      `json:"bytes_out_total"`
	ProducedRecords  int64      `json:"produced_records_total"`
	FetchedRecords   int64      `json:"fetched_records_total"`
}

type redisJSON struct {
	Reachable         bool    `json:"reachable"`
	Error             string  `json:"error,omitempty"`
	Version           string  `json:"version,omitempty"`
	Mode              string  `json:"mode,omitempty"`
	UptimeSeconds     int64   `json:"uptime_seconds"`
	Clients           int64   `json:"clients"`
	UsedMemory        int64   `json:"used_memory"`
	UsedMemoryPeak    int64   `json:"used_memory_peak"`
	MaxMemory         int64   `json:"maxmemory"`
	MaxMemoryPolicy   string  `json:"maxmemory_policy,omitempty"`
	AOFEnabled        bool    `json:"aof_enabled"`
	AOFLastWriteOK    bool    `json:"aof_last_write_ok"`
	RDBLastSave       int64   `json:"rdb_last_save_unix"`
	RDBChangesPending int64   `json:"rdb_changes_since_save"`
	RDBLastBgsaveOK   bool    `json:"rdb_last_bgsave_ok"`
	RoundTripMillis   float64 `json:"round_trip_ms"`
}

type totalsJSON struct {
	Topics     int   `json:"topics"`
	Partitions int   `json:"partitions"`
	Records    int64 `json:"records"`
	Bytes      int64 `json:"bytes"`
	// HighWatermarks adds up every partition's high watermark: its rate
	// is the produce rate, acks=0 included.
	HighWatermarks int64 `json:"high_watermarks"`
}

func (s *server) apiStatus(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), apiTimeout)
	defer cancel()
	writeJSON(w, http.StatusOK, s.status(ctx, r))
}

// status is what r's principal may see of korvet: topics it may not
// describe are left out of the totals and the index and tiering parts.
func (s *server) status(ctx context.Context, r *http.Request) statusJSON {
	now := time.Now()
	id := identityOf(r)
	st := statusJSON{Time: now, Warnings: []string{}, Viewer: viewerJSON{Principal: id.principal, Super: id.super}}
	var k KafkaStats
	if s.opts.Kafka != nil {
		k = s.opts.Kafka()
	}
	st.Broker = brokerJSON{
		Version:          s.opts.Version,
		Started:          s.opts.Started,
		UptimeSeconds:    int64(now.Sub(s.opts.Started).Seconds()),
		ClusterID:        s.eng.ClusterID(),
		Keyspace:         s.eng.Keyspace(),
		Listeners:        s.opts.Listeners,
		ClientsConnected: k.Connections,
		Requests:         k.Requests,
		BytesIn:          k.BytesIn,
		BytesOut:         k.BytesOut,
		ProducedRecords:  k.ProducedRecords,
		FetchedRecords:   k.FetchedRecords,
	}
	if st.Broker.Listeners == nil {
		st.Broker.Listeners = []Listener{}
	}

	info, err := s.eng.RedisInfo(ctx)
	if err != nil {
		st.Redis.Error = err.Error()
		st.Warnings = append(st.Warnings, "Redis does not answer: "+err.Error())
	} else {
		st.Redis = redisJSON{
			Reachable:         true,
			Version:           info.Version,
			Mode:              info.Mode,
			UptimeSeconds:     info.UptimeSeconds,
			Clients:           info.Clients,
			UsedMemory:        info.UsedMemory,
			UsedMemoryPeak:    info.UsedMemoryPeak,
			MaxMemory:         info.MaxMemory,
			MaxMemoryPolicy:   info.MaxMemoryPolicy,
			AOFEnabled:        info.AOFEnabled,
			AOFLastWriteOK:    info.AOFLastWriteOK,
			RDBLastSave:       info.RDBLastSaveUnix,
			RDBChangesPending: info.RDBChangesSinceSave,
			RDBLastBgsaveOK:   info.RDBLastBgsaveOK,
			RoundTripMillis:   float64(info.RoundTrip.Microseconds()) / 1000,
		}
		st.Warnings = append(st.Warnings, redisWarnings(info)...)
		st.Memory = memoryWarning(info.UsedMemory, info.MaxMemory)
	}
	if rs, err := s.eng.RedisStatus(ctx); err == nil {
		st.Warnings = append(st.Warnings, clusterWarnings(rs)...)
	}

	for _, t := range s.eng.UserTopics() {
		if !s.mayTopic(r, auth.OpDescribe, t.Name()) {
			continue
		}
		st.Totals.Topics++
		for _, p := range t.Partitions() {
			hw, start := p.HighWatermark(), p.LogStart()
			st.Totals.Partitions++
			st.Totals.Records += hw - start
			st.Totals.Bytes += p.Bytes()
			st.Totals.HighWatermarks += hw
		}
	}

	if ix, ok := s.indexView(); ok {
		if ix.Error != "" {
			st.Warnings = append(st.Warnings, "KV index: "+ix.Error)
		}
		ix.Topics = slices.DeleteFunc(ix.Topics, func(t string) bool { return !s.mayTopic(r, auth.OpDescribe, t) })
		st.Index = &ix
	}
	if tt, ok := s.eng.Tiering(); ok {
		if a := tt.LastArchived; a != nil && !s.mayTopic(r, auth.OpDescribe, a.Topic) {
			tt.LastArchived = nil
		}
		// An archiving error is warned about for an hour.
		if tt.LastError != "" && now.Sub(tt.LastErrorAt) < time.Hour {
			st.Warnings = append(st.Warnings, "Tiering: "+tt.LastError)
		}
		st.Tiering = &tt
	}
	return st
}

// indexView sums the engine's index figures; ok is false when korvet
// runs without an index.
func (s *server) indexView() (ix indexJSON, ok bool) {
	st := s.eng.KV().Stats()
	if !st.Enabled {
		return indexJSON{}, false
	}
	rb := s.eng.KV().RebuildState()
	ix = indexJSON{Open: st.Enabled, SizeBytes: int64(st.DiskBytes), Rebuilding: rb.Running, LastRebuild: rb.Last}
	if rb.LastErr != "" {
		ix.Error = "last rebuild: " + rb.LastErr
	}
	for _, t := range st.Topics {
		ix.Topics = append(ix.Topics, t.Topic)
		ix.Keys += t.Keys
		for _, p := range t.Partitions {
			ix.Lag += p.Lag
			if p.Error != "" && ix.Error == "" {
				ix.Error = fmt.Sprintf("%s/%d: %s", t.Topic, p.Partition, p.Error)
			}
		}
	}
	return ix, true
}

// redisWarnings names the Redis settings that put korvet's data at risk.
func redisWarnings(info engine.RedisInfo) []string {
	var w []string
	if !info.AOFEnabled {
		w = append(w, "Redis runs with AOF off (appendonly no): records acknowledged since the last RDB snapshot are lost if Redis stops. Set appendonly yes in redis.conf.")
	} else if !info.AOFLastWriteOK {
		w = append(w, "Redis failed its last AOF write: check its disk.")
	}
	if p := info.MaxMemoryPolicy; p != "" && p != "noeviction" {
		w = append(w, fmt.Sprintf("Redis maxmemory-policy is %s: when memory runs out Redis may evict korvet's streams. Use noeviction.", p))
	}
	if !info.RDBLastBgsaveOK && info.Raw["rdb_last_bgsave_status"] != "" {
		w = append(w, "Redis failed its last RDB snapshot: check its disk.")
	}
	return w
}

// memoryWarningJSON is the status page's banner about Redis's memory.
type memoryWarningJSON struct {
	Level      string `json:"level"` // "warn" from 80% of maxmemory, "critical" from 95%
	Percent    int64  `json:"percent"`
	UsedMemory int64  `json:"used_memory"`
	MaxMemory  int64  `json:"maxmemory"`
	Message    string `json:"message"`
}

// memoryWarning warns from 80% of maxmemory on, more strongly from 95%:
// at 100% Redis refuses writes (noeviction) and every produce fails.
func memoryWarning(used, maxmem int64) *memoryWarningJSON {
	if maxmem <= 0 || used*100 < maxmem*80 {
		return nil
	}
	pct := used * 100 / maxmem
	w := &memoryWarningJSON{Level: "warn", Percent: pct, UsedMemory: used, MaxMemory: maxmem}
	lead := fmt.Sprintf("Redis uses %d%% of its maxmemory (%s of %s).", pct, fmtBytes(used), fmtBytes(maxmem))
	if pct >= 95 {
		w.Level = "critical"
		lead = fmt.Sprintf("Redis is nearly full: %d%% of its maxmemory (%s of %s).", pct, fmtBytes(used), fmtBytes(maxmem))
	}
	w.Message = lead + " When it is full Redis refuses writes and every produce fails (KAFKA_STORAGE_ERROR, retried by clients) until there is room." +
		" Make room: raise maxmemory in redis.conf, shorten local.retention.ms (or retention.ms) of the biggest topics, enable the cold tier (remote.storage.enable=true) so archived segments leave Redis, or set korvet.storage.compression=zstd on JSON topics."
	return w
}

// fmtBytes writes n in binary units for messages.
func fmtBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	f, u := float64(n)/unit, 0
	for f >= unit && u < 4 {
		f /= unit
		u++
	}
	return fmt.Sprintf("%.1f %ciB", f, "KMGTP"[u])
}

type topicJSON struct {
	Name    string `json:"name"`
	ID      string `json:"id"`
	Records int64  `json:"records"`
	Bytes   int64  `json:"bytes"`
	// What the topic takes in Redis, from the memory sampler (the
	// partitions this broker leads); null before its first sample.
	// RedisBytes is MEMORY USAGE of its streams and partition keys;
	// RecordBytesPerRecord the records' own size (key, value, headers,
	// before flattening or compression); HotRetentionSeconds how much
	// time of the topic Redis holds at the current rates (README, "Redis
	// memory per topic"), null when nothing bounds it.
	RedisBytes           *int64                `json:"redis_bytes"`
	RedisBytesPerRecord  *float64              `json:"redis_bytes_per_record"`
	RecordBytesPerRecord *float64              `json:"record_bytes_per_record"`
	RedisIngestPerSecond *float64              `json:"redis_ingest_bytes_per_second"`
	HotSpanSeconds       *float64              `json:"hot_span_seconds"`
	HotRetentionSeconds  *float64              `json:"hot_retention_seconds"`
	RedisPartitions      int                   `json:"redis_partitions_measured"`
	RedisSampledAt       *time.Time            `json:"redis_sampled_at"`
	Partitions           []partitionJSON       `json:"partitions"`
	Configs              map[string]configJSON `json:"configs"`
}

type partitionJSON struct {
	Partition     int32 `json:"partition"`
	LogStart      int64 `json:"log_start"`
	HighWatermark int64 `json:"high_watermark"`
	Records       int64 `json:"records"` // offsets are dense: high watermark - log start
	// Bytes is what was appended over the partition's life, in Redis's
	// entry encoding; retention does not lower it.
	Bytes int64 `json:"bytes"`
}

type configJSON struct {
	Value  string `json:"value"`
	Source string `json:"source"` // topic, broker (topic_defaults) or default
}

// shownConfigs are listed for every topic whatever their source; configs
// set on the topic itself are listed too.
var shownConfigs = []string{"cleanup.policy", "retention.ms", "retention.bytes", "max.message.bytes", "message.timestamp.type"}

func (s *server) apiTopics(w http.ResponseWriter, r *http.Request) {
	ts := s.eng.UserTopics()
	out := make([]topicJSON, 0, len(ts))
	mem := s.eng.MemoryStatus()
	for _, t := range ts {
		if !s.mayTopic(r, auth.OpDescribe, t.Name()) {
			continue
		}
		tj := topicView(t)
		if tm, ok := mem.Topics[t.Name()]; ok {
			addMemory(&tj, tm)
		}
		out = append(out, tj)
	}
	writeJSON(w, http.StatusOK, out)
}

func topicView(t *engine.Topic) topicJSON {
	id := t.ID()
	tj := topicJSON{Name: t.Name(), ID: uuid(id), Configs: map[string]configJSON{}}
	for _, p := range t.Partitions() {
		hw, start := p.HighWatermark(), p.LogStart()
		pj := partitionJSON{Partition: p.ID(), LogStart: start, HighWatermark: hw, Records: hw - start, Bytes: p.Bytes()}
		tj.Records += pj.Records
		tj.Bytes += pj.Bytes
		tj.Partitions = append(tj.Partitions, pj)
	}
	names := append([]string{}, shownConfigs...)
	for name := range t.Configs() {
		names = append(names, name)
	}
	for _, name := range names {
		v, src := t.Config(name)
		tj.Configs[name] = configJSON{Value: v, Source: sourceName(src)}
	}
	return tj
}

// addMemory fills in the sampler's figures of a topic.
func addMemory(tj *topicJSON, tm engine.TopicMemory) {
	ptr := func(v float64) *float64 { return &v }
	tj.RedisBytes = &tm.RedisBytes
	tj.RedisPartitions = tm.Partitions
	at := tm.At
	tj.RedisSampledAt = &at
	if tm.Entries > 0 {
		tj.RedisBytesPerRecord = ptr(tm.BytesPerRecord)
		tj.RecordBytesPerRecord = ptr(tm.RecordBytesPerRecord)
	}
	tj.RedisIngestPerSecond = ptr(tm.IngestBytesPerSecond)
	tj.HotSpanSeconds = ptr(tm.HotSpan.Seconds())
	if tm.HotRetentionKnown {
		tj.HotRetentionSeconds = ptr(tm.HotRetention.Seconds())
	}
}

func sourceName(s engine.ConfigSource) string {
	switch s {
	case engine.SourceTopic:
		return "topic"
	case engine.SourceStaticBroker:
		return "broker"
	default:
		return "default"
	}
}

// uuid formats a topic id the way Kafka tools print it.
func uuid(id [16]byte) string {
	h := hex.EncodeToString(id[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

type groupJSON struct {
	Group        string          `json:"group"`
	State        string          `json:"state"`
	ProtocolType string          `json:"protocol_type"`
	Protocol     string          `json:"protocol"`
	Generation   int32           `json:"generation"`
	Members      int             `json:"members"`
	Lag          int64           `json:"lag"`
	Partitions   []groupPartJSON `json:"partitions"`
	Error        string          `json:"error,omitempty"`
	// Type is "classic" or "consumer" (KIP-848). A consumer group also
	// has its epochs, assignor and members with their assignments.
	Type            string            `json:"type"`
	GroupEpoch      int32             `json:"group_epoch,omitempty"`
	AssignmentEpoch int32             `json:"assignment_epoch,omitempty"`
	Assignor        string            `json:"assignor,omitempty"`
	MemberList      []groupMemberJSON `json:"member_list,omitempty"`
}

type groupMemberJSON struct {
	MemberID   string           `json:"member_id"`
	InstanceID string           `json:"instance_id,omitempty"`
	ClientID   string           `json:"client_id"`
	ClientHost string           `json:"client_host"`
	Epoch      int32            `json:"epoch"`
	State      string           `json:"state"`
	Protocol   string           `json:"protocol"` // "consumer" or "classic"
	Assignment []topicPartsJSON `json:"assignment"`
	Target     []topicPartsJSON `json:"target"`
}

type topicPartsJSON struct {
	Topic      string  `json:"topic"`
	Partitions []int32 `json:"partitions"`
}

type groupPartJSON struct {
	Topic         string `json:"topic"`
	Partition     int32  `json:"partition"`
	Committed     int64  `json:"committed"`
	HighWatermark int64  `json:"high_watermark"`
	Lag           int64  `json:"lag"`
}

func (s *server) apiGroups(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), apiTimeout)
	defer cancel()
	writeJSON(w, http.StatusOK, s.groupViews(ctx, r))
}

// groupViews lists the groups r's principal may describe, with the lag of
// the topics it may describe (as OffsetFetch would answer it).
func (s *server) groupViews(ctx context.Context, r *http.Request) []groupJSON {
	list := s.groups.List()
	out := make([]groupJSON, 0, len(list))
	for _, g := range list {
		if !s.allowed(r, auth.OpDescribe, auth.ResGroup, g.Group) {
			continue
		}
		gj := groupJSON{Group: g.Group, State: g.StateName, ProtocolType: g.ProtocolType, Protocol: g.Protocol,
			Generation: g.Generation, Members: g.Members, Partitions: []groupPartJSON{}, Type: g.Type}
		if g.Type == "consumer" {
			s.addConsumerGroup(&gj)
		}
		lags, err := s.groups.Lag(ctx, g.Group)
		if err != nil {
			gj.Error = err.Error()
		}
		for _, l := range lags {
			if !s.mayTopic(r, auth.OpDescribe, l.Topic) {
				continue
			}
			gj.Partitions = append(gj.Partitions, groupPartJSON{Topic: l.Topic, Partition: l.Partition, Committed: l.Committed, HighWatermark: l.HighWatermark, Lag: l.Lag})
			gj.Lag += l.Lag
		}
		sort.Slice(gj.Partitions, func(i, j int) bool {
			a, b := gj.Partitions[i], gj.Partitions[j]
			return a.Topic < b.Topic || a.Topic == b.Topic && a.Partition < b.Partition
		})
		out = append(out, gj)
	}
	return out
}

// apiIndexRebuild starts a rebuild of the KV index; its progress shows
// in the status (index.rebuilding, index.last_rebuild).
func (s *server) apiIndexRebuild(w http.ResponseWriter, r *http.Request) {
	var err error
	switch serr := s.eng.KV().StartRebuild(); {
	case errors.Is(serr, engine.ErrKVDisabled):
		err = &apiError{status: http.StatusNotImplemented, code: "index_disabled", msg: "this korvet has no KV index to rebuild"}
	case serr != nil: // one is running already
		err = &apiError{status: http.StatusConflict, code: "rebuild_running", msg: serr.Error()}
	}
	s.finish(w, r, "index.rebuild", "index", http.StatusAccepted, map[string]string{"status": "rebuild started"}, err)
}

// addConsumerGroup fills in a consumer group's epochs and members.
func (s *server) addConsumerGroup(gj *groupJSON) {
	d, err := s.groups.DescribeConsumer(gj.Group)
	if err != nil {
		return // gone meanwhile
	}
	gj.State, gj.GroupEpoch, gj.AssignmentEpoch, gj.Assignor = d.State, d.Epoch, d.AssignmentEpoch, d.Assignor
	gj.Generation = d.Epoch
	gj.MemberList = []groupMemberJSON{}
	for _, m := range d.Members {
		mj := groupMemberJSON{MemberID: m.MemberID, InstanceID: m.InstanceID, ClientID: m.ClientID, ClientHost: m.ClientHost,
			Epoch: m.MemberEpoch, State: m.State, Protocol: "consumer",
			Assignment: s.topicParts(m.Assignment), Target: s.topicParts(m.Target)}
		if m.Classic {
			mj.Protocol = "classic"
		}
		gj.MemberList = append(gj.MemberList, mj)
	}
}

// topicParts names an assignment's topics, sorted by name.
func (s *server) topicParts(a group.Assignment) []topicPartsJSON {
	out := []topicPartsJSON{}
	for id, ps := range a {
		name := uuid(id)
		if t := s.eng.TopicByID(id); t != nil {
			name = t.Name()
		}
		out = append(out, topicPartsJSON{Topic: name, Partitions: ps})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Topic < out[j].Topic })
	return out
}
