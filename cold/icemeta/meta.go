// Package icemeta is Iceberg v2 table metadata as korvet writes it: the
// metadata JSON, the updates a commit makes to it (the REST catalog
// spec's update and requirement objects) and the schema evolution korvet
// needs. Schemas, partition specs and manifests are cold/iceberg's; neither
// depends on iceberg-go, whose table package links a query planner and
// gRPC and whose root package links part of arrow-go (footprint).
package icemeta

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/korvet/korvet/cold/iceberg"
)

// Property keys korvet reads.
const (
	PropNameMapping       = "schema.name-mapping.default"
	PropPreviousVersions  = "write.metadata.previous-versions-max"
	PropDeleteAfterCommit = "write.metadata.delete-after-commit.enabled"
	MainBranch            = "main"
)

// Metadata is a table's metadata file. Keys it does not model are kept in
// extra and written back as they were, so metadata from other writers (or
// older korvet) round-trips.
type Metadata struct {
	FormatVersion      int                     `json:"format-version"`
	TableUUID          string                  `json:"table-uuid"`
	Location           string                  `json:"location"`
	LastSequenceNumber int64                   `json:"last-sequence-number"`
	LastUpdatedMs      int64                   `json:"last-updated-ms"`
	LastColumnID       int                     `json:"last-column-id"`
	Schemas            []*iceberg.Schema       `json:"schemas"`
	CurrentSchemaID    int                     `json:"current-schema-id"`
	PartitionSpecs     []iceberg.PartitionSpec `json:"partition-specs"`
	DefaultSpecID      int                     `json:"default-spec-id"`
	LastPartitionID    int                     `json:"last-partition-id"`
	Properties         map[string]string       `json:"properties"`
	CurrentSnapshotID  *int64                  `json:"current-snapshot-id,omitempty"`
	Snapshots          []Snapshot              `json:"snapshots"`
	SnapshotLog        []SnapshotLogEntry      `json:"snapshot-log"`
	MetadataLog        []MetadataLogEntry      `json:"metadata-log"`
	SortOrders         json.RawMessage         `json:"sort-orders"`
	DefaultSortOrderID int                     `json:"default-sort-order-id"`
	Refs               map[string]Ref          `json:"refs"`

	extra map[string]json.RawMessage
}

// Snapshot is one entry of the snapshots list.
type Snapshot struct {
	SnapshotID       int64             `json:"snapshot-id"`
	ParentSnapshotID *int64            `json:"parent-snapshot-id,omitempty"`
	SequenceNumber   int64             `json:"sequence-number"`
	TimestampMs      int64             `json:"timestamp-ms"`
	ManifestList     string            `json:"manifest-list"`
	Summary          map[string]string `json:"summary"` // "operation" and the counts
	SchemaID         *int              `json:"schema-id,omitempty"`
}

// Ref is a branch or tag.
type Ref struct {
	SnapshotID         int64  `json:"snapshot-id"`
	Type               string `json:"type"`
	MinSnapshotsToKeep *int   `json:"min-snapshots-to-keep,omitempty"`
	MaxSnapshotAgeMs   *int64 `json:"max-snapshot-age-ms,omitempty"`
	MaxRefAgeMs        *int64 `json:"max-ref-age-ms,omitempty"`
}

type SnapshotLogEntry struct {
	TimestampMs int64 `json:"timestamp-ms"`
	SnapshotID  int64 `json:"snapshot-id"`
}

type MetadataLogEntry struct {
	TimestampMs  int64  `json:"timestamp-ms"`
	MetadataFile string `json:"metadata-file"`
}

// fields is Metadata without its methods, for the default encoding.
type fields Metadata

// knownKeys are the keys Metadata models; the rest go to extra.
var knownKeys = []string{
	"format-version", "table-uuid", "location", "last-sequence-number", "last-updated-ms",
	"last-column-id", "schemas", "current-schema-id", "partition-specs", "default-spec-id",
	"last-partition-id", "properties", "current-snapshot-id", "snapshots", "snapshot-log",
	"metadata-log", "sort-orders", "default-sort-order-id", "refs",
}

// Parse reads a metadata file. Only format version 2 is accepted: it is
// what korvet creates, and v1/v3 differ in what a writer must do.
func Parse(b []byte) (*Metadata, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("table metadata: %w", err)
	}
	m := new(Metadata)
	if err := json.Unmarshal(b, (*fields)(m)); err != nil {
		return nil, fmt.Errorf("table metadata: %w", err)
	}
	if m.FormatVersion != 2 {
		return nil, fmt.Errorf("table metadata: format version %d, korvet writes version 2 tables only", m.FormatVersion)
	}
	if m.CurrentSnapshotID != nil && *m.CurrentSnapshotID == -1 {
		m.CurrentSnapshotID = nil // Java writes -1 for none
	}
	for _, k := range knownKeys {
		delete(raw, k)
	}
	if len(raw) > 0 {
		m.extra = raw
	}
	if m.Properties == nil {
		m.Properties = map[string]string{}
	}
	if m.Refs == nil {
		m.Refs = map[string]Ref{}
	}
	if m.CurrentSchema() == nil {
		return nil, fmt.Errorf("table metadata: no schema with the current id %d", m.CurrentSchemaID)
	}
	if m.Spec() == nil {
		return nil, fmt.Errorf("table metadata: no partition spec with the default id %d", m.DefaultSpecID)
	}
	return m, nil
}

