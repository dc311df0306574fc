// Package auth keeps korvet's users and ACLs in Redis: SCRAM credentials
// (salted and hashed, never passwords) and access control lists, under the
// engine's keyspace. The Kafka server authenticates connections and
// authorizes requests through it; `korvet user` manages users with it.
package auth

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/korvet/korvet/engine/events"
	"github.com/korvet/korvet/engine/keys"
	"github.com/korvet/korvet/resp"
)

// Options configure a Store.
type Options struct {
	Keyspace string // prefix of every Redis key; default "korvet"
	Logger   *slog.Logger
	// Events is the broker's event bus (the engine's): the Store
	// announces its ACL and user changes on it and reloads the ACLs when
	// another broker announces theirs. nil (korvet user): changes are
	// announced, nothing is received.
	Events *events.Bus
}

// Store reads and writes users and ACLs. ACLs are loaded at Open and kept
// in memory, so that authorizing a request never waits on Redis; changes
// made through the Store go to Redis first, then to memory.
type Store struct {
	rc   *resp.Client
	k    keys.Space
	log  *slog.Logger
	seed []byte // keys the decoy salts of unknown users

	aclMu sync.Mutex // serializes ACL changes and reloads
	acls  atomic.Pointer[aclSet]

	bus *events.Bus
	// credGen counts credential changes seen: this Store's own, and
	// other brokers' through the bus. Caches of verified logins (the
	// HTTP side's) trust an entry only while it is unchanged, so a
	// deleted user or a changed password stops working at once here and
	// within an event's delay on the other brokers.
	credGen atomic.Uint64
}

