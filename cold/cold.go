// Package cold is korvet's cold tier: sealed log segments become Parquet
// files in an Apache Iceberg table per topic, on S3 (or any S3-compatible
// store) or in a local directory.
//
// Layout, for warehouse W and namespace N (default "korvet"):
//
//	W/N/{topic}/metadata/v{n}.metadata.json   Iceberg table metadata (format v2)
//	W/N/{topic}/metadata/version-hint.text    the current n (Hadoop-style catalog)
//	W/N/{topic}/metadata/*.avro               manifests and manifest lists
//	W/N/{topic}/data/partition={p}/{segment:020}-{topic id}.parquet
//
// so Spark, Trino, DuckDB or PyIceberg open a table from its directory (or
// through the read-only REST catalog of RESTHandler) without korvet.
// Commits are a create-if-absent of the next metadata version (S3
// If-None-Match, link(2) locally), which makes them atomic on S3 too.
//
// Objects go through minio-go (or plain files), manifests and table
// metadata included (written by cold/iceberg and cold/icemeta), so there
// is one set of credentials and one connection pool. With RESTCatalogURL set,
// metadata is committed to that catalog instead, and data and manifests
// still go to the warehouse.
package cold

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"

	"github.com/korvet/korvet/cold/iceberg"
	"github.com/korvet/korvet/cold/icemeta"
	"github.com/korvet/korvet/internal/redact"
)

// Config configures the cold tier.
type Config struct {
	// Warehouse is s3://bucket/prefix or file:///absolute/dir (default
	// file:///var/lib/korvet/warehouse). The bucket is created if missing.
	Warehouse string
	// Namespace is the Iceberg namespace holding one table per topic
	// (default "korvet").
	Namespace string
	// Endpoint is the S3 endpoint, host:port or http(s)://host:port;
	// empty means AWS.
	Endpoint string
	// AccessKey and SecretKey; empty means KORVET_COLD_ACCESS_KEY and
	// KORVET_COLD_SECRET_KEY, then AWS_ACCESS_KEY_ID and
	// AWS_SECRET_ACCESS_KEY, then the instance role.
	AccessKey, SecretKey string
	Region               string // default us-east-1
	PathStyle            bool   // path-style bucket addressing (MinIO, versitygw, Ceph)
	TLS                  bool   // https, when Endpoint has no scheme
	InsecureSkipVerify   bool
	// RESTCatalogURL, when set, commits table metadata to that Iceberg REST
	// catalog instead of the warehouse's Hadoop-style catalog.
	RESTCatalogURL string
	// RESTCatalogToken is sent as a bearer token to RESTCatalogURL.
	RESTCatalogToken string
	// CacheDir keeps Parquet footers of archived files, so a cold read
	// fetches a footer from the store once per file. Empty: memory only.
	CacheDir string
	// RowGroupBytes is the record payload per Parquet row group (default
	// 256 KiB): a read from the middle of a file fetches and decodes about
	// this much, which is what a KV point read of an archived key costs.
	RowGroupBytes int
	// PageBytes is the size at which a column's values are cut into a
	// Parquet page (default 32 KiB, before encoding and compression): a
	// point read (a KV read of an archived key) decodes one page of each
	// column. Smaller pages decode faster but compress worse and cost the
	// writer more (zstd builds its tables per page): at 8 KiB, 20% more
	// writer time and 10% larger files for 100-byte JSON values; at 32 KiB,
	// about what 256 KiB pages cost.
	PageBytes int
	// ReadCacheBytes bounds the memory of decoded row groups kept for
	// consumers reading on (default 64 MiB).
	ReadCacheBytes int
	// FooterCacheBytes bounds the memory of parsed Parquet footers
	// (default 32 MiB); CacheDir keeps them on disk regardless.
	FooterCacheBytes int
}

// DefaultWarehouse is where tables go when Config.Warehouse is empty.
const DefaultWarehouse = "file:///var/lib/korvet/warehouse"

// SegmentRef names one sealed segment of a partition.
type SegmentRef struct {
	Topic      string
	TopicID    [16]byte
	Partition  int32
	Segment    int64
	BaseOffset int64 // first offset the segment may hold
	LastOffset int64 // last offset the segment may hold
}

// DataFile is one archived segment: a Parquet file in a topic's table.
type DataFile struct {
	Path         string // full URI of the Parquet object
	TopicID      [16]byte
	Partition    int32
	Segment      int64
	Records      int64
	Bytes        int64 // size of the Parquet object
	MinOffset    int64
	MaxOffset    int64
	MinTimestamp int64
	MaxTimestamp int64
}

