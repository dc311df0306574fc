package testbed

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

const (
	clusterSlots     = 16384
	clusterFormTime  = 30 * time.Second // create + every node agreeing
	clusterSettle    = 30 * time.Second // after a failover or a reshard
	clusterCLITimout = 2 * time.Minute  // one redis-cli --cluster run
)

// RedisCluster is a Redis Cluster of redis-servers owned by one test.
type RedisCluster struct {
	Nodes   []*Redis // masters first (Nodes[:Masters]), then replicas
	Masters int
	URL     string   // redis://127.0.0.1:PORT/0 of the first master
	Seeds   []string // every node's host:port

	tb       testing.TB
	password string
	ids      map[*Redis]string // cluster node id of each node
	masterOf map[*Redis]*Redis // replica → its master at creation
}

// StartRedisCluster starts masters + masters*replicas redis-servers on
// free loopback ports, joins them into a cluster with redis-cli --cluster
// create and waits until every node reports cluster_state:ok and agrees on
// the slot map. A short cluster-node-timeout makes failovers fast. The
// servers are killed when the test ends; extraArgs go to every server
// ("--requirepass pw" also sets masterauth, so replicas can sync).
func StartRedisCluster(tb testing.TB, masters, replicas int, extraArgs ...string) *RedisCluster {
	tb.Helper()
	if masters < 3 {
		tb.Fatalf("testbed: a Redis Cluster needs at least 3 masters, not %d", masters)
	}
	if _, err := exec.LookPath("redis-cli"); err != nil {
		tb.Fatalf("testbed: redis-cli not found (apt-get install -y redis-tools): %v", err)
	}
	args := []string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "1000"}
	var password string
	for i := 0; i+1 < len(extraArgs); i++ {
		if extraArgs[i] == "--requirepass" {
			password = extraArgs[i+1]
			args = append(args, "--masterauth", password)
		}
	}
	args = append(args, extraArgs...)
	rc := &RedisCluster{tb: tb, password: password, ids: map[*Redis]string{}, masterOf: map[*Redis]*Redis{}}
	n := masters * (1 + replicas)
	started := make([]*Redis, 0, n)
	for range n {
		started = append(started, StartRedis(tb, args...))
	}
	create := []string{"--cluster", "create"}
	for _, r := range started {
		create = append(create, r.Addr)
	}
	create = append(create, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	rc.cli(tb, create...)

	byID := map[string]*Redis{}
	for _, r := range started {
		id, err := rc.do(r, "CLUSTER", "MYID")
		if err != nil {
			tb.Fatalf("testbed: CLUSTER MYID on %s: %v", r.Addr, err)
		}
		rc.ids[r] = id.(string)
		byID[id.(string)] = r
	}
	// Which node redis-cli made a master is its choice: read it back.
	var ms, rs []*Redis
	for _, r := range started {
		me, err := rc.self(r)
		if err != nil {
			tb.Fatalf("testbed: %v", err)
		}
		if me.master {
			ms = append(ms, r)
		} else {
			rs = append(rs, r)
			rc.masterOf[r] = byID[me.masterID]
		}
	}
	if len(ms) != masters {
		tb.Fatalf("testbed: redis-cli made %d masters, want %d", len(ms), masters)
	}
	rc.Nodes = append(ms, rs...)
	rc.Masters = masters
	rc.URL = rc.Nodes[0].URL
	for _, r := range rc.Nodes {
		rc.Seeds = append(rc.Seeds, r.Addr)
	}
	rc.waitOK(tb, clusterFormTime)
	// Replicas in sync, so that a failover finds one to promote.
	for _, r := range rs {
		WaitFor(tb, clusterFormTime, "replica "+r.Addr+" in sync", func() bool {
			v, err := rc.do(r, "INFO", "replication")
			s, _ := v.(string)
			return err == nil && strings.Contains(s, "master_link_status:up")
		})
	}
	return rc
}

// NodeID returns r's cluster node id.
func (rc *RedisCluster) NodeID(r *Redis) string { return rc.ids[r] }

// Do runs one command on node r and returns its reply: string, int64,
// []any, nil, or an error for an error reply.
func (rc *RedisCluster) Do(tb testing.TB, r *Redis, args ...string) any {
	tb.Helper()
	v, err := rc.do(r, args...)
	if err != nil {
		tb.Fatalf("testbed: %s on %s: %v", strings.Join(args, " "), r.Addr, err)
	}
	return v
}