// Open returns a Store on rc and loads the ACLs.
func Open(ctx context.Context, rc *resp.Client, opts Options) (*Store, error) {
	if opts.Keyspace == "" {
		opts.Keyspace = keys.Default
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	s := &Store{rc: rc, k: keys.New(opts.Keyspace, rc.IsCluster()), log: opts.Logger, bus: opts.Events}
	if err := s.loadDecoySeed(ctx); err != nil {
		return nil, err
	}
	if err := s.loadACLs(ctx); err != nil {
		return nil, err
	}
	if s.bus == nil {
		s.bus = events.New(rc, s.k.Events(), -1, opts.Logger)
	} else {
		s.bus.Subscribe(events.ACL, s.onACLEvent)
		s.bus.Subscribe(events.Resync, s.onACLEvent)
		s.bus.Subscribe(events.User, func(events.Event) { s.credGen.Add(1) })
		s.bus.Subscribe(events.Resync, func(events.Event) { s.credGen.Add(1) })
	}
	return s, nil
}

// reloadTimeout bounds a reload of the ACLs run by an event.
const reloadTimeout = 5 * time.Second

// onACLEvent reloads the ACLs: another broker (or this one, which costs
// a reload) changed them. On failure the ACLs in memory stay; the next
// event or resync tries again.
func (s *Store) onACLEvent(ev events.Event) {
	ctx, cancel := context.WithTimeout(context.Background(), reloadTimeout)
	defer cancel()
	if err := s.ReloadACLs(ctx); err != nil {
		s.log.Warn("could not reload ACLs after a change on another broker; keeping the ones in memory", "err", err)
	}
}

// ReloadACLs rereads the ACLs from Redis.
func (s *Store) ReloadACLs(ctx context.Context) error {
	s.aclMu.Lock()
	defer s.aclMu.Unlock()
	return s.loadACLs(ctx)
}

// announce tells the other brokers what changed, after the change is in
// Redis: a failure only delays them to their next resync.
func (s *Store) announce(ctx context.Context, kind string, fields ...string) {
	if err := s.bus.Publish(ctx, kind, fields...); err != nil {
		s.log.Warn("change stored but other brokers were not told; they see it on their next resync", "kind", kind, "err", err)
	}
}

// decoySeedField is the field of the engine's cluster hash holding the
// decoy seed, hex.
const decoySeedField = "scram_decoy_seed"

// loadDecoySeed reads the seed of the decoy salts from Redis, creating it
// on first use. Kept in Redis, the decoy salt of an unknown user is the
// same from every korvet on that Redis and across restarts, as a real
// user's salt is; a per-process seed would let a client tell unknown
// users by the salt changing after a restart.
func (s *Store) loadDecoySeed(ctx context.Context) error {
	fresh := make([]byte, 32)
	_, _ = rand.Read(fresh)
	if _, err := s.rc.Do(ctx, "HSETNX", s.k.Cluster(), decoySeedField, hex.EncodeToString(fresh)); err != nil {
		return fmt.Errorf("create the SCRAM decoy seed in %s: %w", s.k.Cluster(), err)
	}
	r, err := s.rc.Do(ctx, "HGET", s.k.Cluster(), decoySeedField)
	if err != nil {
		return fmt.Errorf("read the SCRAM decoy seed from %s: %w", s.k.Cluster(), err)
	}
	seed, err := hex.DecodeString(string(r.Bytes()))
	if err != nil || len(seed) < 16 {
		return fmt.Errorf("field %s of %s is not a hex seed of at least 16 bytes: delete the field and korvet makes a new one", decoySeedField, s.k.Cluster())
	}
	s.seed = seed
	return nil
}

// ValidUserName checks a user name: 1 to 256 bytes of UTF-8 without
// control characters.
func ValidUserName(name string) error {
	if name == "" || len(name) > 256 || !utf8.ValidString(name) {
		return fmt.Errorf("%w: user name must be 1 to 256 bytes of UTF-8", ErrInvalidCredential)
	}
	for _, r := range name {
		if unicode.IsControl(r) {
			return fmt.Errorf("%w: user name %q has a control character", ErrInvalidCredential, name)
		}
	}
	return nil
}

// CredentialGeneration changes whenever a credential may have changed
// (see credGen).
func (s *Store) CredentialGeneration() uint64 { return s.credGen.Load() }

// Credential returns user's credential for m; ok is false when there is
// none.
func (s *Store) Credential(ctx context.Context, m Mechanism, user string) (c Credential, ok bool, err error) {
	r, err := s.rc.Do(ctx, "HGET", s.k.SCRAM(m.String()), user)
	if err != nil {
		return c, false, fmt.Errorf("read %s credential of %q: %w", m, user, err)
	}
	if r.IsNil() {
		return c, false, nil
	}
	if err := json.Unmarshal(r.Bytes(), &c); err != nil {
		return c, false, fmt.Errorf("read %s credential of %q: bad JSON in %s: %w", m, user, s.k.SCRAM(m.String()), err)
	}
	return c, true, nil
}

// SetCredential stores user's credential for m, replacing any.
func (s *Store) SetCredential(ctx context.Context, m Mechanism, user string, c Credential) error {
	if err := ValidUserName(user); err != nil {
		return err
	}
	if !m.Valid() {
		return fmt.Errorf("%w: unknown mechanism %d", ErrInvalidCredential, m)
	}
	js, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("store %s credential of %q: %w", m, user, err)
	}
	if _, err := s.rc.Do(ctx, "HSET", s.k.SCRAM(m.String()), user, js); err != nil {
		return fmt.Errorf("store %s credential of %q: %w", m, user, err)
	}
	s.credGen.Add(1)
	s.announce(ctx, events.User, "user", user)
	return nil
}

// DeleteCredential removes user's credential for m and reports whether
// there was one.
func (s *Store) DeleteCredential(ctx context.Context, m Mechanism, user string) (bool, error) {
	r, err := s.rc.Do(ctx, "HDEL", s.k.SCRAM(m.String()), user)
	if err != nil {
		return false, fmt.Errorf("delete %s credential of %q: %w", m, user, err)
	}
	n, err := r.Int()
	if n > 0 {
		s.credGen.Add(1)
		s.announce(ctx, events.User, "user", user)
	}
	return n > 0, err
}

