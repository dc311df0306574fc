package resp

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// SlotCount is the number of hash slots of Redis Cluster.
const SlotCount = 16384

// Slot returns the Redis Cluster hash slot of key: CRC16 (XMODEM) of the
// key, or of its hash tag (the text between the first '{' and the next
// '}', when not empty), modulo 16384.
func Slot(key string) int { return slotOf(key) }

func slotOf[T string | []byte](key T) int {
	if i := indexByte(key, '{', 0); i >= 0 {
		if j := indexByte(key, '}', i+1); j > i+1 {
			key = key[i+1 : j]
		}
	}
	return int(crc16(key) % SlotCount)
}

func indexByte[T string | []byte](s T, c byte, from int) int {
	for i := from; i < len(s); i++ {
		if s[i] == c {
			return i
		}
	}
	return -1
}

// crc16 is CRC-16/XMODEM (polynomial 0x1021, initial 0), the checksum
// Redis Cluster hashes keys with.
func crc16[T string | []byte](s T) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// IsRedirect reports whether err is a Redis Cluster reply that means the
// command did not run here and may be sent again once the slot map has
// caught up: MOVED, ASK, TRYAGAIN or CLUSTERDOWN (a failover or a slot
// migration in progress).
func IsRedirect(err error) bool {
	var re *Error
	if !errors.As(err, &re) {
		return false
	}
	switch re.Prefix {
	case "MOVED", "ASK", "TRYAGAIN", "CLUSTERDOWN":
		return true
	}
	return false
}

// Node is one Redis server of a deployment.
type Node struct {
	ID     string // cluster node id; empty for a standalone Redis
	Addr   string // host:port (or socket path) korvet dials
	Role   string // "master" or "replica"
	Health string // "online", "fail" ("failed" in some versions), "loading" (CLUSTER SHARDS), or "" when unknown
}

// Shard is a master with its replicas and the slots it serves. A
// standalone Redis is one shard serving every slot.
type Shard struct {
	ID     string   // the master's node id; empty for a standalone Redis
	Master string   // the master's address
	Slots  [][2]int // inclusive ranges
	Nodes  []Node   // the master first, then its replicas
}

// SlotCount returns how many slots the shard serves.
func (s Shard) SlotCount() int {
	n := 0
	for _, r := range s.Slots {
		n += r[1] - r[0] + 1
	}
	return n
}

// Stats counts what the client saw of the cluster's topology changes.
type Stats struct {
	Moved       uint64 // MOVED replies followed
	Ask         uint64 // ASK replies followed
	TryAgain    uint64 // TRYAGAIN replies waited out
	ClusterDown uint64 // CLUSTERDOWN replies waited out
	Refreshes   uint64 // slot map reloads
}

// IsCluster reports whether the client talks to a Redis Cluster.
func (c *Client) IsCluster() bool { return c.cl != nil }

// Stats returns the client's redirect and refresh counters (all zero for
// a standalone Redis).
func (c *Client) Stats() Stats {
	if c.cl != nil {
		return c.cl.stats()
	}
	return Stats{}
}

// Masters returns the addresses of the servers that take writes: every
// master of a cluster, or the one Redis.
func (c *Client) Masters(ctx context.Context) ([]string, error) {
	if c.cl != nil {
		return c.cl.masters(ctx)
	}
	return []string{c.cfg.Addr}, nil
}

// DoNode runs one command on the server at addr (one of Shards' nodes),
// for commands about a server rather than a key: INFO, DBSIZE, MEMORY
// STATS, SCRIPT LOAD.
func (c *Client) DoNode(ctx context.Context, addr string, args ...any) (Reply, error) {
	if c.cl != nil {
		return c.cl.doNode(ctx, addr, args...)
	}
	if addr != c.cfg.Addr {
		return Reply{}, fmt.Errorf("resp: %s is not this client's Redis (%s)", addr, c.cfg.Addr)
	}
	return c.Do(ctx, args...)
}

// ScriptLoad loads a Lua script into the script cache of every master, so
// that EVALSHA finds it whichever shard a key lives on.
func (c *Client) ScriptLoad(ctx context.Context, src string) error {
	addrs, err := c.Masters(ctx)
	if err != nil {
		return err
	}
	for _, a := range addrs {
		if _, err := c.DoNode(ctx, a, "SCRIPT", "LOAD", src); err != nil {
			return fmt.Errorf("resp: load script on %s: %w", a, err)
		}
	}
	return nil
}

// Shards describes the deployment: for a cluster, CLUSTER SHARDS (or
// CLUSTER SLOTS on servers before 7.0); for a standalone Redis, the one
// server with the replicas INFO replication lists.
func (c *Client) Shards(ctx context.Context) ([]Shard, error) {
	if c.cl != nil {
		return c.cl.shards(ctx)
	}
	sh := Shard{Master: c.cfg.Addr, Slots: [][2]int{{0, SlotCount - 1}}, Nodes: []Node{{Addr: c.cfg.Addr, Role: "master", Health: "online"}}}
	r, err := c.Do(ctx, "INFO", "replication")
	if err != nil {
		return nil, fmt.Errorf("resp: INFO replication: %w", err)
	}
	for line := range strings.SplitSeq(string(r.Bytes()), "\n") {
		line = strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(line, "role:"); ok && v == "slave" {
			sh.Nodes[0].Role = "replica"
		}
		// slave0:ip=127.0.0.1,port=6380,state=online,offset=...,lag=0
		if !strings.HasPrefix(line, "slave") || !strings.Contains(line, ":ip=") {
			continue
		}
		_, kv, _ := strings.Cut(line, ":")
		var ip, port, state string
		for f := range strings.SplitSeq(kv, ",") {
			k, v, _ := strings.Cut(f, "=")
			switch k {
			case "ip":
				ip = v
			case "port":
				port = v
			case "state":
				state = v
			}
		}
		if ip != "" && port != "" {
			sh.Nodes = append(sh.Nodes, Node{Addr: ip + ":" + port, Role: "replica", Health: state})
		}
	}
	return []Shard{sh}, nil
}