var (
	// ErrTopicMismatch: the topic's table belongs to another incarnation of
	// the topic (another topic id). Drop it first.
	ErrTopicMismatch = errors.New("cold: table belongs to another topic id")
	// ErrNoRecords: Archive was given an empty segment.
	ErrNoRecords = errors.New("cold: segment has no records")
)

// Store is the cold tier of one korvet. It is safe for concurrent use;
// changes to one topic's table are serialized (uploads are not).
type Store struct {
	cfg       Config
	log       *slog.Logger
	obj       objects
	n         counters
	cat       catalog
	root      string // warehouse URI without trailing slash
	schema    *parquet.Schema
	cols      fileColumns // of schema
	codec     *zstd.Codec
	footers   *footerCache
	groups    *groupCache
	keepSnaps int
	// maxMans bounds a snapshot's data manifests. An append adds one
	// manifest holding its file; the append that would pass this many
	// writes one manifest of all the table's files instead (the entries
	// are cached, so merging reads nothing).
	maxMans int

	setupMu   sync.Mutex
	setupDone bool

	mu     sync.Mutex
	topics map[string]*topicState

	typedMu     sync.Mutex
	typedFn     TypedFunc            // SetTyped
	typedWarned map[string]time.Time // topic -> last warning (warnTyped)

	// afterUpload, when set (tests), runs between the upload of a data
	// file and its commit; an error stands for a crash there.
	afterUpload func() error
}

// topicState caches a topic's table between calls. mu serializes changes
// to the table (and guards the cache); uploads run without it.
type topicState struct {
	mu        sync.Mutex
	meta      *icemeta.Metadata                // nil: not loaded
	loc       string                           // meta's file
	manifests []iceberg.ManifestFile           // the current snapshot's
	files     map[string]iceberg.ManifestEntry // its data files, by path

	qmu     sync.Mutex
	waiting []*Upload     // uploaded files waiting for a commit, in order
	uploads int           // uploads of the topic running
	changed chan struct{} // closed (and replaced) when either changes
}

// Open connects to the warehouse (creating the bucket if needed) and the
// catalog.
func Open(ctx context.Context, cfg Config, log *slog.Logger) (*Store, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.Warehouse == "" {
		cfg.Warehouse = DefaultWarehouse
	}
	if cfg.Namespace == "" {
		cfg.Namespace = "korvet"
	}
	if strings.ContainsAny(cfg.Namespace, "/\x1f.") {
		return nil, fmt.Errorf("cold: namespace %q must not contain '/', '.' or 0x1f", cfg.Namespace)
	}
	if cfg.RowGroupBytes <= 0 {
		cfg.RowGroupBytes = 256 << 10
	}
	if cfg.PageBytes <= 0 {
		cfg.PageBytes = 32 << 10
	}
	if cfg.ReadCacheBytes <= 0 {
		cfg.ReadCacheBytes = 64 << 20
	}
	if cfg.FooterCacheBytes <= 0 {
		cfg.FooterCacheBytes = 32 << 20
	}
	s := &Store{
		cfg:       cfg,
		log:       log,
		schema:    segmentSchema(),
		codec:     &zstd.Codec{Level: zstd.SpeedFastest},
		topics:    make(map[string]*topicState),
		keepSnaps: 20,
		maxMans:   100,
		groups:    newGroupCache(cfg.ReadCacheBytes),
	}
	cols, err := columnsOf(s.schema)
	if err != nil {
		return nil, fmt.Errorf("cold: %w", err) // a bug in segmentSchema
	}
	s.cols = cols
	u, err := redact.ParseURL(cfg.Warehouse)
	if err != nil {
		return nil, fmt.Errorf("cold: warehouse %q: %w", redact.URL(cfg.Warehouse), err)
	}
	switch u.Scheme {
	case "s3", "s3a":
		if u.Host == "" {
			return nil, fmt.Errorf("cold: warehouse %q names no bucket", redact.URL(cfg.Warehouse))
		}
		o, err := newS3Objects(cfg, u.Host, &s.n)
		if err != nil {
			return nil, err
		}
		s.obj = o
		s.root = strings.TrimRight("s3://"+u.Host+"/"+strings.Trim(u.Path, "/"), "/")
	case "file", "":
		dir := u.Path
		if u.Scheme == "" {
			dir = cfg.Warehouse
		}
		if !filepath.IsAbs(dir) || u.Host != "" {
			return nil, fmt.Errorf("cold: warehouse %q: want file:///absolute/dir", redact.URL(cfg.Warehouse))
		}
		dir = filepath.Clean(dir)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("cold: warehouse: %w", err)
		}
		s.obj = &localObjects{n: &s.n}
		s.root = "file://" + filepath.ToSlash(dir)
	default:
		return nil, fmt.Errorf("cold: warehouse %q: scheme must be s3 or file", redact.URL(cfg.Warehouse))
	}
	if s.footers, err = newFooterCache(cfg.CacheDir, cfg.FooterCacheBytes); err != nil {
		return nil, err
	}
	if cfg.RESTCatalogURL != "" {
		rc, err := newRESTCatalog(cfg.RESTCatalogURL, cfg.RESTCatalogToken, s.root, s.obj)
		if err != nil {
			return nil, err
		}
		s.cat = rc
	} else {
		s.cat = &fsCatalog{root: s.root, o: s.obj, log: log}
	}
	// An unreachable store or catalog must not keep korvet from serving
	// from Redis: setup is retried by every call until it succeeds.
	if err := s.ready(ctx); err != nil {
		log.Warn("cold tier not reachable yet; archiving and cold reads will retry", "warehouse", s.root, "err", err)
	} else {
		log.Info("cold tier open", "warehouse", s.root, "namespace", cfg.Namespace, "catalog", s.cat.kind())
	}
	return s, nil
}

