package engine

import (
	"context"
	"crypto/rand"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/korvet/korvet/engine/events"
	"github.com/korvet/korvet/resp"
)

// Membership: each broker holds a lease on its node id (a string key
// holding a random instance token, SET NX PX) and a registry entry (a
// field of the brokers hash). Live means the lease key exists; every
// broker renews its own every lease/4 and rereads the live set as often,
// so a broker that dies is gone for everyone within lease + lease/4.

// DefaultLeaseTime is the broker lease when Options.LeaseTime is zero.
const DefaultLeaseTime = 4 * time.Second

// brokerRecord is a broker's registry entry as stored in Redis.
type brokerRecord struct {
	Node      int32            `json:"node"`
	Rack      string           `json:"rack"`
	Listeners []listenerRecord `json:"listeners"`
	Started   int64            `json:"started"`
	Renewed   int64            `json:"renewed"`
	State     string           `json:"state"` // live or leaving
}

type listenerRecord struct {
	Name string `json:"name"`
	Host string `json:"host"`
	Port int32  `json:"port"`
}

const (
	stateLive    = "live"
	stateLeaving = "leaving"
)

// cluster is this broker's view of the brokers on its keyspace.
type cluster struct {
	lease time.Duration

	mu        sync.Mutex
	token     string // our lease's instance token; "" while we hold none
	lostToken string // the token we held before losing track of the lease
	// unreachable: the lease was given up because Redis did not answer.
	unreachable atomic.Bool
	renewedAt   time.Time
	leaving     bool // Leave began: lead nothing new, coordinate nothing
	left        bool // Leave finished (or Close skips it)
	live        map[int32]brokerRecord

	wake chan struct{} // asks the control loop for a leadership check

	// leadMu serializes this process's leadership changes (the check,
	// claims of new partitions, Leave), each of which acts on what it
	// read from Redis and must not act on a read another one outdated.
	leadMu sync.Mutex

	// paused makes the membership loops and the leader subscriber do
	// nothing, as in a process stopped by SIGSTOP (tests only).
	paused atomic.Bool
}

// renewScript extends our lease if the key still holds our token and
// rewrites our registry entry. KEYS: lease, registry. ARGV: token, lease
// ms, node id, registry JSON. Returns 1, or 0 when the lease is lost.
var renewScript = newScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('HSET', KEYS[2], ARGV[3], ARGV[4])
return 1
`)

// releaseScript removes our lease (if it is still ours) and our registry
// entry. KEYS: lease, registry. ARGV: token, node id.
var releaseScript = newScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
redis.call('HDEL', KEYS[2], ARGV[2])
return 1
`)