// MechanismInfo describes one credential without its secrets.
type MechanismInfo struct {
	Mechanism  Mechanism
	Iterations int
}

// User is a user and the mechanisms it has credentials for.
type User struct {
	Name       string
	Mechanisms []MechanismInfo
}

// Users lists every user with a credential, sorted by name.
func (s *Store) Users(ctx context.Context) ([]User, error) {
	var pl resp.Pipeline
	for _, m := range Mechanisms {
		pl.Cmd("HGETALL", s.k.SCRAM(m.String()))
	}
	rs, err := s.rc.Exec(ctx, &pl)
	if err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	defer rs.Release()
	byName := map[string]*User{}
	var elems []resp.Reply
	for i, m := range Mechanisms {
		r := rs.At(i)
		if err := r.Err(); err != nil {
			return nil, fmt.Errorf("list users: %w", err)
		}
		elems = r.Elems(elems[:0])
		for j := 0; j+1 < len(elems); j += 2 {
			name := string(elems[j].Bytes())
			var c Credential
			if err := json.Unmarshal(elems[j+1].Bytes(), &c); err != nil {
				return nil, fmt.Errorf("list users: bad JSON for %q in %s: %w", name, s.k.SCRAM(m.String()), err)
			}
			u := byName[name]
			if u == nil {
				u = &User{Name: name}
				byName[name] = u
			}
			u.Mechanisms = append(u.Mechanisms, MechanismInfo{Mechanism: m, Iterations: c.Iterations})
		}
	}
	out := make([]User, 0, len(byName))
	for _, u := range byName {
		out = append(out, *u)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// CheckPassword verifies a SASL PLAIN password against the user's SCRAM
// credentials (SHA-512 first). Unknown users cost the same hashing, so
// that timing does not tell which users exist.
func (s *Store) CheckPassword(ctx context.Context, user, password string) error {
	for _, m := range []Mechanism{ScramSHA512, ScramSHA256} {
		c, ok, err := s.Credential(ctx, m, user)
		if err != nil {
			return err
		}
		if ok {
			if c.checkPassword(m, password) {
				return nil
			}
			return fmt.Errorf("%w: invalid credentials for user %q", ErrAuthFailed, user)
		}
	}
	s.decoy(ScramSHA512, user).checkPassword(ScramSHA512, password)
	return fmt.Errorf("%w: invalid credentials for user %q", ErrAuthFailed, user)
}

// decoy is a made-up credential for an unknown user: its salt is stable,
// as a real user's is (see loadDecoySeed).
func (s *Store) decoy(m Mechanism, user string) Credential {
	salt := mac(ScramSHA256, s.seed, []byte(m.String()+"\x00"+user))
	return Credential{Salt: salt, Iterations: DefaultIterations, StoredKey: make([]byte, m.size()), ServerKey: make([]byte, m.size())}
}

// AddUserIfAbsent gives user a credential for every mechanism from
// password, unless the user already has one (HSETNX: several brokers
// starting at once create it once). created reports whether it did.
func (s *Store) AddUserIfAbsent(ctx context.Context, user, password string, iterations int) (created bool, err error) {
	if err := ValidUserName(user); err != nil {
		return false, err
	}
	for _, m := range Mechanisms {
		if _, ok, err := s.Credential(ctx, m, user); err != nil || ok {
			return false, err
		}
	}
	for _, m := range Mechanisms {
		c, err := NewCredential(m, password, iterations)
		if err != nil {
			return false, err
		}
		js, err := json.Marshal(c)
		if err != nil {
			return false, fmt.Errorf("store %s credential of %q: %w", m, user, err)
		}
		r, err := s.rc.Do(ctx, "HSETNX", s.k.SCRAM(m.String()), user, js)
		if err != nil {
			return false, fmt.Errorf("store %s credential of %q: %w", m, user, err)
		}
		if n, _ := r.Int(); n == 1 {
			created = true
		}
	}
	return created, nil
}
