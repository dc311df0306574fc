package cold

import (
	"strings"
	"testing"

	"github.com/apache/iceberg-go/table"
)

// Appends past the manifest bound merge the table's manifests into one;
// expiry deletes the manifest lists and manifests no snapshot uses, so
// every Avro file left in the metadata directory is referenced.
func TestManifestsBoundedAndCleaned(t *testing.T) {
	s := openStore(t, localBackend(t).cfg)
	s.maxMans, s.keepSnaps = 4, 3
	ctx := ctxT(t)
	const n = 23
	for seg := int64(0); seg < n; seg++ {
		if _, err := s.Archive(ctx, ref("mans", int32(seg%3), seg, seg*4, 4), chunked(makeRecords(seg*4, 4), 4)); err != nil {
			t.Fatal(err)
		}
		tbl, err := tableIO(s).LoadTable(ctx, s.ident("mans"))
		if err != nil {
			t.Fatal(err)
		}
		fsys, _ := s.fsys(ctx)
		mans, err := tbl.CurrentSnapshot().Manifests(fsys)
		if err != nil {
			t.Fatal(err)
		}
		if len(mans) > s.maxMans {
			t.Fatalf("after segment %d: %d manifests", seg, len(mans))
		}
	}
	if k := scanCount(t, s, "mans"); k != n*4 {
		t.Fatalf("scan: %d rows, want %d", k, n*4)
	}
	tbl, err := tableIO(s).LoadTable(ctx, s.ident("mans"))
	if err != nil {
		t.Fatal(err)
	}
	if k := len(tbl.Metadata().Snapshots()); k > 2*s.keepSnaps {
		t.Fatalf("%d snapshots", k)
	}
	used := referencedFiles(t, s, tbl)
	objs, err := s.obj.list(ctx, joinURI(tbl.Location(), "metadata"))
	if err != nil {
		t.Fatal(err)
	}
	avros := 0
	for _, o := range objs {
		if strings.HasSuffix(o, ".avro") {
			avros++
			if !used[o] {
				t.Errorf("unreferenced %s left", o)
			}
		}
	}
	if avros != len(used) {
		t.Fatalf("%d avro files, %d referenced", avros, len(used))
	}
}

// referencedFiles are the manifest lists and manifests of a table's
// snapshots.
func referencedFiles(t *testing.T, s *Store, tbl *table.Table) map[string]bool {
	t.Helper()
	fsys, _ := s.fsys(ctxT(t))
	used := map[string]bool{}
	for _, snap := range tbl.Metadata().Snapshots() {
		used[snap.ManifestList] = true
		mans, err := snap.Manifests(fsys)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mans {
			used[m.FilePath()] = true
		}
	}
	return used
}