// takeOverScript moves the lease from this installation's previous run
// (its token, kept in Options.LeaseFile) to this one. KEYS: lease. ARGV:
// previous token, new token, lease ms.
var takeOverScript = newScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return 1
`)

// previousToken is the lease token this installation's last run saved,
// "" if none.
func (e *Engine) previousToken() string {
	if e.opts.LeaseFile == "" {
		return ""
	}
	b, err := os.ReadFile(e.opts.LeaseFile)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// saveToken keeps the lease token for the next run (see LeaseFile).
func (e *Engine) saveToken(token string) {
	if e.opts.LeaseFile == "" {
		return
	}
	tmp := e.opts.LeaseFile + ".tmp"
	err := os.MkdirAll(filepath.Dir(tmp), 0o755)
	if err == nil {
		err = os.WriteFile(tmp, []byte(token+"\n"), 0o600)
	}
	if err == nil {
		err = os.Rename(tmp, e.opts.LeaseFile)
	}
	if err != nil {
		e.log.Warn("cannot keep the broker lease token; a restart after a crash waits for the old lease to lapse", "file", e.opts.LeaseFile, "err", err)
	}
}

func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (e *Engine) record(state string) brokerRecord {
	r := brokerRecord{Node: e.opts.NodeID, Rack: e.opts.Rack, Started: e.started.UnixMilli(), Renewed: time.Now().UnixMilli(), State: state}
	for _, l := range e.opts.Listeners {
		r.Listeners = append(r.Listeners, listenerRecord(l))
	}
	return r
}

// register takes the lease on our node id and writes our registry entry.
// While another live process holds the node id it waits up to one lease
// time (a restart after a crash finds its old lease still there), then
// refuses with an error that says who holds it.
func (e *Engine) register(ctx context.Context, announce bool) error {
	c := &e.cl
	token := newToken()
	leaseKey := e.k.BrokerLease(e.opts.NodeID)
	deadline := time.Now().Add(c.lease + c.lease/4)
	prev := e.previousToken()
	for {
		r, err := e.rc.Do(ctx, "SET", leaseKey, token, "NX", "PX", c.lease.Milliseconds())
		if err != nil {
			return fmt.Errorf("register broker %d: %w", e.opts.NodeID, err)
		}
		if !r.IsNil() {
			break
		}
		// The holder may be this installation's previous run, which
		// crashed: its token is ours to take. Its partitions' epochs are
		// bumped when this run claims them, so should it still be alive
		// (paused), it is fenced like any deposed leader.
		if prev != "" {
			n, err := takeOverScript.run(ctx, e.rc, []string{leaseKey}, prev, token, c.lease.Milliseconds())
			if err != nil {
				return fmt.Errorf("register broker %d: %w", e.opts.NodeID, err)
			}
			if n == 1 {
				e.log.Info("took over the lease of this broker's previous run, which stopped without leaving", "node", e.opts.NodeID)
				break
			}
		}
		if time.Now().After(deadline) {
			return e.duplicateError(ctx)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("register broker %d: %w", e.opts.NodeID, ctx.Err())
		case <-time.After(min(c.lease/8, 250*time.Millisecond)):
		}
	}
	js, _ := json.Marshal(e.record(stateLive))
	if _, err := e.rc.Do(ctx, "HSET", e.k.Brokers(), strconv.Itoa(int(e.opts.NodeID)), js); err != nil {
		return fmt.Errorf("register broker %d: %w", e.opts.NodeID, err)
	}
	c.mu.Lock()
	c.token, c.renewedAt = token, time.Now()
	c.mu.Unlock()
	e.saveToken(token)
	e.log.Info("broker registered", "node", e.opts.NodeID, "lease", c.lease)
	if announce {
		if err := e.events.Publish(ctx, events.Brokers, "change", "join"); err != nil {
			e.log.Warn("registered, but other brokers were not told; they see this broker on their next refresh", "err", err)
		}
	}
	return nil
}

// duplicateError says which live broker holds our node id.
func (e *Engine) duplicateError(ctx context.Context) error {
	holder := "unknown start time and listeners"
	if r, err := e.rc.Do(ctx, "HGET", e.k.Brokers(), strconv.Itoa(int(e.opts.NodeID))); err == nil && !r.IsNil() {
		var rec brokerRecord
		if json.Unmarshal(r.Bytes(), &rec) == nil {
			var ls []string
			for _, l := range rec.Listeners {
				ls = append(ls, fmt.Sprintf("%s %s:%d", l.Name, l.Host, l.Port))
			}
			holder = fmt.Sprintf("started %s, listeners [%s]", time.UnixMilli(rec.Started).Format(time.RFC3339), strings.Join(ls, ", "))
		}
	}
	return fmt.Errorf("%w: kafka.node_id %d is held by another live korvet on this Redis and keyspace (%s), whose lease did not lapse within %s; give this broker a different kafka.node_id, or stop the other one first",
		ErrDuplicateNode, e.opts.NodeID, holder, e.cl.lease)
}

// ErrDuplicateNode: another live broker holds this broker's node id.
var ErrDuplicateNode = errors.New("duplicate broker node id")

// renewLoop renews the lease every lease/4. A broker that finds its lease
// lost (it was paused past it, or Redis lost the key) stops leading at
// once, since another broker may have taken its partitions, and registers
// anew under a new token.
func (e *Engine) renewLoop() {
	defer e.wg.Done()
	c := &e.cl
	tick := time.NewTicker(c.lease / 4)
	defer tick.Stop()
	for {
		select {
		case <-e.bg.Done():
			return
		case <-tick.C:
		}
		if c.paused.Load() {
			continue
		}
		c.mu.Lock()
		token, renewed, left, state := c.token, c.renewedAt, c.left, stateLive
		if c.leaving {
			state = stateLeaving
		}
		c.mu.Unlock()
		if left {
			return
		}
		if token == "" {
			e.reRegister()
			continue
		}
		ctx, cancel := context.WithTimeout(e.bg, c.lease/2)
		js, _ := json.Marshal(e.record(state))
		r, err := renewScript.run(ctx, e.rc, []string{e.k.BrokerLease(e.opts.NodeID), e.k.Brokers()}, token, c.lease.Milliseconds(), e.opts.NodeID, js)
		cancel()
		switch {
		case err != nil:
			// Not a reason to stop leading: whoever else could claim our
			// partitions needs Redis too, and a round that reaches Redis
			// after a claim is fenced there.
			e.log.Warn("broker lease renewal failed; retrying", "err", err, "since_renewed", time.Since(renewed).Round(time.Millisecond))
		case r == 0:
			// Lapsed during an outage (renewals failed since) or while
			// this process was stopped.
			if e.retakeLease(token) {
				continue
			}
			e.loseLease("lease key no longer holds this process's token", time.Since(renewed) > c.lease/2)
		default:
			c.mu.Lock()
			c.renewedAt = time.Now()
			c.mu.Unlock()
		}
	}
}

// retakeLease takes a lapsed lease again with the same token when no one
// else holds the node id, then checks every partition at once: a broker
// that claimed one meanwhile has bumped its epoch, so this one steps down
// there (and its rounds were fenced anyway); the others it still leads,
// which saves a single broker from giving up everything after a long
// Redis stall.
func (e *Engine) retakeLease(token string) bool {
	c := &e.cl
	ctx, cancel := context.WithTimeout(e.bg, c.lease)
	defer cancel()
	r, err := e.rc.Do(ctx, "SET", e.k.BrokerLease(e.opts.NodeID), token, "NX", "PX", c.lease.Milliseconds())
	if err != nil || r.IsNil() {
		return false
	}
	c.mu.Lock()
	c.renewedAt = time.Now()
	c.mu.Unlock()
	e.log.Warn("broker lease had lapsed; taken again", "node", e.opts.NodeID)
	// The others saw this broker go: tell them it is back, so that none
	// names it as a leader it does not count as live.
	if err := e.events.Publish(ctx, events.Brokers, "change", "join"); err != nil {
		e.log.Warn("lease taken again, but other brokers were not told; they see this broker on their next refresh", "err", err)
	}
	if err := e.refreshLive(ctx); err != nil {
		e.log.Warn("broker refresh", "err", err)
	}
	if err := e.checkLeadership(ctx); err != nil {
		e.log.Warn("partition leadership check", "err", err)
	}
	return true
}

// loseLease steps down from every partition and forgets the token, so
// that the renew loop registers again.
//
// unreachable says Redis could not be reached to renew: until it can,
// appends fail as storage unavailable (what a single broker says while
// Redis is down) rather than as not leader.
func (e *Engine) loseLease(why string, unreachable bool) {
	e.log.Warn("broker lease lost; no longer leading any partition", "node", e.opts.NodeID, "why", why)
	e.cl.mu.Lock()
	if e.cl.token != "" {
		e.cl.lostToken = e.cl.token
	}
	e.cl.token = ""
	e.cl.unreachable.Store(unreachable)
	e.cl.mu.Unlock()
	for _, t := range e.Topics() {
		for _, p := range t.Partitions() {
			p.stepDown()
		}
	}
	e.wakeControl()
}

func (e *Engine) reRegister() {
	ctx, cancel := context.WithTimeout(e.bg, e.cl.lease)
	defer cancel()
	c := &e.cl
	c.mu.Lock()
	old := c.lostToken
	c.mu.Unlock()
	if old != "" {
		// Redis was out of reach for a lease: if our lease outlived it
		// (the key persisted), keep it rather than wait for it to lapse:
		// no one could claim our partitions meanwhile, so we lead them
		// again at the same epochs after a resync.
		js := mustJSON(e.record(stateLive))
		if n, err := renewScript.run(ctx, e.rc, []string{e.k.BrokerLease(e.opts.NodeID), e.k.Brokers()}, old, c.lease.Milliseconds(), e.opts.NodeID, js); err == nil && n == 1 {
			c.mu.Lock()
			c.token, c.lostToken, c.renewedAt = old, "", time.Now()
			c.mu.Unlock()
			e.log.Info("broker lease kept after an outage", "node", e.opts.NodeID)
			e.leadAgain(ctx)
			return
		}
	}
	token := newToken()
	r, err := e.rc.Do(ctx, "SET", e.k.BrokerLease(e.opts.NodeID), token, "NX", "PX", c.lease.Milliseconds())
	if err != nil || r.IsNil() {
		if err == nil {
			err = fmt.Errorf("kafka.node_id %d is held by another live process", e.opts.NodeID)
		}
		e.log.Warn("broker cannot register again yet", "node", e.opts.NodeID, "err", err)
		return
	}
	js, _ := json.Marshal(e.record(stateLive))
	if _, err := e.rc.Do(ctx, "HSET", e.k.Brokers(), strconv.Itoa(int(e.opts.NodeID)), js); err != nil {
		e.log.Warn("broker registry entry not written", "err", err)
	}
	c.mu.Lock()
	c.token, c.lostToken, c.renewedAt = token, "", time.Now()
	c.mu.Unlock()
	e.log.Info("broker registered again", "node", e.opts.NodeID)
	_ = e.events.Publish(ctx, events.Brokers, "change", "join")
	e.leadAgain(ctx)
}

// leadAgain takes up partitions at once after registering again, before
// appends stop failing as storage unavailable: a single broker back from
// a Redis outage should not answer "not leader" in between.
func (e *Engine) leadAgain(ctx context.Context) {
	if err := e.refreshLive(ctx); err != nil {
		e.log.Warn("broker refresh", "err", err)
	}
	if err := e.checkLeadership(ctx); err != nil {
		e.log.Warn("partition leadership check", "err", err)
	}
	e.cl.unreachable.Store(false)
	e.wakeControl()
}

// refreshLive rereads the registry and which leases exist. When the set
// (or a state) changed it tells this process's subscribers with a local
// brokers event: a lapsed lease is written by no one. Entries whose
// lease has been gone for a minute are removed.
func (e *Engine) refreshLive(ctx context.Context) error {
	r, err := e.rc.Do(ctx, "HGETALL", e.k.Brokers())
	if err != nil {
		return fmt.Errorf("read broker registry: %w", err)
	}
	var f []resp.Reply
	f = r.Elems(f)
	var recs []brokerRecord
	var pl resp.Pipeline
	for i := 0; i+1 < len(f); i += 2 {
		var rec brokerRecord
		if err := json.Unmarshal(f[i+1].Bytes(), &rec); err != nil {
			e.log.Warn("bad broker registry entry; ignored", "field", string(f[i].Bytes()), "err", err)
			continue
		}
		recs = append(recs, rec)
		pl.Cmd("EXISTS", e.k.BrokerLease(rec.Node))
	}
	live := map[int32]brokerRecord{}
	if len(recs) > 0 {
		rs, err := e.rc.Exec(ctx, &pl)
		if err != nil {
			return fmt.Errorf("read broker leases: %w", err)
		}
		var stale []any
		for i, rec := range recs {
			if n, _ := rs.At(i).Int(); n == 1 {
				live[rec.Node] = rec
			} else if time.Since(time.UnixMilli(rec.Renewed)) > time.Minute {
				stale = append(stale, strconv.Itoa(int(rec.Node)))
			}
		}
		rs.Release()
		if len(stale) > 0 {
			_, _ = e.rc.Do(ctx, append([]any{"HDEL", e.k.Brokers()}, stale...)...)
		}
	}
	c := &e.cl
	c.mu.Lock()
	changed := !maps.EqualFunc(c.live, live, func(a, b brokerRecord) bool { return a.State == b.State })
	gone := false
	for id := range c.live {
		if _, ok := live[id]; !ok {
			gone = true
		}
	}
	c.live = live
	c.mu.Unlock()
	if changed {
		change := "refresh"
		if gone {
			change = "expired"
		}
		e.events.Emit(events.Brokers, "change", change)
	}
	return nil
}

// liveNodes lists the live brokers that can lead and coordinate: not
// leaving, and not this one while it leaves or holds no lease.
func (e *Engine) liveNodes() []int32 {
	c := &e.cl
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]int32, 0, len(c.live)+1)
	for id, rec := range c.live {
		if rec.State == stateLeaving || id == e.opts.NodeID {
			continue
		}
		out = append(out, id)
	}
	if c.token != "" && !c.leaving {
		out = append(out, e.opts.NodeID)
	}
	slices.Sort(out)
	return out
}

// isLive tells whether node holds a lease as far as we last saw.
func (e *Engine) isLive(node int32) bool {
	c := &e.cl
	c.mu.Lock()
	defer c.mu.Unlock()
	if node == e.opts.NodeID {
		return c.token != ""
	}
	_, ok := c.live[node]
	return ok
}

// hrw picks the node with the highest rendezvous hash for key: each key
// spreads evenly, and when a node comes or goes only the keys it wins or
// won move. -1 when there is no node.
func hrw(key string, nodes []int32) int32 {
	best, bestScore := int32(-1), uint64(0)
	for _, n := range nodes {
		h := uint64(14695981039346656037)
		for i := 0; i < len(key); i++ {
			h ^= uint64(key[i])
			h *= 1099511628211
		}
		for _, b := range [4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)} {
			h ^= uint64(b)
			h *= 1099511628211
		}
		// splitmix64's finalizer: FNV alone leaves the last bytes' bits
		// poorly mixed.
		h ^= h >> 30
		h *= 0xbf58476d1ce4e5b9
		h ^= h >> 27
		h *= 0x94d049bb133111eb
		h ^= h >> 31
		if best < 0 || h > bestScore {
			best, bestScore = n, h
		}
	}
	return best
}

// script is a Lua script run with EVALSHA, loaded again when Redis
// answers NOSCRIPT (it restarted, or SCRIPT FLUSH).
type script struct {
	src string
	sha string
}

func sha1Hex(s string) string {
	h := sha1.Sum([]byte(s))
	return hex.EncodeToString(h[:])
}

func mustJSON(v any) []byte {
	js, err := json.Marshal(v)
	if err != nil {
		panic(err) // only plain structs are marshalled
	}
	return js
}

func newScript(src string) *script {
	return &script{src: src, sha: sha1Hex(src)}
}

// isNoScript tells whether err is Redis's NOSCRIPT reply.
func isNoScript(err error) bool {
	var re *resp.Error
	return errors.As(err, &re) && re.Prefix == "NOSCRIPT"
}

// load sends the script's source to Redis.
func (s *script) load(ctx context.Context, rc *resp.Client) error {
	// On a Redis Cluster, into every master's cache: the keys a script
	// runs on may live on any of them.
	if err := rc.ScriptLoad(ctx, s.src); err != nil {
		return fmt.Errorf("load script: %w", err)
	}
	return nil
}

// run runs the script once and returns its integer reply.
func (s *script) run(ctx context.Context, rc *resp.Client, keys []string, args ...any) (int64, error) {
	cmd := make([]any, 0, 3+len(keys)+len(args))
	cmd = append(cmd, "EVALSHA", s.sha, len(keys))
	for _, k := range keys {
		cmd = append(cmd, k)
	}
	cmd = append(cmd, args...)
	for attempt := 0; ; attempt++ {
		r, err := rc.Do(ctx, cmd...)
		if err == nil {
			err = r.Err()
		}
		if err != nil && isNoScript(err) && attempt == 0 {
			if err := s.load(ctx, rc); err != nil {
				return 0, err
			}
			continue
		}
		if err != nil {
			return 0, err
		}
		return r.Int()
	}
}

// releaseLease gives up the lease and registry entry without handing
// anything over (Open failed after registering).
func (e *Engine) releaseLease() {
	e.cl.mu.Lock()
	token := e.cl.token
	e.cl.token, e.cl.left = "", true
	e.cl.mu.Unlock()
	if token == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := releaseScript.run(ctx, e.rc, []string{e.k.BrokerLease(e.opts.NodeID), e.k.Brokers()}, token, e.opts.NodeID); err != nil {
		e.log.Warn("broker lease not released; it lapses by itself", "err", err)
	}
}