// MarshalJSON writes the modelled keys and the kept unknown ones.
func (m *Metadata) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal((*fields)(m))
	if err != nil || len(m.extra) == 0 {
		return b, err
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(b, &all); err != nil {
		return nil, err
	}
	for k, v := range m.extra {
		if _, ok := all[k]; !ok {
			all[k] = v
		}
	}
	return json.Marshal(all)
}

// Clone returns a copy that changes without touching m (schemas and specs,
// which are never modified in place, are shared).
func (m *Metadata) Clone() *Metadata {
	c := *m
	c.Schemas = slices.Clone(m.Schemas)
	c.PartitionSpecs = slices.Clone(m.PartitionSpecs)
	c.Properties = maps.Clone(m.Properties)
	c.Snapshots = slices.Clone(m.Snapshots)
	c.SnapshotLog = slices.Clone(m.SnapshotLog)
	c.MetadataLog = slices.Clone(m.MetadataLog)
	c.Refs = maps.Clone(m.Refs)
	c.extra = maps.Clone(m.extra)
	if m.CurrentSnapshotID != nil {
		id := *m.CurrentSnapshotID
		c.CurrentSnapshotID = &id
	}
	return &c
}

// CurrentSchema is the schema with the current id, or nil.
func (m *Metadata) CurrentSchema() *iceberg.Schema {
	for _, s := range m.Schemas {
		if s.ID == m.CurrentSchemaID {
			return s
		}
	}
	return nil
}

// Spec is the default partition spec, or nil.
func (m *Metadata) Spec() *iceberg.PartitionSpec {
	for i := range m.PartitionSpecs {
		if m.PartitionSpecs[i].ID == m.DefaultSpecID {
			return &m.PartitionSpecs[i]
		}
	}
	return nil
}

// CurrentSnapshot is the main branch's snapshot, or nil.
func (m *Metadata) CurrentSnapshot() *Snapshot {
	if m.CurrentSnapshotID == nil {
		return nil
	}
	return m.Snapshot(*m.CurrentSnapshotID)
}

// Snapshot finds a snapshot by id, or nil.
func (m *Metadata) Snapshot(id int64) *Snapshot {
	for i := range m.Snapshots {
		if m.Snapshots[i].SnapshotID == id {
			return &m.Snapshots[i]
		}
	}
	return nil
}

// NameMapping is the table's default name mapping, or nil.
func (m *Metadata) NameMapping() (iceberg.NameMapping, error) {
	v, ok := m.Properties[PropNameMapping]
	if !ok {
		return nil, nil
	}
	var nm iceberg.NameMapping
	if err := json.Unmarshal([]byte(v), &nm); err != nil {
		return nil, fmt.Errorf("table name mapping: %w", err)
	}
	return nm, nil
}

// New is the metadata of a fresh, unsorted v2 table. The schema and spec
// keep their field ids (korvet's files carry them).
func New(location string, sc *iceberg.Schema, spec iceberg.PartitionSpec, props map[string]string, nowMs int64) (*Metadata, error) {
	if sc == nil {
		return nil, errors.New("new table metadata: no schema")
	}
	sc = iceberg.NewSchemaWithIdentifiers(0, sc.IdentifierFieldIDs, sc.Fields()...)
	lastPart := 999 // Iceberg's partition field ids start at 1000
	for _, f := range spec.Fields {
		lastPart = max(lastPart, f.FieldID)
	}
	props = maps.Clone(props)
	if props == nil {
		props = map[string]string{}
	}
	delete(props, "format-version") // a table property only at creation
	return &Metadata{
		FormatVersion:      2,
		TableUUID:          NewUUID(),
		Location:           location,
		LastUpdatedMs:      nowMs,
		LastColumnID:       sc.HighestFieldID(),
		Schemas:            []*iceberg.Schema{sc},
		PartitionSpecs:     []iceberg.PartitionSpec{spec},
		DefaultSpecID:      spec.ID,
		LastPartitionID:    lastPart,
		Properties:         props,
		Snapshots:          []Snapshot{},
		SnapshotLog:        []SnapshotLogEntry{},
		MetadataLog:        []MetadataLogEntry{},
		SortOrders:         json.RawMessage(`[{"order-id":0,"fields":[]}]`),
		DefaultSortOrderID: 0,
		Refs:               map[string]Ref{},
	}, nil
}

// NewUUID is a random (version 4) UUID, for table ids and file names.
func NewUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// intProp reads an integer property, def when unset or malformed.
func (m *Metadata) intProp(k string, def int) int {
	if n, err := strconv.Atoi(m.Properties[k]); err == nil {
		return n
	}
	return def
}

// boolProp reads a boolean property, def when unset or malformed.
func (m *Metadata) boolProp(k string, def bool) bool {
	if b, err := strconv.ParseBool(m.Properties[k]); err == nil {
		return b
	}
	return def
}