// MasterOf returns the node that serves key's slot now.
func (rc *RedisCluster) MasterOf(tb testing.TB, key string) *Redis {
	tb.Helper()
	return rc.ownerOf(tb, rc.keySlot(tb, key))
}

// Kill ends node r with SIGKILL, as a crash would.
func (rc *RedisCluster) Kill(tb testing.TB, r *Redis) {
	tb.Helper()
	r.Kill()
}

// WaitPromoted waits until a replica of the dead master serves the slots
// it served and the cluster is ok again, and returns that replica.
func (rc *RedisCluster) WaitPromoted(tb testing.TB, dead *Redis) *Redis {
	tb.Helper()
	var promoted *Redis
	WaitFor(tb, clusterSettle, "a replica of "+dead.Addr+" promoted", func() bool {
		for r, m := range rc.masterOf {
			if m != dead || !r.alive() {
				continue
			}
			if me, err := rc.self(r); err == nil && me.master && len(me.slots) > 0 {
				promoted = r
				return true
			}
		}
		return false
	})
	rc.waitOK(tb, clusterSettle)
	return promoted
}

// Reshard moves slots slots (and their keys) from one master to another
// with redis-cli --cluster reshard and waits until every node agrees.
func (rc *RedisCluster) Reshard(tb testing.TB, from, to *Redis, slots int) {
	tb.Helper()
	rc.waitOK(tb, clusterSettle)
	rc.cli(tb, "--cluster", "reshard", from.Addr,
		"--cluster-from", rc.ids[from], "--cluster-to", rc.ids[to],
		"--cluster-slots", strconv.Itoa(slots), "--cluster-yes")
	rc.waitOK(tb, clusterSettle)
}

// MoveSlot moves one slot and its keys to node to, the way redis-cli
// does: SETSLOT IMPORTING/MIGRATING, MIGRATE of every key, SETSLOT NODE.
func (rc *RedisCluster) MoveSlot(tb testing.TB, slot int, to *Redis) {
	tb.Helper()
	from := rc.BeginMigration(tb, slot, to)
	if from == to {
		return
	}
	rc.MigrateKeys(tb, slot, from, to)
	rc.EndMigration(tb, slot, to)
}

// BeginMigration marks slot MIGRATING on its owner and IMPORTING on to, and
// returns the owner (to itself when it serves the slot already, and then
// does nothing). Keys still on the owner are served there; keys already
// moved are answered with ASK.
func (rc *RedisCluster) BeginMigration(tb testing.TB, slot int, to *Redis) *Redis {
	tb.Helper()
	from := rc.ownerOf(tb, slot)
	if from == to {
		return from
	}
	s := strconv.Itoa(slot)
	rc.Do(tb, to, "CLUSTER", "SETSLOT", s, "IMPORTING", rc.ids[from])
	rc.Do(tb, from, "CLUSTER", "SETSLOT", s, "MIGRATING", rc.ids[to])
	return from
}

// MigrateKeys moves every key of slot from one node to another (during a
// migration BeginMigration started).
func (rc *RedisCluster) MigrateKeys(tb testing.TB, slot int, from, to *Redis, keys ...string) {
	tb.Helper()
	host, port, _ := net.SplitHostPort(to.Addr)
	for {
		batch := keys
		if len(keys) == 0 {
			v := rc.Do(tb, from, "CLUSTER", "GETKEYSINSLOT", strconv.Itoa(slot), "100")
			for _, k := range v.([]any) {
				batch = append(batch, k.(string))
			}
		}
		if len(batch) == 0 {
			return
		}
		args := []string{"MIGRATE", host, port, "", "0", "10000"}
		if rc.password != "" {
			args = append(args, "AUTH", rc.password)
		}
		args = append(args, "KEYS")
		rc.Do(tb, from, append(args, batch...)...)
		if len(keys) > 0 {
			return
		}
	}
}

