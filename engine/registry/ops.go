package registry

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/korvet/korvet/engine/schema"
)

// Version is one version of a subject with its schema's source.
type Version struct {
	Subject string
	Version int
	ID      int32
	Deleted bool
	Source  schema.Source
}

// SubjectVersion names one version of a subject.
type SubjectVersion struct {
	Subject string `json:"subject"`
	Version int    `json:"version"`
}

// RegisterOptions are a registration's extras.
type RegisterOptions struct {
	// ID and Version, in IMPORT mode, are what the registration gets
	// (0: chosen as usual).
	ID      int32
	Version int
	// Principal is who registers, for the audit log.
	Principal string
}

// Latest names a subject's latest version.
const Latest = -1

// idSentinel stands for the id the script fills in; no stored id is
// negative.
const idSentinel = -2147483648

// Register registers src under subject and returns its global id and
// version. The same schema (canonical form and references) already a
// live version of subject returns that version; the same schema in
// another subject gets the same id and a new version here. A schema not
// compatible with the subject's versions at its level is refused (409).
func (r *Registry) Register(ctx context.Context, subject string, src schema.Source, opts RegisterOptions) (int32, int, error) {
	if err := checkSubject(subject); err != nil {
		return 0, 0, err
	}
	if err := checkSource(src); err != nil {
		return 0, 0, err
	}
	if src.Format == "" {
		src.Format = schema.Avro
	}
	level, mode, err := r.effective(ctx, subject)
	if err != nil {
		return 0, 0, err
	}
	switch {
	case mode == ReadOnly || mode == ReadOnlyOverride:
		return 0, 0, unprocessable(CodeOperationNotPermitted, "Subject %s is in read-only mode", subject)
	case (opts.ID > 0 || opts.Version > 0) && mode != Import:
		return 0, 0, unprocessable(CodeOperationNotPermitted, "Subject %s is not in import mode: a registration may not choose its id or version", subject)
	case opts.ID < 0 || opts.Version < 0:
		return 0, 0, unprocessable(CodeInvalidSchema, "Invalid id %d or version %d", opts.ID, opts.Version)
	}
	for attempt := 0; attempt < casAttempts; attempt++ {
		if attempt > 0 {
			if err := backoff(ctx, attempt); err != nil {
				return 0, 0, err
			}
		}
		st, raw, err := r.subject(ctx, subject)
		if err != nil {
			return 0, 0, err
		}
		s, guards, err := r.parseGuarded(ctx, src, true)
		if err != nil {
			return 0, 0, err
		}
		fp := fingerprint(s)
		known, err := r.do(ctx, "HGET", r.k.SchemaIDs(), fp)
		if err != nil {
			return 0, 0, fmt.Errorf("look up schema fingerprint: %w", err)
		}
		if !known.IsNil() {
			id, _ := known.Int()
			for _, v := range st.live() {
				if v.ID == int32(id) {
					if opts.ID > 0 && opts.ID != v.ID {
						return 0, 0, unprocessable(CodeIDDoesNotMatch, "Schema already registered with id %d instead of input id %d", v.ID, opts.ID)
					}
					return v.ID, v.Version, nil
				}
			}
		}
		if st != nil && len(st.Versions) >= MaxVersions {
			return 0, 0, unprocessable(CodeOperationNotPermitted, "Subject %s has %d versions, at most %d: delete some permanently first", subject, len(st.Versions), MaxVersions)
		}
		if mode != Import {
			if why, err := r.incompatible(ctx, level, s, st.live(), subject); err != nil {
				return 0, 0, err
			} else if len(why) > 0 {
				return 0, 0, incompatibleError(subject, why)
			}
		}
		version := st.maxVersion() + 1
		if opts.Version > 0 {
			if st.find(opts.Version) >= 0 {
				return 0, 0, unprocessable(CodeOperationNotPermitted, "Subject %s already has version %d", subject, opts.Version)
			}
			version = opts.Version
		}
		next := subjectState{}
		if st != nil {
			next.Versions = slices.Clone(st.Versions)
		}
		next.Versions = append(next.Versions, versionEntry{Version: version, ID: idSentinel})
		slices.SortFunc(next.Versions, func(a, b versionEntry) int { return a.Version - b.Version })
		js, err := json.Marshal(next)
		if err != nil {
			return 0, 0, err
		}
		before, after, _ := bytes.Cut(js, []byte(fmt.Sprint(idSentinel)))
		srcJSON, err := json.Marshal(s.Source())
		if err != nil {
			return 0, 0, err
		}
		hasRefs := "0"
		if len(src.References) > 0 {
			hasRefs = "1"
		}
		args := []any{subject, raw, fp, srcJSON, before, after, opts.ID, hasRefs}
		for _, ref := range slices.Sorted(maps.Keys(guards)) {
			args = append(args, ref, guards[ref])
		}
		v, err := registerScript.run(ctx, r.rc, []string{r.k.Subjects(), r.k.Schemas(), r.k.SchemaIDs()}, args...)
		if err != nil {
			return 0, 0, fmt.Errorf("register under %q: %w", subject, err)
		}
		el := v.Elems(nil)
		if len(el) != 2 {
			return 0, 0, fmt.Errorf("register under %q: unexpected script reply", subject)
		}
		status, _ := el[0].Int()
		id64, _ := el[1].Int()
		switch status {
		case 0:
			r.log.Info("schema registered", "subject", subject, "version", version, "id", id64, "type", s.Format(), "principal", opts.Principal)
			return int32(id64), version, nil
		case 1:
			continue // someone else wrote first: read again
		case 2:
			return 0, 0, unprocessable(CodeIDDoesNotMatch, "Schema already registered with id %d instead of input id %d", id64, opts.ID)
		default:
			return 0, 0, unprocessable(CodeOperationNotPermitted, "Overwrite new schema with id %d is not permitted: the id names another schema", opts.ID)
		}
	}
	return 0, 0, fmt.Errorf("register under %q: state kept changing, gave up after %d attempts", subject, casAttempts)
}

