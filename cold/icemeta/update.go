package icemeta

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/korvet/korvet/cold/iceberg"
)

// Update is one change of a commit, in the REST catalog spec's form (the
// fields an action does not use stay empty).
type Update struct {
	Action       string            `json:"action"`
	Schema       *iceberg.Schema   `json:"schema,omitempty"`         // add-schema
	LastColumnID *int              `json:"last-column-id,omitempty"` // add-schema
	SchemaID     *int              `json:"schema-id,omitempty"`      // set-current-schema (-1: the last added)
	Snapshot     *Snapshot         `json:"snapshot,omitempty"`       // add-snapshot
	RefName      string            `json:"ref-name,omitempty"`       // set-snapshot-ref
	Type         string            `json:"type,omitempty"`           // set-snapshot-ref
	SnapshotID   *int64            `json:"snapshot-id,omitempty"`    // set-snapshot-ref
	Updates      map[string]string `json:"updates,omitempty"`        // set-properties
	SnapshotIDs  []int64           `json:"snapshot-ids,omitempty"`   // remove-snapshots
}

// AddSchema adds sc (its id already the next free one) and makes it current.
func AddSchema(sc *iceberg.Schema, lastColumnID int) []Update {
	last := -1
	return []Update{
		{Action: "add-schema", Schema: sc, LastColumnID: &lastColumnID},
		{Action: "set-current-schema", SchemaID: &last},
	}
}

// AddSnapshot adds snap and points the main branch at it.
func AddSnapshot(snap Snapshot) []Update {
	id := snap.SnapshotID
	return []Update{
		{Action: "add-snapshot", Snapshot: &snap},
		{Action: "set-snapshot-ref", RefName: MainBranch, Type: "branch", SnapshotID: &id},
	}
}

// SetProperties sets table properties.
func SetProperties(props map[string]string) Update {
	return Update{Action: "set-properties", Updates: props}
}

// RemoveSnapshots drops snapshots from the table.
func RemoveSnapshots(ids []int64) Update {
	return Update{Action: "remove-snapshots", SnapshotIDs: ids}
}

// ErrRequirement: the table is not in the state a commit was based on.
var ErrRequirement = errors.New("table changed since it was read")

// Requirement is a REST catalog commit requirement.
type Requirement struct {
	Type            string // assert-table-uuid, assert-ref-snapshot-id, assert-current-schema-id
	UUID            string
	Ref             string
	SnapshotID      *int64 // nil: the ref must not exist
	CurrentSchemaID int
}

// MarshalJSON writes the fields of the requirement's type; a null
// snapshot-id is meaningful.
func (r Requirement) MarshalJSON() ([]byte, error) {
	switch r.Type {
	case "assert-table-uuid":
		return json.Marshal(map[string]any{"type": r.Type, "uuid": r.UUID})
	case "assert-ref-snapshot-id":
		return json.Marshal(map[string]any{"type": r.Type, "ref": r.Ref, "snapshot-id": r.SnapshotID})
	case "assert-current-schema-id":
		return json.Marshal(map[string]any{"type": r.Type, "current-schema-id": r.CurrentSchemaID})
	}
	return nil, fmt.Errorf("unknown requirement %q", r.Type)
}

// Requirements are what a commit based on m needs: the same table, its
// main branch where it was, and, when the commit changes the schema, the
// same current schema.
func Requirements(m *Metadata, schemaChange bool) []Requirement {
	var snap *int64
	if r, ok := m.Refs[MainBranch]; ok {
		id := r.SnapshotID
		snap = &id
	}
	out := []Requirement{
		{Type: "assert-table-uuid", UUID: m.TableUUID},
		{Type: "assert-ref-snapshot-id", Ref: MainBranch, SnapshotID: snap},
	}
	if schemaChange {
		out = append(out, Requirement{Type: "assert-current-schema-id", CurrentSchemaID: m.CurrentSchemaID})
	}
	return out
}

// Check tells whether m meets the requirements; ErrRequirement if not.
func Check(m *Metadata, reqs []Requirement) error {
	for _, r := range reqs {
		switch r.Type {
		case "assert-table-uuid":
			if r.UUID != m.TableUUID {
				return fmt.Errorf("%w: table uuid %s, want %s", ErrRequirement, m.TableUUID, r.UUID)
			}
		case "assert-ref-snapshot-id":
			ref, ok := m.Refs[r.Ref]
			switch {
			case r.SnapshotID == nil && ok:
				return fmt.Errorf("%w: branch %s was created", ErrRequirement, r.Ref)
			case r.SnapshotID != nil && (!ok || ref.SnapshotID != *r.SnapshotID):
				return fmt.Errorf("%w: branch %s moved", ErrRequirement, r.Ref)
			}
		case "assert-current-schema-id":
			if m.CurrentSchemaID != r.CurrentSchemaID {
				return fmt.Errorf("%w: current schema %d, want %d", ErrRequirement, m.CurrentSchemaID, r.CurrentSchemaID)
			}
		default:
			return fmt.Errorf("unknown requirement %q", r.Type)
		}
	}
	return nil
}