// EndMigration moves the slot's keys still on its old owner, gives slot
// to node to on every live master and waits until the cluster agrees.
func (rc *RedisCluster) EndMigration(tb testing.TB, slot int, to *Redis) {
	tb.Helper()
	s := strconv.Itoa(slot)
	for _, r := range rc.Nodes {
		if r == to || !r.alive() {
			continue
		}
		if me, err := rc.self(r); err == nil && me.master {
			if n, _ := rc.Do(tb, r, "CLUSTER", "COUNTKEYSINSLOT", s).(int64); n > 0 {
				rc.MigrateKeys(tb, slot, r, to)
			}
		}
	}
	// The importing side first, as redis-cli does: then the slot is never
	// without an owner that accepts its keys.
	rc.Do(tb, to, "CLUSTER", "SETSLOT", s, "NODE", rc.ids[to])
	for _, r := range rc.Nodes {
		if r == to || !r.alive() {
			continue
		}
		if me, err := rc.self(r); err == nil && me.master {
			rc.Do(tb, r, "CLUSTER", "SETSLOT", s, "NODE", rc.ids[to])
		}
	}
	rc.waitOK(tb, clusterSettle)
}

// WaitOK waits until every live node reports cluster_state:ok and all
// agree on which node serves every slot.
func (rc *RedisCluster) WaitOK(tb testing.TB) {
	tb.Helper()
	rc.waitOK(tb, clusterSettle)
}

