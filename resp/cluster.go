package resp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

const (
	clusterRefreshEvery = 10 * time.Second       // periodic slot map reload
	clusterRefreshGap   = 100 * time.Millisecond // at most one reload per gap
	clusterMinWait      = 10 * time.Millisecond  // first backoff on TRYAGAIN, CLUSTERDOWN, a dead node
	clusterMaxWait      = 500 * time.Millisecond
	clusterMaxHops      = 16 // MOVED/ASK followed per command and Exec
)

// cluster routes commands over the masters of a Redis Cluster: a slot map
// learned from CLUSTER SHARDS (or CLUSTER SLOTS), and one standalone
// Client (a pool) per node, all with the URL's credentials.
type cluster struct {
	c     *Client  // the outer client: options, logger, reply pools
	seeds []string // the URL's node, then Options.Seeds

	mu     sync.RWMutex
	slots  [SlotCount]*Client // master of each slot; nil while unknown
	known  []Shard            // as last loaded
	nodes  map[string]*Client // every node dialled, by address
	closed bool

	loadMu   sync.Mutex // one map load at a time
	lastLoad time.Time  // guarded by loadMu

	kick   chan struct{} // asks the refresher for a reload
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	moved, ask, tryAgain, clusterDown, refreshes atomic.Uint64
}

func newCluster(c *Client) (*cluster, error) {
	if c.cfg.Network != "tcp" {
		return nil, errors.New("resp: a Redis Cluster is reached over TCP (redis://host:port), not a unix socket")
	}
	if c.cfg.DB != 0 {
		return nil, fmt.Errorf("resp: a Redis Cluster has only db 0, the URL names db %d", c.cfg.DB)
	}
	cl := &cluster{c: c, seeds: []string{c.cfg.Addr}, nodes: map[string]*Client{}, kick: make(chan struct{}, 1)}
	for _, s := range c.opts.Seeds {
		if _, _, err := net.SplitHostPort(s); err != nil {
			return nil, fmt.Errorf("resp: cluster seed %q is not host:port: %w", s, err)
		}
		cl.seeds = append(cl.seeds, s)
	}
	cl.ctx, cl.cancel = context.WithCancel(context.Background())
	cl.wg.Add(1)
	go cl.refresher()
	return cl, nil
}

// refresher reloads the slot map every clusterRefreshEvery and when kicked
// (after a MOVED or a connection failure).
func (cl *cluster) refresher() {
	defer cl.wg.Done()
	t := time.NewTicker(clusterRefreshEvery)
	defer t.Stop()
	for {
		select {
		case <-cl.ctx.Done():
			return
		case <-t.C:
		case <-cl.kick:
		}
		// A reload asked for right after another is delayed, not dropped:
		// the MOVED that asked may be newer than that load.
		cl.loadMu.Lock()
		gap := clusterRefreshGap - time.Since(cl.lastLoad)
		cl.loadMu.Unlock()
		if gap > 0 {
			w := time.NewTimer(gap)
			select {
			case <-cl.ctx.Done():
				w.Stop()
				return
			case <-w.C:
			}
		}
		ctx, cancel := context.WithTimeout(cl.ctx, cl.c.opts.Timeout)
		if err := cl.refresh(ctx, true); err != nil && cl.ctx.Err() == nil {
			cl.c.log.Warn("redis cluster slot map reload failed", "err", err)
		}
		cancel()
	}
}

// trigger asks the refresher for a reload without waiting for it.
func (cl *cluster) trigger() {
	select {
	case cl.kick <- struct{}{}:
	default:
	}
}