// Apply returns m with the updates made, at time nowMs. m is unchanged.
func Apply(m *Metadata, updates []Update, nowMs int64) (*Metadata, error) {
	out := m.Clone()
	lastAdded := -1
	for _, u := range updates {
		switch u.Action {
		case "add-schema":
			if u.Schema == nil {
				return nil, errors.New("add-schema without a schema")
			}
			if slices.ContainsFunc(out.Schemas, func(s *iceberg.Schema) bool { return s.ID == u.Schema.ID }) {
				return nil, fmt.Errorf("add-schema: schema id %d exists", u.Schema.ID)
			}
			out.Schemas = append(out.Schemas, u.Schema)
			out.LastColumnID = max(out.LastColumnID, u.Schema.HighestFieldID())
			if u.LastColumnID != nil {
				out.LastColumnID = max(out.LastColumnID, *u.LastColumnID)
			}
			lastAdded = u.Schema.ID
		case "set-current-schema":
			id := lastAdded
			if u.SchemaID != nil && *u.SchemaID != -1 {
				id = *u.SchemaID
			}
			if !slices.ContainsFunc(out.Schemas, func(s *iceberg.Schema) bool { return s.ID == id }) {
				return nil, fmt.Errorf("set-current-schema: no schema %d", id)
			}
			out.CurrentSchemaID = id
		case "add-snapshot":
			if u.Snapshot == nil {
				return nil, errors.New("add-snapshot without a snapshot")
			}
			if out.Snapshot(u.Snapshot.SnapshotID) != nil {
				return nil, fmt.Errorf("add-snapshot: snapshot %d exists", u.Snapshot.SnapshotID)
			}
			if u.Snapshot.SequenceNumber <= out.LastSequenceNumber {
				return nil, fmt.Errorf("add-snapshot: sequence number %d not after %d", u.Snapshot.SequenceNumber, out.LastSequenceNumber)
			}
			out.Snapshots = append(out.Snapshots, *u.Snapshot)
			out.LastSequenceNumber = u.Snapshot.SequenceNumber
		case "set-snapshot-ref":
			if u.SnapshotID == nil {
				return nil, errors.New("set-snapshot-ref without a snapshot id")
			}
			snap := out.Snapshot(*u.SnapshotID)
			if snap == nil {
				return nil, fmt.Errorf("set-snapshot-ref: no snapshot %d", *u.SnapshotID)
			}
			ref := out.Refs[u.RefName]
			ref.SnapshotID, ref.Type = *u.SnapshotID, u.Type
			out.Refs[u.RefName] = ref
			if u.RefName == MainBranch {
				id := *u.SnapshotID
				out.CurrentSnapshotID = &id
				out.SnapshotLog = append(out.SnapshotLog, SnapshotLogEntry{TimestampMs: snap.TimestampMs, SnapshotID: id})
			}
		case "set-properties":
			maps.Copy(out.Properties, u.Updates)
		case "remove-snapshots":
			gone := func(id int64) bool { return slices.Contains(u.SnapshotIDs, id) }
			out.Snapshots = slices.DeleteFunc(out.Snapshots, func(s Snapshot) bool { return gone(s.SnapshotID) })
			out.SnapshotLog = slices.DeleteFunc(out.SnapshotLog, func(e SnapshotLogEntry) bool { return gone(e.SnapshotID) })
			maps.DeleteFunc(out.Refs, func(_ string, r Ref) bool { return gone(r.SnapshotID) })
			if out.CurrentSnapshotID != nil && gone(*out.CurrentSnapshotID) {
				out.CurrentSnapshotID = nil
			}
		default:
			return nil, fmt.Errorf("unsupported table update %q", u.Action)
		}
	}
	out.LastUpdatedMs = max(nowMs, out.LastUpdatedMs)
	return out, nil
}

// LogPrevious records the metadata file m replaces (prev, written at
// prevMs) in m's metadata log, keeping write.metadata.previous-versions-max
// entries. It returns the files that fell off the log, which may be
// deleted when write.metadata.delete-after-commit.enabled is set.
func LogPrevious(m *Metadata, prev string, prevMs int64) (dropped []string) {
	m.MetadataLog = append(m.MetadataLog, MetadataLogEntry{TimestampMs: prevMs, MetadataFile: prev})
	keep := max(m.intProp(PropPreviousVersions, 100), 1)
	if n := len(m.MetadataLog) - keep; n > 0 {
		for _, e := range m.MetadataLog[:n] {
			dropped = append(dropped, e.MetadataFile)
		}
		m.MetadataLog = slices.Delete(m.MetadataLog, 0, n)
	}
	if !m.boolProp(PropDeleteAfterCommit, false) {
		return nil
	}
	return dropped
}

// ExpireSnapshots lists the snapshots to remove so that the main branch
// keeps its retainLast newest ancestors. Snapshots other refs point at
// stay, and so do those outside the main branch's history.
func ExpireSnapshots(m *Metadata, retainLast int) []int64 {
	retainLast = max(retainLast, 1)
	keep := map[int64]bool{}
	for _, r := range m.Refs {
		keep[r.SnapshotID] = true
	}
	var history []int64
	for s := m.CurrentSnapshot(); s != nil; {
		history = append(history, s.SnapshotID)
		if s.ParentSnapshotID == nil || len(history) > len(m.Snapshots) {
			break
		}
		s = m.Snapshot(*s.ParentSnapshotID)
	}
	var out []int64
	for i, id := range history {
		if i >= retainLast && !keep[id] {
			out = append(out, id)
		}
	}
	return out
}