func (rc *RedisCluster) waitOK(tb testing.TB, within time.Duration) {
	tb.Helper()
	var last error
	deadline := time.Now().Add(within)
	for {
		if last = rc.agreed(); last == nil {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("testbed: Redis Cluster not ok within %v: %v", within, last)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// agreed is nil when every live node is ok and sees the same slot owners
// covering every slot.
func (rc *RedisCluster) agreed() error {
	var want string
	for _, r := range rc.Nodes {
		if !r.alive() {
			continue
		}
		v, err := rc.do(r, "CLUSTER", "INFO")
		if err != nil {
			return fmt.Errorf("CLUSTER INFO on %s: %w", r.Addr, err)
		}
		if s, _ := v.(string); !strings.Contains(s, "cluster_state:ok") {
			return fmt.Errorf("%s: not cluster_state:ok", r.Addr)
		}
		nodes, err := rc.nodes(r)
		if err != nil {
			return err
		}
		var owners []string
		covered := 0
		for _, n := range nodes {
			if !n.master || len(n.slots) == 0 {
				continue
			}
			if n.failed {
				return fmt.Errorf("%s: master %s failed but still serves slots", r.Addr, n.addr)
			}
			for _, sr := range n.slots {
				covered += sr[1] - sr[0] + 1
				owners = append(owners, fmt.Sprintf("%d-%d:%s", sr[0], sr[1], n.id))
			}
		}
		if covered != clusterSlots {
			return fmt.Errorf("%s: masters cover %d of %d slots", r.Addr, covered, clusterSlots)
		}
		slices.Sort(owners)
		got := strings.Join(owners, ",")
		if want == "" {
			want = got
		} else if got != want {
			return fmt.Errorf("%s disagrees on the slot map", r.Addr)
		}
	}
	return nil
}

// keySlot asks a live node for key's hash slot (the testbed does not
// depend on the client under test).
func (rc *RedisCluster) keySlot(tb testing.TB, key string) int {
	tb.Helper()
	for _, r := range rc.Nodes {
		if !r.alive() {
			continue
		}
		return int(rc.Do(tb, r, "CLUSTER", "KEYSLOT", key).(int64))
	}
	tb.Fatal("testbed: no live Redis Cluster node")
	return 0
}

// ownerOf is the live node that itself claims slot.
func (rc *RedisCluster) ownerOf(tb testing.TB, slot int) *Redis {
	tb.Helper()
	for _, r := range rc.Nodes {
		if !r.alive() {
			continue
		}
		me, err := rc.self(r)
		if err != nil {
			tb.Fatalf("testbed: %v", err)
		}
		for _, sr := range me.slots {
			if sr[0] <= slot && slot <= sr[1] {
				return r
			}
		}
	}
	tb.Fatalf("testbed: no live node serves slot %d", slot)
	return nil
}

// clusterNode is one line of CLUSTER NODES.
type clusterNode struct {
	id, addr string
	myself   bool
	master   bool
	failed   bool
	masterID string   // of a replica
	slots    [][2]int // served (migration markers left out)
}

func (rc *RedisCluster) nodes(r *Redis) ([]clusterNode, error) {
	v, err := rc.do(r, "CLUSTER", "NODES")
	if err != nil {
		return nil, fmt.Errorf("CLUSTER NODES on %s: %w", r.Addr, err)
	}
	s, _ := v.(string)
	var out []clusterNode
	for line := range strings.SplitSeq(strings.TrimSpace(s), "\n") {
		// <id> <ip:port@cport> <flags> <master> <ping> <pong> <epoch> <link> <slot>...
		f := strings.Fields(line)
		if len(f) < 8 {
			return nil, fmt.Errorf("CLUSTER NODES on %s: bad line %q", r.Addr, line)
		}
		n := clusterNode{id: f[0], addr: strings.Split(f[1], "@")[0], masterID: f[3]}
		for fl := range strings.SplitSeq(f[2], ",") {
			switch fl {
			case "myself":
				n.myself = true
			case "master":
				n.master = true
			case "fail", "fail?":
				n.failed = n.failed || fl == "fail"
			}
		}
		for _, sf := range f[8:] {
			if strings.HasPrefix(sf, "[") {
				continue
			}
			lo, hi, ok := strings.Cut(sf, "-")
			a, err1 := strconv.Atoi(lo)
			b := a
			var err2 error
			if ok {
				b, err2 = strconv.Atoi(hi)
			}
			if err1 != nil || err2 != nil {
				return nil, fmt.Errorf("CLUSTER NODES on %s: bad slot %q", r.Addr, sf)
			}
			n.slots = append(n.slots, [2]int{a, b})
		}
		out = append(out, n)
	}
	return out, nil
}

// self is r's own line of CLUSTER NODES.
func (rc *RedisCluster) self(r *Redis) (clusterNode, error) {
	nodes, err := rc.nodes(r)
	if err != nil {
		return clusterNode{}, err
	}
	for _, n := range nodes {
		if n.myself {
			return n, nil
		}
	}
	return clusterNode{}, fmt.Errorf("CLUSTER NODES on %s: no myself line", r.Addr)
}

// cli runs redis-cli with args, failing the test with its output.
func (rc *RedisCluster) cli(tb testing.TB, args ...string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), clusterCLITimout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "redis-cli", args...)
	if rc.password != "" {
		// REDISCLI_AUTH keeps the password off the command line.
		cmd.Env = append(cmd.Environ(), "REDISCLI_AUTH="+rc.password)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		tb.Fatalf("testbed: redis-cli %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// do sends one command to r on a fresh connection (AUTH first when the
// cluster has a password) and reads its reply.
func (rc *RedisCluster) do(r *Redis, args ...string) (any, error) {
	c, err := net.DialTimeout("tcp", r.Addr, 2*time.Second)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(15 * time.Second)); err != nil {
		return nil, err
	}
	var req []byte
	if rc.password != "" {
		req = appendCommand(req, "AUTH", rc.password)
	}
	req = appendCommand(req, args...)
	if _, err := c.Write(req); err != nil {
		return nil, err
	}
	br := bufio.NewReader(c)
	if rc.password != "" {
		if v, err := readReply(br); err != nil {
			return nil, fmt.Errorf("AUTH: %w", err)
		} else if e, ok := v.(error); ok {
			return nil, fmt.Errorf("AUTH: %w", e)
		}
	}
	v, err := readReply(br)
	if err != nil {
		return nil, err
	}
	if e, ok := v.(error); ok {
		return nil, e
	}
	return v, nil
}

func appendCommand(b []byte, args ...string) []byte {
	b = fmt.Appendf(b, "*%d\r\n", len(args))
	for _, a := range args {
		b = fmt.Appendf(b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b
}

// readReply reads one RESP2 reply: string, int64, []any, nil, or error
// for an error reply. Only for the testbed's own small admin replies.
func readReply(br *bufio.Reader) (any, error) {
	line, err := br.ReadString('\n')
	if err != nil {
		return nil, err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return nil, errors.New("empty reply line")
	}
	body := line[1:]
	switch line[0] {
	case '+':
		return body, nil
	case '-':
		return errors.New(body), nil
	case ':':
		return strconv.ParseInt(body, 10, 64)
	case '$':
		n, err := strconv.Atoi(body)
		if err != nil || n < 0 {
			return nil, err
		}
		if n > 64<<20 {
			return nil, fmt.Errorf("reply of %d bytes is too big for the testbed", n)
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(br, buf); err != nil {
			return nil, err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(body)
		if err != nil || n < 0 {
			return nil, err
		}
		if n > 1<<20 {
			return nil, fmt.Errorf("array of %d elements is too big for the testbed", n)
		}
		out := make([]any, 0, n)
		for range n {
			v, err := readReply(br)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	}
	return nil, fmt.Errorf("unexpected reply %q", line)
}

// alive reports whether the server process runs (not Killed or Stopped).
func (r *Redis) alive() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.proc != nil
}
