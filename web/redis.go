package web

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/korvet/korvet/engine"
)

// The Redis deployment: /api/v1/redis and the status page's Redis shards
// section. It shows addresses, slots, memory and partition counts, never
// topic names, so anyone who may see the status page sees it, as with
// /api/v1/status's Redis part.

type redisDeploymentJSON struct {
	Cluster bool      `json:"cluster"`
	At      time.Time `json:"at,omitzero"`
	Error   string    `json:"error,omitempty"`
	// Partitions counts every partition; Unserved those whose slot no
	// shard serves right now (a cluster in failover).
	Partitions int               `json:"partitions"`
	Unserved   int               `json:"unserved_partitions"`
	Shards     []redisShardJSON  `json:"shards"`
	Redirects  redisRedirectJSON `json:"redirects"`
	Refreshes  uint64            `json:"slot_map_refreshes"`
}

type redisRedirectJSON struct {
	Moved       uint64 `json:"moved"`
	Ask         uint64 `json:"ask"`
	TryAgain    uint64 `json:"tryagain"`
	ClusterDown uint64 `json:"clusterdown"`
}

type redisShardJSON struct {
	ID         string          `json:"id,omitempty"`
	Master     string          `json:"master"`
	Slots      int             `json:"slots"`
	SlotRanges string          `json:"slot_ranges"` // "0-5460,10923"
	Partitions int             `json:"partitions"`
	Nodes      []redisNodeJSON `json:"nodes"`
}

type redisNodeJSON struct {
	ID             string `json:"id,omitempty"`
	Addr           string `json:"addr"`
	Role           string `json:"role"`
	Health         string `json:"health,omitempty"`
	Up             bool   `json:"up"`
	Error          string `json:"error,omitempty"`
	UsedMemory     int64  `json:"used_memory"`
	UsedMemoryPeak int64  `json:"used_memory_peak"`
	MaxMemory      int64  `json:"maxmemory"`
	Keys           int64  `json:"keys"`
}

func (s *server) apiRedis(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), apiTimeout)
	defer cancel()
	st, err := s.eng.RedisStatus(ctx)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, redisDeploymentView(st))
}

func redisDeploymentView(st engine.RedisStatus) redisDeploymentJSON {
	out := redisDeploymentJSON{Cluster: st.Cluster, At: st.At, Error: st.Error, Partitions: st.Partitions, Unserved: st.Unserved,
		Shards: make([]redisShardJSON, 0, len(st.Shards)),
		Redirects: redisRedirectJSON{Moved: st.Stats.Moved, Ask: st.Stats.Ask, TryAgain: st.Stats.TryAgain,
			ClusterDown: st.Stats.ClusterDown},
		Refreshes: st.Stats.Refreshes}
	for _, sh := range st.Shards {
		sj := redisShardJSON{ID: sh.ID, Master: sh.Master, Slots: sh.Slots, SlotRanges: sh.SlotRanges(), Partitions: sh.Partitions,
			Nodes: make([]redisNodeJSON, 0, len(sh.Nodes))}
		for _, n := range sh.Nodes {
			sj.Nodes = append(sj.Nodes, redisNodeJSON(n))
		}
		out.Shards = append(out.Shards, sj)
	}
	return out
}