// ready runs the one-time setup (bucket, catalog settings, namespace)
// until it has succeeded once.
func (s *Store) ready(ctx context.Context) error {
	s.setupMu.Lock()
	defer s.setupMu.Unlock()
	if s.setupDone {
		return nil
	}
	if o, ok := s.obj.(*s3Objects); ok {
		if err := o.ensureBucket(ctx); err != nil {
			return fmt.Errorf("cold: %w", err)
		}
	}
	if rc, ok := s.cat.(*restCatalog); ok {
		if err := rc.configure(ctx); err != nil {
			return fmt.Errorf("cold: %w", err)
		}
	}
	if err := s.cat.createNamespace(ctx, s.cfg.Namespace); err != nil {
		return err
	}
	s.setupDone = true
	return nil
}

// Close releases the store's resources.
func (s *Store) Close() error { return nil }

// Stats returns the object store traffic counters.
func (s *Store) Stats() Stats { return s.n.snapshot() }

// Warehouse is the warehouse URI tables live under.
func (s *Store) Warehouse() string { return s.root }

// Namespace is the Iceberg namespace of the topic tables.
func (s *Store) Namespace() string { return s.cfg.Namespace }

func (s *Store) topic(ctx context.Context, name string) (*topicState, error) {
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	return s.topicState(name), nil
}

func (s *Store) topicState(name string) *topicState {
	s.mu.Lock()
	defer s.mu.Unlock()
	ts := s.topics[name]
	if ts == nil {
		ts = &topicState{}
		s.topics[name] = ts
	}
	return ts
}

func (s *Store) ident(topic string) tableIdent {
	return tableIdent{s.cfg.Namespace, topic}
}

// validTopic rejects names that cannot be a Kafka topic (and so could
// escape the table's directory).
func validTopic(t string) error {
	if t == "" || t == "." || t == ".." || len(t) > 249 {
		return fmt.Errorf("cold: invalid topic name %q", t)
	}
	for _, c := range t {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("cold: invalid topic name %q", t)
		}
	}
	return nil
}

// dataPath is the deterministic object of a segment, so that a retried
// upload overwrites its earlier attempt.
func dataPath(tableLoc string, ref SegmentRef) string {
	return joinURI(tableLoc, "data", fmt.Sprintf("partition=%d", ref.Partition),
		fmt.Sprintf("%020d-%s.parquet", ref.Segment, hex.EncodeToString(ref.TopicID[:])))
}

// parseDataPath reads topic id, partition and segment back from a path
// made by dataPath.
func parseDataPath(p string) (id [16]byte, partition int32, segment int64, ok bool) {
	i := strings.LastIndex(p, "/partition=")
	if i < 0 {
		return id, 0, 0, false
	}
	var idHex string
	rest := p[i+1:]
	dir, file, found := strings.Cut(rest, "/")
	if !found {
		return id, 0, 0, false
	}
	if _, err := fmt.Sscanf(dir, "partition=%d", &partition); err != nil {
		return id, 0, 0, false
	}
	name, isPq := strings.CutSuffix(file, ".parquet")
	seg, idHex, found := strings.Cut(name, "-")
	if !isPq || !found || len(idHex) != 32 {
		return id, 0, 0, false
	}
	if _, err := fmt.Sscanf(seg, "%d", &segment); err != nil {
		return id, 0, 0, false
	}
	if _, err := hex.Decode(id[:], []byte(idHex)); err != nil {
		return id, 0, 0, false
	}
	return id, partition, segment, true
}
