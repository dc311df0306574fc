package engine

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/korvet/korvet/resp"
)

// The Redis deployment as the status page, /api/v1/redis and /metrics
// show it: every shard (a master, its replicas and the slots it serves),
// each node's memory and keys, and which shard holds each partition.

const (
	// redisNodeTimeout bounds the shard map and each node's INFO: a node
	// that hangs shows as unreachable instead of stalling the page.
	redisNodeTimeout = 2 * time.Second
	// redisStatusTTL is how long a gathered view is served before the next
	// request gathers again, so that a busy page or scraper does not send
	// INFO to every node on every call.
	redisStatusTTL = 3 * time.Second
	// redisStatusMaxStale is how old a view may be and still be answered
	// at once while a fresh one is gathered behind it.
	redisStatusMaxStale = 30 * time.Second
)

// RedisStatus is korvet's Redis deployment.
type RedisStatus struct {
	Cluster bool      // the client speaks Redis Cluster
	At      time.Time // when the shards and nodes were read
	// Error says why the shard map could not be read; Shards is then empty.
	Error  string
	Shards []RedisShard
	// Partitions counts every topic partition (internal topics too);
	// Unserved are those whose slot no shard serves right now.
	Partitions int
	Unserved   int
	Stats      resp.Stats // the client's redirects and slot map reloads
}

// RedisShard is a master, its replicas and the slots it serves.
type RedisShard struct {
	ID         string // the master's node id; empty for a standalone Redis
	Master     string // host:port
	Slots      int
	Ranges     [][2]int // inclusive, sorted
	Partitions int      // partitions whose meta key hashes to one of Slots
	Nodes      []RedisNode
}

// SlotRanges writes the ranges compactly: "0-5460,10923".
func (s RedisShard) SlotRanges() string {
	var b strings.Builder
	for i, r := range s.Ranges {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(r[0]))
		if r[1] != r[0] {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(r[1]))
		}
	}
	return b.String()
}

// RedisNode is one redis-server of a shard.
type RedisNode struct {
	ID     string
	Addr   string
	Role   string // master or replica
	Health string // as the cluster sees it: online, failed, loading; or ""
	// Up is true when the node answered INFO; Error says why not.
	Up             bool
	Error          string
	UsedMemory     int64
	UsedMemoryPeak int64
	MaxMemory      int64 // 0: no limit
	Keys           int64 // over every db of the node
}

// redisStatusCache keeps the last gathered view; one gather runs at a
// time and every caller that needs it waits for that one.
type redisStatusCache struct {
	mu      sync.Mutex
	last    RedisStatus
	have    bool
	running chan struct{} // closed when the gather in flight ends; nil: none
}

// RedisStatus describes the Redis deployment. The shards and nodes come
// from a view at most a few seconds old (gathered again in the background
// once it is older); partition counts and client counters are current.
// It fails only when ctx ends before a first view exists.
func (e *Engine) RedisStatus(ctx context.Context) (RedisStatus, error) {
	st, err := e.redisDeployment(ctx)
	if err != nil {
		return RedisStatus{}, err
	}
	st.Cluster = e.rc.IsCluster()
	st.Stats = e.rc.Stats()
	// Copy what is about to be counted: the cached view is shared.
	st.Shards = append([]RedisShard(nil), st.Shards...)
	for i := range st.Shards {
		st.Shards[i].Partitions = 0
	}
	for _, t := range e.Topics() {
		for _, p := range t.Partitions() {
			st.Partitions++
			if i := shardOfSlot(st.Shards, resp.Slot(p.metaKey)); i >= 0 {
				st.Shards[i].Partitions++
			} else {
				st.Unserved++
			}
		}
	}
	return st, nil
}

// shardOfSlot returns the index of the shard serving slot, or -1.
func shardOfSlot(shards []RedisShard, slot int) int {
	for i, s := range shards {
		for _, r := range s.Ranges {
			if slot >= r[0] && slot <= r[1] {
				return i
			}
		}
	}
	return -1
}