func (cl *cluster) close() error {
	cl.mu.Lock()
	if cl.closed {
		cl.mu.Unlock()
		return nil
	}
	cl.closed = true
	nodes := cl.nodes
	cl.nodes = map[string]*Client{}
	cl.slots = [SlotCount]*Client{}
	cl.mu.Unlock()
	cl.cancel()
	cl.wg.Wait()
	var errs []error
	for _, n := range nodes {
		if err := n.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// node returns the pool for addr, making it on first use.
func (cl *cluster) node(addr string) (*Client, error) {
	cl.mu.RLock()
	n, ok := cl.nodes[addr]
	closed := cl.closed
	cl.mu.RUnlock()
	if ok {
		return n, nil
	}
	if closed {
		return nil, ErrClosed
	}
	cfg := cl.c.cfg
	cfg.Addr = addr
	opts := cl.c.opts
	opts.Cluster, opts.Seeds = false, nil
	n, err := NewFromConfig(cfg, opts)
	if err != nil {
		return nil, fmt.Errorf("resp: cluster node %s: %w", addr, err)
	}
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if cl.closed {
		_ = n.Close()
		return nil, ErrClosed
	}
	if old, ok := cl.nodes[addr]; ok {
		_ = n.Close()
		return old, nil
	}
	cl.nodes[addr] = n
	return n, nil
}

// owner returns the master of slot, loading the map first when the slot
// has none yet.
func (cl *cluster) owner(ctx context.Context, slot int) (*Client, error) {
	cl.mu.RLock()
	n := cl.slots[slot]
	cl.mu.RUnlock()
	if n != nil {
		return n, nil
	}
	if err := cl.refresh(ctx, false); err != nil {
		return nil, err
	}
	cl.mu.RLock()
	n = cl.slots[slot]
	cl.mu.RUnlock()
	if n == nil {
		return nil, &ConnError{Op: "route", Addr: cl.c.cfg.Addr, Err: fmt.Errorf("no master serves slot %d", slot)}
	}
	return n, nil
}

// anyMaster is where keyless commands go when nothing before them in the
// pipeline chose a node: the master of slot 0, or the first one known.
func (cl *cluster) anyMaster(ctx context.Context) (*Client, error) {
	cl.mu.RLock()
	n := cl.slots[0]
	if n == nil {
		for _, s := range cl.slots {
			if s != nil {
				n = s
				break
			}
		}
	}
	cl.mu.RUnlock()
	if n != nil {
		return n, nil
	}
	return cl.owner(ctx, 0)
}

// moveSlot records a MOVED reply: slot is now served by addr.
func (cl *cluster) moveSlot(slot int, addr string) {
	n, err := cl.node(addr)
	if err != nil {
		return
	}
	cl.mu.Lock()
	cl.slots[slot] = n
	cl.mu.Unlock()
	cl.trigger()
}

// refresh loads the slot map from the URL's node, the seeds, then any
// node known, unless a load finished less than clusterRefreshGap ago
// (force: load anyway).
func (cl *cluster) refresh(ctx context.Context, force bool) error {
	cl.loadMu.Lock()
	defer cl.loadMu.Unlock()
	if !force && time.Since(cl.lastLoad) < clusterRefreshGap {
		return nil
	}
	shards, err := cl.load(ctx)
	if err != nil {
		return err
	}
	var slots [SlotCount]*Client
	for _, sh := range shards {
		n, err := cl.node(sh.Master)
		if err != nil {
			return err
		}
		for _, r := range sh.Slots {
			for s := r[0]; s <= r[1]; s++ {
				slots[s] = n
			}
		}
	}
	cl.mu.Lock()
	if !cl.closed {
		cl.slots = slots
		cl.known = shards
	}
	cl.mu.Unlock()
	cl.lastLoad = time.Now()
	cl.refreshes.Add(1)
	return nil
}

// load asks one node after another for the cluster's shards.
func (cl *cluster) load(ctx context.Context) ([]Shard, error) {
	cands := append([]string(nil), cl.seeds...)
	cl.mu.RLock()
	for _, sh := range cl.known {
		for _, n := range sh.Nodes {
			cands = append(cands, n.Addr)
		}
	}
	cl.mu.RUnlock()
	seen := map[string]bool{}
	var errs []error
	for _, addr := range cands {
		if seen[addr] {
			continue
		}
		seen[addr] = true
		if err := ctx.Err(); err != nil {
			errs = append(errs, err)
			break
		}
		shards, err := cl.loadFrom(ctx, addr)
		if err == nil {
			return shards, nil
		}
		errs = append(errs, err)
	}
	return nil, &ConnError{Op: "cluster map", Addr: cl.c.cfg.Addr, Err: fmt.Errorf("no node answered: %w", errors.Join(errs...))}
}

func (cl *cluster) loadFrom(ctx context.Context, addr string) ([]Shard, error) {
	n, err := cl.node(addr)
	if err != nil {
		return nil, err
	}
	// One dead node must not eat the whole budget.
	actx, cancel := context.WithTimeout(ctx, cl.c.opts.DialTimeout)
	defer cancel()
	r, err := n.Do(actx, "CLUSTER", "SHARDS")
	var re *Error
	if errors.As(err, &re) && re.Prefix == "ERR" {
		// Before Redis 7.0.
		if r, err = n.Do(actx, "CLUSTER", "SLOTS"); err != nil {
			return nil, fmt.Errorf("CLUSTER SLOTS on %s: %w", addr, err)
		}
		shards, err := parseClusterSlots(r)
		if err != nil {
			return nil, fmt.Errorf("CLUSTER SLOTS on %s: %w", addr, err)
		}
		fillHosts(shards, addr)
		return shards, nil
	}
	if err != nil {
		return nil, fmt.Errorf("CLUSTER SHARDS on %s: %w", addr, err)
	}
	shards, err := parseClusterShards(r, cl.c.cfg.TLS)
	if err != nil {
		return nil, fmt.Errorf("CLUSTER SHARDS on %s: %w", addr, err)
	}
	fillHosts(shards, addr)
	return shards, nil
}

// fillHosts completes addresses without a host (":port"): a node that
// does not know its own IP (a cluster of one, before any peer told it)
// announces none, meaning the host korvet reached the map's source at.
func fillHosts(shards []Shard, from string) {
	for i := range shards {
		sh := &shards[i]
		sh.Master = resolveAddr(sh.Master, from)
		for j := range sh.Nodes {
			sh.Nodes[j].Addr = resolveAddr(sh.Nodes[j].Addr, from)
		}
	}
}

// parseClusterShards reads CLUSTER SHARDS: per shard a map with "slots"
// (start, end pairs) and "nodes" (maps with id, ip, endpoint, port,
// role, health), with the TLS ports when tlsPorts. Shards serving no slot
// whose master failed (a dead master after its failover) are left out.
func parseClusterShards(r Reply, tlsPorts bool) ([]Shard, error) {
	var out []Shard
	var err error
	r.ForEach(func(sr Reply) bool {
		var sh Shard
		var slots []int64
		forPairs(sr, func(k string, v Reply) {
			switch k {
			case "slots":
				v.ForEach(func(e Reply) bool {
					n, e2 := e.Int()
					if e2 != nil {
						err = fmt.Errorf("slot: %w", e2)
						return false
					}
					slots = append(slots, n)
					return true
				})
			case "nodes":
				v.ForEach(func(nr Reply) bool {
					var nd Node
					var host, ip, port, tlsPort string
					forPairs(nr, func(k string, v Reply) {
						switch k {
						case "id":
							nd.ID = string(v.Bytes())
						case "endpoint":
							host = string(v.Bytes())
						case "ip":
							ip = string(v.Bytes())
						case "port":
							port = string(v.Bytes())
						case "tls-port":
							tlsPort = string(v.Bytes())
						case "role":
							nd.Role = string(v.Bytes())
						case "health":
							nd.Health = string(v.Bytes())
						}
					})
					if host == "" || host == "?" {
						host = ip
					}
					if port == "" || port == "0" || tlsPorts && tlsPort != "" && tlsPort != "0" {
						port = tlsPort
					}
					nd.Addr = net.JoinHostPort(host, port)
					if nd.Role == "master" {
						sh.ID, sh.Master = nd.ID, nd.Addr
						sh.Nodes = append([]Node{nd}, sh.Nodes...)
					} else {
						sh.Nodes = append(sh.Nodes, nd)
					}
					return true
				})
			}
		})
		if err != nil {
			return false
		}
		if len(slots)%2 != 0 {
			err = fmt.Errorf("odd slot list of %d numbers", len(slots))
			return false
		}
		for i := 0; i < len(slots); i += 2 {
			if slots[i] < 0 || slots[i+1] >= SlotCount || slots[i] > slots[i+1] {
				err = fmt.Errorf("bad slot range %d-%d", slots[i], slots[i+1])
				return false
			}
			sh.Slots = append(sh.Slots, [2]int{int(slots[i]), int(slots[i+1])})
		}
		if sh.Master == "" {
			if len(sh.Slots) > 0 {
				err = errors.New("a shard serves slots without a master")
				return false
			}
			return true
		}
		if h := sh.Nodes[0].Health; len(sh.Slots) == 0 && (h == "fail" || h == "failed") {
			return true
		}
		out = append(out, sh)
		return true
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// forPairs calls fn with each key and value of a RESP2 map (a flat array).
func forPairs(r Reply, fn func(k string, v Reply)) {
	var key string
	i := 0
	r.ForEach(func(e Reply) bool {
		if i%2 == 0 {
			key = string(e.Bytes())
		} else {
			fn(key, e)
		}
		i++
		return true
	})
}

// parseClusterSlots reads CLUSTER SLOTS: [start, end, [host, port, id],
// replicas...] per range.
func parseClusterSlots(r Reply) ([]Shard, error) {
	byID := map[string]int{}
	var out []Shard
	var err error
	r.ForEach(func(rr Reply) bool {
		el := rr.Elems(nil)
		if len(el) < 3 {
			err = fmt.Errorf("range with %d elements", len(el))
			return false
		}
		lo, err1 := el[0].Int()
		hi, err2 := el[1].Int()
		if err1 != nil || err2 != nil || lo < 0 || hi >= SlotCount || lo > hi {
			err = fmt.Errorf("bad slot range %q %q", el[0].Bytes(), el[1].Bytes())
			return false
		}
		var nodes []Node
		for i, nr := range el[2:] {
			f := nr.Elems(nil)
			if len(f) < 2 {
				err = errors.New("node with no address")
				return false
			}
			port, e := f[1].Int()
			if e != nil {
				err = fmt.Errorf("node port: %w", e)
				return false
			}
			nd := Node{Addr: net.JoinHostPort(string(f[0].Bytes()), strconv.FormatInt(port, 10)), Role: "replica"}
			if len(f) > 2 {
				nd.ID = string(f[2].Bytes())
			}
			if i == 0 {
				nd.Role = "master"
			}
			nodes = append(nodes, nd)
		}
		id := nodes[0].ID
		if id == "" {
			id = nodes[0].Addr
		}
		j, ok := byID[id]
		if !ok {
			j = len(out)
			byID[id] = j
			out = append(out, Shard{ID: nodes[0].ID, Master: nodes[0].Addr, Nodes: nodes})
		}
		out[j].Slots = append(out[j].Slots, [2]int{int(lo), int(hi)})
		return true
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (cl *cluster) stats() Stats {
	return Stats{
		Moved:       cl.moved.Load(),
		Ask:         cl.ask.Load(),
		TryAgain:    cl.tryAgain.Load(),
		ClusterDown: cl.clusterDown.Load(),
		Refreshes:   cl.refreshes.Load(),
	}
}

// masters returns the address of every master serving slots, from a
// fresh map.
func (cl *cluster) masters(ctx context.Context) ([]string, error) {
	shards, err := cl.shardsNow(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, sh := range shards {
		if len(sh.Slots) > 0 {
			out = append(out, sh.Master)
		}
	}
	return out, nil
}

func (cl *cluster) shardsNow(ctx context.Context) ([]Shard, error) {
	if err := cl.refresh(ctx, true); err != nil {
		return nil, err
	}
	cl.mu.RLock()
	defer cl.mu.RUnlock()
	out := make([]Shard, len(cl.known))
	for i, sh := range cl.known {
		sh.Slots = append([][2]int(nil), sh.Slots...)
		sh.Nodes = append([]Node(nil), sh.Nodes...)
		out[i] = sh
	}
	return out, nil
}

func (cl *cluster) shards(ctx context.Context) ([]Shard, error) { return cl.shardsNow(ctx) }

// isKnown tells whether addr is a node of the last slot map's shards.
func (cl *cluster) isKnown(addr string) bool {
	cl.mu.RLock()
	defer cl.mu.RUnlock()
	for _, sh := range cl.known {
		for _, n := range sh.Nodes {
			if n.Addr == addr {
				return true
			}
		}
	}
	return false
}

// doNode runs a command on one node of the cluster, which must be in the
// slot map's shards.
func (cl *cluster) doNode(ctx context.Context, addr string, args ...any) (Reply, error) {
	known := cl.isKnown(addr)
	if !known {
		if err := cl.refresh(ctx, false); err != nil {
			return Reply{}, err
		}
		known = cl.isKnown(addr)
	}
	if !known {
		return Reply{}, fmt.Errorf("resp: %s is not a node of this Redis Cluster", addr)
	}
	n, err := cl.node(addr)
	if err != nil {
		return Reply{}, err
	}
	return n.Do(ctx, args...)
}
