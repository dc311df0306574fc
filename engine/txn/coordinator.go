package txn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/korvet/korvet/engine/keys"
	"github.com/korvet/korvet/resp"
)

// Defaults of Options, as Kafka's.
const (
	DefaultMaxTimeout    = 15 * time.Minute
	DefaultIDExpiration  = 7 * 24 * time.Hour
	DefaultCheckInterval = 10 * time.Second
)

// completeTimeout bounds one attempt at completing a transaction.
const completeTimeout = 30 * time.Second

// Options configure a Coordinator.
type Options struct {
	// Keyspace prefixes every Redis key, as the engine's do.
	Keyspace string
	// Owns reports whether this broker coordinates the transactional id
	// now; nil means every id (a single broker).
	Owns func(id string) bool
	// NewProducerID allocates a producer id (the engine's counter).
	NewProducerID func(ctx context.Context) (int64, error)
	// Markers and Offsets complete a transaction in its partitions and
	// groups. nil: nothing to do there (tests of the state machine).
	Markers Markers
	Offsets Offsets
	// MaxTimeout bounds the timeout a producer may ask for
	// (transaction.max.timeout.ms). Default 15 min.
	MaxTimeout time.Duration
	// IDExpiration is how long an id may stay idle (Empty or Complete*)
	// before it is deleted (transactional.id.expiration.ms). Default 7 days.
	IDExpiration time.Duration
	// CheckInterval is how often timed out transactions are aborted,
	// failed completions retried and idle ids expired. Default 10s.
	CheckInterval time.Duration
	// RetryBackoff is the first wait before a failed completion is tried
	// again; it doubles up to CheckInterval. Default 100ms.
	RetryBackoff time.Duration
	Logger       *slog.Logger
}

// Coordinator runs the transactional ids this broker owns. It is safe for
// concurrent use.
type Coordinator struct {
	rc   *resp.Client
	opts Options
	k    keys.Space
	log  *slog.Logger

	mu     sync.Mutex
	txns   map[string]*entry
	closed bool

	bg   context.Context
	stop context.CancelFunc
	wg   sync.WaitGroup
}

// entry is one transactional id held by its coordinator: the state as
// last stored, and the stored JSON the next write compares against.
type entry struct {
	mu   sync.Mutex
	id   string
	rec  record
	raw  string // "" while the id is not stored yet
	gone bool   // dropped: another coordinator owns it, or it expired
	// ending is closed when the running completion finishes; nil when
	// none runs.
	ending chan struct{}
}

// Open loads the transactional ids this broker owns, resumes the
// completion of those left in a Prepare state and starts the sweep.
func Open(ctx context.Context, rc *resp.Client, opts Options) (*Coordinator, error) {
	if opts.Keyspace == "" {
		opts.Keyspace = keys.Default
	}
	if opts.MaxTimeout <= 0 {
		opts.MaxTimeout = DefaultMaxTimeout
	}
	if opts.IDExpiration <= 0 {
		opts.IDExpiration = DefaultIDExpiration
	}
	if opts.CheckInterval <= 0 {
		opts.CheckInterval = DefaultCheckInterval
	}
	if opts.RetryBackoff <= 0 {
		opts.RetryBackoff = 100 * time.Millisecond
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.NewProducerID == nil {
		return nil, errors.New("txn: Options.NewProducerID is required")
	}
	c := &Coordinator{rc: rc, opts: opts, k: keys.New(opts.Keyspace, rc.IsCluster()), log: opts.Logger, txns: map[string]*entry{}}
	c.bg, c.stop = context.WithCancel(context.Background())
	if _, err := c.loadOwned(ctx); err != nil {
		c.stop()
		return nil, err
	}
	c.log.Info("transactional ids loaded", "count", len(c.txns))
	c.wg.Add(1)
	go c.sweepLoop()
	return c, nil
}

// Close stops the sweep and the completions under way (a new coordinator
// resumes them from Redis) and waits for them.
func (c *Coordinator) Close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.stop()
	c.wg.Wait()
}

func (c *Coordinator) owns(id string) bool { return c.opts.Owns == nil || c.opts.Owns(id) }

func notOwned(id string) error {
	return fmt.Errorf("%w: transactional id %q is coordinated by another broker", ErrNotCoordinator, id)
}

// get returns the held entry of id, restoring it from Redis if this
// broker holds it not yet. With create, an id that is not stored gets an
// entry with no state (raw ""); without, nil.
func (c *Coordinator) get(ctx context.Context, id string, create bool) (*entry, error) {
	if !c.owns(id) {
		c.drop(id)
		return nil, notOwned(id)
	}
	c.mu.Lock()
	e, closed := c.txns[id], c.closed
	c.mu.Unlock()
	if closed {
		return nil, ErrNotCoordinator
	}
	if e != nil {
		return e, nil
	}
	rec, raw, found, err := c.read(ctx, id)
	if err != nil {
		return nil, err
	}
	if !found && !create {
		return nil, nil
	}
	fresh := &entry{id: id, rec: rec, raw: raw}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrNotCoordinator
	}
	if e := c.txns[id]; e != nil {
		c.mu.Unlock()
		return e, nil
	}
	c.txns[id] = fresh
	c.mu.Unlock()
	if found {
		fresh.mu.Lock()
		c.resume(fresh)
		fresh.mu.Unlock()
	}
	return fresh, nil
}