// backoff waits a little before another compare-and-set, longer with each
// attempt, jittered so that racing writers spread out.
func backoff(ctx context.Context, attempt int) error {
	d := time.Duration(rand.IntN(min(attempt, 20))+1) * time.Millisecond
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func incompatibleError(subject string, why []string) *Error {
	return &Error{Code: CodeIncompatible, HTTP: 409, Message: fmt.Sprintf("Schema being registered is incompatible with an earlier schema for subject %q, details: [%s]", subject, strings.Join(why, ", "))}
}

// incompatible checks s against the live versions at level.
func (r *Registry) incompatible(ctx context.Context, level schema.Level, s schema.Schema, live []versionEntry, subject string) ([]string, error) {
	if level == schema.None || len(live) == 0 {
		return nil, nil
	}
	if !strings.HasSuffix(string(level), "_TRANSITIVE") {
		live = live[len(live)-1:] // only the latest counts: parse no more
	}
	prior := make([]schema.Schema, 0, len(live))
	for _, v := range live {
		p, err := r.SchemaByID(ctx, v.ID)
		if err != nil {
			return nil, fmt.Errorf("subject %s version %d: %w", subject, v.Version, err)
		}
		prior = append(prior, p)
	}
	return schema.Check(level, s, prior), nil
}

// CheckCompatibility tells why src could not be registered under subject
// (nil: it could). version is Latest or a version number to check against
// that version alone, or 0 to check against what the subject's level
// names. A subject without versions accepts anything; a version that does
// not exist is 40402.
func (r *Registry) CheckCompatibility(ctx context.Context, subject string, src schema.Source, version int) ([]string, error) {
	if err := checkSubject(subject); err != nil {
		return nil, err
	}
	if err := checkSource(src); err != nil {
		return nil, err
	}
	s, err := r.parse(ctx, src)
	if err != nil {
		return nil, err
	}
	level, _, err := r.effective(ctx, subject)
	if err != nil {
		return nil, err
	}
	st, _, err := r.subject(ctx, subject)
	if err != nil {
		return nil, err
	}
	live := st.live()
	switch {
	case version == 0 || (version == Latest && len(live) == 0):
	case version == Latest:
		live = live[len(live)-1:]
	default:
		if st == nil {
			return nil, errSubjectNotFound(subject)
		}
		i := slices.IndexFunc(live, func(v versionEntry) bool { return v.Version == version })
		if i < 0 {
			return nil, errVersionNotFound(version)
		}
		live = live[i : i+1]
	}
	return r.incompatible(ctx, level, s, live, subject)
}

// Lookup finds src among subject's versions (soft-deleted ones too with
// deleted): 40401 without the subject, 40403 without the schema.
func (r *Registry) Lookup(ctx context.Context, subject string, src schema.Source, deleted bool) (Version, error) {
	if err := checkSubject(subject); err != nil {
		return Version{}, err
	}
	if err := checkSource(src); err != nil {
		return Version{}, err
	}
	st, _, err := r.subject(ctx, subject)
	if err != nil {
		return Version{}, err
	}
	if st == nil || (!deleted && len(st.live()) == 0) {
		return Version{}, errSubjectNotFound(subject)
	}
	s, err := r.parse(ctx, src)
	if err != nil {
		return Version{}, err
	}
	known, err := r.do(ctx, "HGET", r.k.SchemaIDs(), fingerprint(s))
	if err != nil {
		return Version{}, fmt.Errorf("look up schema fingerprint: %w", err)
	}
	if !known.IsNil() {
		id, _ := known.Int()
		for i := len(st.Versions) - 1; i >= 0; i-- {
			v := st.Versions[i]
			if v.ID == int32(id) && (deleted || !v.Deleted) {
				return r.version(ctx, subject, v)
			}
		}
	}
	return Version{}, notFound(CodeSchemaNotFound, "Schema not found")
}

func (r *Registry) version(ctx context.Context, subject string, v versionEntry) (Version, error) {
	src, err := r.Source(ctx, v.ID)
	if err != nil {
		return Version{}, err
	}
	return Version{Subject: subject, Version: v.Version, ID: v.ID, Deleted: v.Deleted, Source: src}, nil
}

// Versions lists subject's version numbers (soft-deleted ones too with
// deleted): 40401 for a subject without any.
func (r *Registry) Versions(ctx context.Context, subject string, deleted bool) ([]int, error) {
	st, _, err := r.subject(ctx, subject)
	if err != nil {
		return nil, err
	}
	var out []int
	if st != nil {
		for _, v := range st.Versions {
			if deleted || !v.Deleted {
				out = append(out, v.Version)
			}
		}
	}
	if len(out) == 0 {
		return nil, errSubjectNotFound(subject)
	}
	return out, nil
}

// Version returns version v (or Latest) of subject; soft-deleted versions
// only with deleted.
func (r *Registry) Version(ctx context.Context, subject string, v int, deleted bool) (Version, error) {
	st, _, err := r.subject(ctx, subject)
	if err != nil {
		return Version{}, err
	}
	if st == nil || (!deleted && len(st.live()) == 0) {
		return Version{}, errSubjectNotFound(subject)
	}
	for i := len(st.Versions) - 1; i >= 0; i-- {
		e := st.Versions[i]
		if (v == Latest || e.Version == v) && (deleted || !e.Deleted) {
			return r.version(ctx, subject, e)
		}
	}
	return Version{}, errVersionNotFound(v)
}

// SubjectNames lists the subjects with live versions (with deleted, with
// any version), sorted.
func (r *Registry) SubjectNames(ctx context.Context, deleted bool) ([]string, error) {
	all, err := r.allSubjects(ctx)
	if err != nil {
		return nil, err
	}
	out := []string{}
	for name, st := range all {
		if deleted || len(st.live()) > 0 {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out, nil
}

// AllVersions lists the versions of every subject whose name starts with
// prefix, with their sources, by subject and version; only each
// subject's latest with latestOnly.
func (r *Registry) AllVersions(ctx context.Context, prefix string, deleted, latestOnly bool) ([]Version, error) {
	all, err := r.allSubjects(ctx)
	if err != nil {
		return nil, err
	}
	out := []Version{}
	for _, name := range slices.Sorted(maps.Keys(all)) {
		if !strings.HasPrefix(name, prefix) {
			continue
		}
		var pick []versionEntry
		for _, v := range all[name].Versions {
			if deleted || !v.Deleted {
				pick = append(pick, v)
			}
		}
		if latestOnly && len(pick) > 0 {
			pick = pick[len(pick)-1:]
		}
		for _, v := range pick {
			ver, err := r.version(ctx, name, v)
			if err != nil {
				return nil, err
			}
			out = append(out, ver)
		}
	}
	return out, nil
}

// Usages lists the subject versions that hold schema id (soft-deleted
// ones too with deleted), by subject and version.
func (r *Registry) Usages(ctx context.Context, id int32, deleted bool) ([]SubjectVersion, error) {
	all, err := r.allSubjects(ctx)
	if err != nil {
		return nil, err
	}
	out := []SubjectVersion{}
	for _, name := range slices.Sorted(maps.Keys(all)) {
		for _, v := range all[name].Versions {
			if v.ID == id && (deleted || !v.Deleted) {
				out = append(out, SubjectVersion{Subject: name, Version: v.Version})
			}
		}
	}
	return out, nil
}

// SubjectsOfID lists the subjects holding schema id.
func (r *Registry) SubjectsOfID(ctx context.Context, id int32, deleted bool) ([]string, error) {
	us, err := r.Usages(ctx, id, deleted)
	if err != nil {
		return nil, err
	}
	out := []string{}
	for _, u := range us {
		if len(out) == 0 || out[len(out)-1] != u.Subject {
			out = append(out, u.Subject)
		}
	}
	return out, nil
}

// VersionsOfID lists the subject versions holding schema id.
func (r *Registry) VersionsOfID(ctx context.Context, id int32, deleted bool) ([]SubjectVersion, error) {
	return r.Usages(ctx, id, deleted)
}

// ReferencedBy lists the ids of live schemas that reference version v of
// subject, ascending.
func (r *Registry) ReferencedBy(ctx context.Context, subject string, v int) ([]int32, error) {
	st, _, err := r.subject(ctx, subject)
	if err != nil {
		return nil, err
	}
	if st == nil {
		return nil, errSubjectNotFound(subject)
	}
	if v == Latest {
		live := st.live()
		if len(live) == 0 {
			return nil, errVersionNotFound(v)
		}
		v = live[len(live)-1].Version
	} else if st.find(v) < 0 {
		return nil, errVersionNotFound(v)
	}
	refs, err := r.referencers(ctx)
	if err != nil {
		return nil, err
	}
	return refs[SubjectVersion{subject, v}], nil
}

// referencers maps each referenced subject version to the ids of the live
// schemas referencing it.
func (r *Registry) referencers(ctx context.Context) (map[SubjectVersion][]int32, error) {
	all, err := r.allSubjects(ctx)
	if err != nil {
		return nil, err
	}
	live := map[int32]bool{}
	for _, st := range all {
		for _, v := range st.live() {
			live[v.ID] = true
		}
	}
	srcs, err := r.allSources(ctx)
	if err != nil {
		return nil, err
	}
	out := map[SubjectVersion][]int32{}
	for _, id := range slices.Sorted(maps.Keys(srcs)) {
		if !live[id] {
			continue
		}
		for _, ref := range srcs[id].References {
			k := SubjectVersion{ref.Subject, ref.Version}
			out[k] = append(out[k], id)
		}
	}
	return out, nil
}

// DeleteOptions are a delete's extras.
type DeleteOptions struct {
	Permanent bool
	Principal string // for the audit log
}

// DeleteSubject deletes subject's versions: soft (hidden, numbers and ids
// kept) or, after a soft delete, permanently. It returns the versions
// deleted.
func (r *Registry) DeleteSubject(ctx context.Context, subject string, opts DeleteOptions) ([]int, error) {
	if err := r.writable(ctx, subject); err != nil {
		return nil, err
	}
	for attempt := 0; attempt < casAttempts; attempt++ {
		if attempt > 0 {
			if err := backoff(ctx, attempt); err != nil {
				return nil, err
			}
		}
		rev, err := r.refrev(ctx)
		if err != nil {
			return nil, err
		}
		st, raw, err := r.subject(ctx, subject)
		if err != nil {
			return nil, err
		}
		if st == nil || len(st.Versions) == 0 {
			return nil, errSubjectNotFound(subject)
		}
		live := st.live()
		if !opts.Permanent && len(live) == 0 {
			return nil, notFound(CodeSubjectSoftDeleted, "Subject '%s' was soft deleted. Set permanent=true to delete permanently", subject)
		}
		if opts.Permanent && len(live) > 0 {
			return nil, notFound(CodeSubjectNotSoftDeleted, "Subject '%s' was not deleted first before being permanently deleted", subject)
		}
		refs, err := r.referencers(ctx)
		if err != nil {
			return nil, err
		}
		var deleted []int
		next := &subjectState{Versions: slices.Clone(st.Versions)}
		for i, v := range next.Versions {
			if by := refs[SubjectVersion{subject, v.Version}]; len(by) > 0 {
				return nil, referenceExists(subject, v.Version, by)
			}
			if opts.Permanent || !v.Deleted {
				deleted = append(deleted, v.Version)
			}
			next.Versions[i].Deleted = true
		}
		if opts.Permanent {
			next = nil
		}
		ok, err := r.put(ctx, subject, raw, next, rev, opts.Permanent)
		if err != nil {
			return nil, err
		}
		if ok {
			r.log.Info("schema subject deleted", "subject", subject, "versions", deleted, "permanent", opts.Permanent, "principal", opts.Principal)
			return deleted, nil
		}
	}
	return nil, fmt.Errorf("delete subject %q: state kept changing, gave up after %d attempts", subject, casAttempts)
}

func referenceExists(subject string, v int, by []int32) *Error {
	return unprocessable(CodeReferenceExists, "One or more references exist to the schema {subject=%s,version=%d}: schemas %v reference it", subject, v, by)
}

// writable refuses deletes in a read-only mode.
func (r *Registry) writable(ctx context.Context, subject string) error {
	if err := checkSubject(subject); err != nil {
		return err
	}
	_, mode, err := r.effective(ctx, subject)
	if err != nil {
		return err
	}
	if mode == ReadOnly || mode == ReadOnlyOverride {
		return unprocessable(CodeOperationNotPermitted, "Subject %s is in read-only mode", subject)
	}
	return nil
}

// DeleteVersion deletes version v (or Latest, the latest live one) of
// subject: soft, or after a soft delete permanently. A version that live
// schemas reference cannot be deleted (42206).
func (r *Registry) DeleteVersion(ctx context.Context, subject string, v int, opts DeleteOptions) (int, error) {
	if err := r.writable(ctx, subject); err != nil {
		return 0, err
	}
	for attempt := 0; attempt < casAttempts; attempt++ {
		if attempt > 0 {
			if err := backoff(ctx, attempt); err != nil {
				return 0, err
			}
		}
		rev, err := r.refrev(ctx)
		if err != nil {
			return 0, err
		}
		st, raw, err := r.subject(ctx, subject)
		if err != nil {
			return 0, err
		}
		if st == nil || len(st.Versions) == 0 {
			return 0, errSubjectNotFound(subject)
		}
		want := v
		if want == Latest {
			live := st.live()
			if len(live) == 0 {
				return 0, errVersionNotFound(v)
			}
			want = live[len(live)-1].Version
		}
		i := st.find(want)
		if i < 0 {
			return 0, errVersionNotFound(want)
		}
		e := st.Versions[i]
		switch {
		case !opts.Permanent && e.Deleted:
			return 0, notFound(CodeVersionSoftDeleted, "Subject '%s' Version %d was soft deleted. Set permanent=true to delete permanently", subject, want)
		case opts.Permanent && !e.Deleted:
			return 0, notFound(CodeVersionNotSoftDeleted, "Subject '%s' Version %d was not deleted first before being permanently deleted", subject, want)
		}
		refs, err := r.referencers(ctx)
		if err != nil {
			return 0, err
		}
		if by := refs[SubjectVersion{subject, want}]; len(by) > 0 {
			return 0, referenceExists(subject, want, by)
		}
		next := &subjectState{Versions: slices.Clone(st.Versions)}
		if opts.Permanent {
			next.Versions = slices.Delete(next.Versions, i, i+1)
		} else {
			next.Versions[i].Deleted = true
		}
		ok, err := r.put(ctx, subject, raw, next, rev, opts.Permanent && len(next.Versions) == 0)
		if err != nil {
			return 0, err
		}
		if ok {
			r.log.Info("schema version deleted", "subject", subject, "version", want, "permanent", opts.Permanent, "principal", opts.Principal)
			return want, nil
		}
	}
	return 0, fmt.Errorf("delete version %d of %q: state kept changing, gave up after %d attempts", v, subject, casAttempts)
}