var (
	descRedisCluster   = desc("korvet_redis_cluster", "1 when korvet talks to a Redis Cluster, 0 for a standalone Redis.")
	descRedisShards    = desc("korvet_redis_shards", "Redis shards (masters serving slots; a standalone Redis is one).")
	descShardSlots     = desc("korvet_redis_shard_slots", "Hash slots the shard serves.", "shard")
	descShardParts     = desc("korvet_redis_shard_partitions", "Topic partitions whose keys live on the shard.", "shard")
	descNodeUsedMem    = desc("korvet_redis_node_used_memory_bytes", "The node's used_memory.", "node", "role")
	descNodeMaxMem     = desc("korvet_redis_node_maxmemory_bytes", "The node's maxmemory (0: no limit).", "node", "role")
	descNodeUp         = desc("korvet_redis_node_up", "1 when the node answered INFO (a standalone Redis's replicas: when it reports them online).", "node", "role")
	descRedirects      = desc("korvet_redis_redirects_total", "Redis Cluster redirects and waits this korvet's client followed.", "kind")
	descSlotRefreshes  = desc("korvet_redis_slot_map_refreshes_total", "Times this korvet's client reloaded the cluster's slot map.")
	redisCollectorDesc = []*prometheus.Desc{descRedisCluster, descRedisShards, descShardSlots, descShardParts,
		descNodeUsedMem, descNodeMaxMem, descNodeUp, descRedirects, descSlotRefreshes}
)

// redisCollector reports the Redis deployment for one scrape. Shard and
// node labels are host:port addresses.
type redisCollector struct {
	s   *server
	ctx context.Context
}

func (c *redisCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range redisCollectorDesc {
		ch <- d
	}
}

func (c *redisCollector) Collect(ch chan<- prometheus.Metric) {
	st, err := c.s.eng.RedisStatus(c.ctx)
	if err != nil {
		return // korvet_redis_up says Redis is gone
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge(descRedisCluster, b2f(st.Cluster))
	if st.Error == "" {
		gauge(descRedisShards, float64(len(st.Shards)))
	}
	for _, sh := range st.Shards {
		gauge(descShardSlots, float64(sh.Slots), sh.Master)
		gauge(descShardParts, float64(sh.Partitions), sh.Master)
		for _, n := range sh.Nodes {
			gauge(descNodeUp, b2f(n.Up), n.Addr, n.Role)
			// A node that answered INFO reports some memory; a standalone
			// Redis's replicas are not asked.
			if n.Up && n.UsedMemory > 0 {
				gauge(descNodeUsedMem, float64(n.UsedMemory), n.Addr, n.Role)
				gauge(descNodeMaxMem, float64(n.MaxMemory), n.Addr, n.Role)
			}
		}
	}
	counter(descRedirects, st.Stats.Moved, "moved")
	counter(descRedirects, st.Stats.Ask, "ask")
	counter(descRedirects, st.Stats.TryAgain, "tryagain")
	counter(descRedirects, st.Stats.ClusterDown, "clusterdown")
	counter(descSlotRefreshes, st.Stats.Refreshes)
}

// clusterWarnings names what puts a Redis Cluster's data or writes at
// risk, node by node: INFO above answers for one node only. A standalone
// Redis gets none here (redisWarnings covers its one node).
func clusterWarnings(st engine.RedisStatus) []string {
	if !st.Cluster {
		return nil
	}
	if st.Error != "" {
		return []string{"Redis Cluster: " + st.Error}
	}
	var w []string
	for _, sh := range st.Shards {
		for _, n := range sh.Nodes {
			switch {
			case !n.Up:
				w = append(w, fmt.Sprintf("Redis %s %s (shard of %s) does not answer: %s", n.Role, n.Addr, sh.Master, n.Error))
			case n.Health != "" && n.Health != "online":
				w = append(w, fmt.Sprintf("Redis %s %s (shard of %s) is %s.", n.Role, n.Addr, sh.Master, n.Health))
			case n.MaxMemory > 0 && n.UsedMemory > n.MaxMemory/10*9:
				w = append(w, fmt.Sprintf("Redis %s %s uses %d%% of its maxmemory: when it is full it refuses writes to its slots. Raise maxmemory, lower retention or add a shard.",
					n.Role, n.Addr, n.UsedMemory*100/n.MaxMemory))
			}
		}
	}
	if st.Unserved > 0 {
		w = append(w, fmt.Sprintf("Redis Cluster: %d partitions are on slots no master serves: writes to them fail until the cluster covers every slot again.", st.Unserved))
	}
	return w
}