// locked is get with the entry's lock taken (nil, unlocked, when there
// is no such id and not create). An entry dropped while waiting for its
// lock (a lost compare-and-set) is restored again from Redis.
func (c *Coordinator) locked(ctx context.Context, id string, create bool) (*entry, error) {
	for range 3 {
		e, err := c.get(ctx, id, create)
		if err != nil || e == nil {
			return nil, err
		}
		if e.lock() != nil {
			continue
		}
		if !c.awaitCompletion(ctx, e) {
			// Another broker may have added to the transaction (KIP-890's
			// implicit adds): decide on what Redis holds now.
			if err := c.refresh(ctx, e); err != nil {
				e.mu.Unlock()
				return nil, err
			}
			return e, nil
		}
	}
	return nil, fmt.Errorf("%w: transactional id %q keeps changing under another coordinator", ErrNotCoordinator, id)
}

// completionWait is how long a call finding its transaction completing
// waits for it before answering CONCURRENT_TRANSACTIONS: the next
// transaction of a producer usually begins right after EndTxn, while the
// markers of the last are being written, and a client told to retry
// backs off far longer than a completion takes.
const completionWait = 2 * time.Second

// awaitCompletion waits, when a completion of e runs, for it to finish
// (bounded by completionWait and ctx) and reports whether it waited: e
// is then unlocked, to be looked up again. Called with e.mu held.
func (c *Coordinator) awaitCompletion(ctx context.Context, e *entry) bool {
	ch := e.ending
	if ch == nil {
		return false
	}
	e.mu.Unlock()
	t := time.NewTimer(completionWait)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	// Answer with the state as it is now (CONCURRENT_TRANSACTIONS).
	e.mu.Lock()
	if e.gone {
		e.mu.Unlock()
		return true
	}
	return false
}

// lock takes e's lock, failing when e was dropped meanwhile.
func (e *entry) lock() error {
	e.mu.Lock()
	if e.gone {
		e.mu.Unlock()
		return fmt.Errorf("%w: transactional id %q moved to another coordinator", ErrNotCoordinator, e.id)
	}
	return nil
}

// drop forgets id without writing anything.
func (c *Coordinator) drop(id string) bool {
	c.mu.Lock()
	e := c.txns[id]
	delete(c.txns, id)
	c.mu.Unlock()
	if e == nil {
		return false
	}
	e.mu.Lock()
	e.gone = true
	e.mu.Unlock()
	return true
}

// write stores next as e's state (e.mu held). When Redis no longer holds
// what e last read, another coordinator has written: e is dropped and the
// caller answers NOT_COORDINATOR (the client finds the coordinator again).
func (c *Coordinator) write(ctx context.Context, e *entry, next record) error {
	if !c.owns(e.id) {
		return notOwned(e.id)
	}
	next.Ver = e.rec.Ver + 1
	next.UpdateMs = time.Now().UnixMilli()
	raw, ok, err := c.cas(ctx, e.id, e.raw, &next)
	if err != nil {
		return err
	}
	if !ok {
		e.gone = true
		c.mu.Lock()
		if c.txns[e.id] == e {
			delete(c.txns, e.id)
		}
		c.mu.Unlock()
		c.log.Warn("transaction state changed by another writer (another coordinator, or an implicit add racing this write); answering NOT_COORDINATOR so the client asks again", "transactional_id", e.id)
		return fmt.Errorf("%w: transactional id %q was written by another coordinator", ErrNotCoordinator, e.id)
	}
	e.rec, e.raw = next, raw
	return nil
}

// OwnershipChanged is for when the set of live brokers changes: it drops
// the ids another broker owns now and loads the ones this broker gained,
// resuming their completions (their timeouts run from the sweep). It
// returns how many ids it dropped.
func (c *Coordinator) OwnershipChanged(ctx context.Context) (int, error) {
	n := 0
	c.mu.Lock()
	ids := make([]string, 0, len(c.txns))
	for id := range c.txns {
		ids = append(ids, id)
	}
	c.mu.Unlock()
	for _, id := range ids {
		if !c.owns(id) && c.drop(id) {
			n++
		}
	}
	if n > 0 {
		c.log.Info("transactional ids handed over to their new coordinators", "count", n)
	}
	_, err := c.loadOwned(ctx)
	return n, err
}

// loadOwned reads every stored id and holds the owned ones not held yet.
func (c *Coordinator) loadOwned(ctx context.Context) (int, error) {
	r, err := c.rc.Do(ctx, "HGETALL", c.k.Transactions())
	if err == nil {
		err = r.Err()
	}
	if err != nil {
		return 0, fmt.Errorf("load transactions from %s: %w", c.k.Transactions(), err)
	}
	var fresh []*entry
	defer func() {
		for _, e := range fresh {
			e.mu.Lock()
			c.resume(e)
			e.mu.Unlock()
		}
	}()
	for id, raw := range parseAll(r) {
		if !c.owns(id) {
			continue
		}
		rec, err := decodeRecord([]byte(raw))
		if err != nil {
			c.log.Warn("ignoring a transaction state that does not decode", "transactional_id", id, "key", c.k.Transactions(), "err", err)
			continue
		}
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return len(fresh), ErrNotCoordinator
		}
		if c.txns[id] == nil {
			e := &entry{id: id, rec: rec, raw: raw}
			c.txns[id] = e
			fresh = append(fresh, e)
		}
		c.mu.Unlock()
	}
	return len(fresh), nil
}

// resume restarts the completion of a transaction found in a Prepare
// state (e.mu held, c.mu not).
func (c *Coordinator) resume(e *entry) {
	if e.rec.State == PrepareCommit || e.rec.State == PrepareAbort {
		c.log.Info("resuming the completion of a transaction", "transactional_id", e.id, "state", e.rec.State, "producer_id", e.rec.PID)
		c.startCompletion(e)
	}
}

func (c *Coordinator) held() []*entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*entry, 0, len(c.txns))
	for _, e := range c.txns {
		out = append(out, e)
	}
	return out
}
