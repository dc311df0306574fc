// Package registry is korvet's schema registry: subjects, their versions
// and the schemas behind them (global ids), compatibility levels and
// modes, kept in Redis with korvet's other state, so that every broker on
// the keyspace serves the same registry and a restart loses nothing. The
// schema formats themselves are engine/schema's; the Confluent REST API
// over this is web's (web/registry*.go).
//
// Every write is one Lua script that compares the subject's JSON it read
// with what is stored (compare-and-set): two brokers registering at once
// cannot lose a version, and the script hands out ids from one counter
// keyed by the schema's fingerprint, so one schema gets one id. A lost
// race reads again and retries, a bounded number of times. Compatibility
// is decided in Go (schema.Check) on what was read; the compare-and-set
// makes sure that is still what is stored.
package registry

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"

	"github.com/korvet/korvet/engine/keys"
	"github.com/korvet/korvet/engine/schema"
	"github.com/korvet/korvet/internal/lru"
	"github.com/korvet/korvet/resp"
)

// Bounds on what a client may store.
const (
	// MaxSchemaBytes bounds a schema's text.
	MaxSchemaBytes = 1 << 20
	// MaxReferences bounds a schema's references, and the references a
	// parse resolves in all (references of references included).
	MaxReferences = 1000
	// MaxSubjectBytes bounds a subject name.
	MaxSubjectBytes = 255
	// MaxVersions bounds the versions of one subject (soft-deleted ones
	// included: they keep their numbers).
	MaxVersions = 10000
	// cacheEntries bounds the parsed schemas kept by id.
	cacheEntries = 1024
	// casAttempts bounds the read-check-write retries of one write.
	casAttempts = 100
)

// Options configure a Registry.
type Options struct {
	Keyspace string // prefix of every Redis key; default "korvet"
	Logger   *slog.Logger
}

// Registry is the schema registry on one keyspace.
type Registry struct {
	rc  *resp.Client
	k   keys.Space
	log *slog.Logger
	// parsed caches schemas by id: an id always names the same source.
	parsed *lru.Cache[int32, schema.Schema]
}

// Open opens the registry on rc.
func Open(ctx context.Context, rc *resp.Client, opts Options) (*Registry, error) {
	if opts.Keyspace == "" {
		opts.Keyspace = keys.Default
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Registry{rc: rc, k: keys.New(opts.Keyspace, rc.IsCluster()), log: opts.Logger,
		parsed: lru.New[int32, schema.Schema](cacheEntries)}, nil
}

// Mode is a registry mode.
type Mode string

// The modes.
const (
	ReadWrite Mode = "READWRITE"
	ReadOnly  Mode = "READONLY"
	// ReadOnlyOverride is READONLY that also holds for subjects with a
	// mode of their own (set globally).
	ReadOnlyOverride Mode = "READONLY_OVERRIDE"
	// Import lets registrations bring their ids and versions (migrating
	// a registry) and skips compatibility checks.
	Import Mode = "IMPORT"
)

// ParseMode accepts a mode name in any case.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(strings.ToUpper(s)); m {
	case ReadWrite, ReadOnly, ReadOnlyOverride, Import:
		return m, nil
	}
	return "", unprocessable(CodeInvalidMode, "Invalid mode %q: want READWRITE, READONLY, READONLY_OVERRIDE or IMPORT", s)
}

// SubjectInfo is one subject as the status page shows it.
type SubjectInfo struct {
	Subject       string        `json:"subject"`
	Versions      []int         `json:"versions"` // live (not soft-deleted) versions
	LatestVersion int           `json:"latest_version"`
	LatestID      int32         `json:"latest_id"`
	Format        schema.Format `json:"schema_type"`
	Level         schema.Level  `json:"compatibility"` // in effect (the subject's or the global one)
	LevelOwn      bool          `json:"compatibility_own"`
	Mode          string        `json:"mode"` // READWRITE, READONLY, IMPORT
}

// Subjects lists the live subjects, sorted by name (status page, /api/v1).
func (r *Registry) Subjects(ctx context.Context) ([]SubjectInfo, error) {
	all, err := r.allSubjects(ctx)
	if err != nil {
		return nil, err
	}
	cfg, err := r.configAll(ctx)
	if err != nil {
		return nil, err
	}
	var out []SubjectInfo
	for _, name := range slices.Sorted(maps.Keys(all)) {
		st := all[name]
		live := st.live()
		if len(live) == 0 {
			continue
		}
		info := SubjectInfo{Subject: name}
		for _, v := range live {
			info.Versions = append(info.Versions, v.Version)
		}
		last := live[len(live)-1]
		info.LatestVersion, info.LatestID = last.Version, last.ID
		if src, err := r.Source(ctx, last.ID); err == nil {
			info.Format = src.Format
		}
		info.Level, info.LevelOwn = cfg.level(name)
		info.Mode = string(cfg.mode(name))
		out = append(out, info)
	}
	return out, nil
}

// SchemaByID returns the parsed schema with global id id (cached: an id
// always names the same schema). It implements schema.Lookup.
func (r *Registry) SchemaByID(ctx context.Context, id int32) (schema.Schema, error) {
	if s, ok := r.parsed.Get(id); ok {
		return s, nil
	}
	src, err := r.Source(ctx, id)
	if err != nil {
		return nil, err
	}
	s, err := r.parse(ctx, src)
	if err != nil {
		return nil, fmt.Errorf("schema %d: %w", id, err)
	}
	r.parsed.Add(id, s, 1)
	return s, nil
}

// ValueTyped returns the typed columns of topic's value subject
// ("{topic}-value", every version including soft-deleted ones, since
// records framed with them stay in the log), or nil when the subject does
// not exist or no version has a shape.
func (r *Registry) ValueTyped(ctx context.Context, topic string) (*schema.Typed, error) {
	subject := topic + "-value"
	st, _, err := r.subject(ctx, subject)
	if err != nil {
		return nil, err
	}
	if st == nil || len(st.Versions) == 0 {
		return nil, nil
	}
	var ids []int32
	var versions []schema.Schema
	for _, v := range st.Versions {
		s, err := r.SchemaByID(ctx, v.ID)
		if err != nil {
			return nil, fmt.Errorf("subject %s version %d: %w", subject, v.Version, err)
		}
		ids = append(ids, v.ID)
		versions = append(versions, s)
	}
	t, err := schema.NewTyped(subject, ids, versions)
	if err != nil {
		return nil, fmt.Errorf("typed columns of %s: %w", subject, err)
	}
	return t, nil
}