// redisDeployment returns the cached view when fresh, a stale one at
// once while a new one is gathered, and otherwise waits for the gather.
func (e *Engine) redisDeployment(ctx context.Context) (RedisStatus, error) {
	c := &e.redisCache
	c.mu.Lock()
	age := time.Since(c.last.At)
	if c.have && age < redisStatusTTL {
		st := c.last
		c.mu.Unlock()
		return st, nil
	}
	if c.running == nil {
		done := make(chan struct{})
		c.running = done
		// The gather belongs to the engine, not to the request that
		// started it: a caller that gives up does not cancel it for the
		// others; Close does.
		go func() {
			st := e.gatherRedis(e.bg)
			c.mu.Lock()
			c.last, c.have, c.running = st, true, nil
			c.mu.Unlock()
			close(done)
		}()
	}
	running := c.running
	if c.have && age < redisStatusMaxStale {
		st := c.last
		c.mu.Unlock()
		return st, nil
	}
	c.mu.Unlock()
	select {
	case <-running:
	case <-ctx.Done():
		return RedisStatus{}, fmt.Errorf("%w: read the Redis deployment: %w", ErrStorageUnavailable, ctx.Err())
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last, nil
}

// gatherRedis reads the shard map, then every node's INFO in parallel,
// each bounded by redisNodeTimeout. A node that fails is marked, never
// fails the whole.
func (e *Engine) gatherRedis(ctx context.Context) RedisStatus {
	st := RedisStatus{At: time.Now()}
	sctx, cancel := context.WithTimeout(ctx, redisNodeTimeout)
	shards, err := e.rc.Shards(sctx)
	cancel()
	if err != nil {
		st.Error = fmt.Sprintf("read the shard map: %v", err)
		return st
	}
	cluster := e.rc.IsCluster()
	var wg sync.WaitGroup
	for _, sh := range shards {
		rs := RedisShard{ID: sh.ID, Master: sh.Master, Slots: sh.SlotCount(), Ranges: append([][2]int(nil), sh.Slots...),
			Nodes: make([]RedisNode, len(sh.Nodes))}
		sort.Slice(rs.Ranges, func(i, j int) bool { return rs.Ranges[i][0] < rs.Ranges[j][0] })
		for i, n := range sh.Nodes {
			rs.Nodes[i] = RedisNode{ID: n.ID, Addr: n.Addr, Role: n.Role, Health: n.Health}
			// A standalone client reaches only its own server: the
			// replicas INFO replication lists are shown as it reports
			// them.
			if !cluster && n.Addr != sh.Master {
				rs.Nodes[i].Up = n.Health == "online"
				if !rs.Nodes[i].Up {
					rs.Nodes[i].Error = "replica state " + n.Health
				}
				continue
			}
			wg.Add(1)
			go func(node *RedisNode) {
				defer wg.Done()
				nctx, cancel := context.WithTimeout(ctx, redisNodeTimeout)
				defer cancel()
				e.nodeInfo(nctx, node)
			}(&rs.Nodes[i])
		}
		st.Shards = append(st.Shards, rs)
	}
	wg.Wait()
	sort.SliceStable(st.Shards, func(i, j int) bool { return firstSlot(st.Shards[i]) < firstSlot(st.Shards[j]) })
	return st
}

func firstSlot(s RedisShard) int {
	if len(s.Ranges) == 0 {
		return resp.SlotCount
	}
	return s.Ranges[0][0]
}

// nodeInfo fills in a node's memory and keys from one INFO call.
func (e *Engine) nodeInfo(ctx context.Context, n *RedisNode) {
	r, err := e.rc.DoNode(ctx, n.Addr, "INFO", "memory", "keyspace")
	var re *resp.Error
	if errors.As(err, &re) {
		// Servers before 7.0 take one section at most.
		r, err = e.rc.DoNode(ctx, n.Addr, "INFO")
	}
	if err != nil {
		n.Error = err.Error()
		return
	}
	info := parseRedisInfo(r.Bytes())
	n.Up = true
	n.UsedMemory, n.UsedMemoryPeak, n.MaxMemory = info.UsedMemory, info.UsedMemoryPeak, info.MaxMemory
	for k, v := range info.Raw {
		// db0:keys=12,expires=0,avg_ttl=0
		if !strings.HasPrefix(k, "db") {
			continue
		}
		if f, _, ok := strings.Cut(v, ","); ok {
			if s, ok := strings.CutPrefix(f, "keys="); ok {
				keys, _ := strconv.ParseInt(s, 10, 64)
				n.Keys += keys
			}
		}
	}
}
