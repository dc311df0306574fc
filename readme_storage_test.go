package main

import (
	"bufio"
	"os"
	"strings"
	"testing"

	rkeys "github.com/korvet/korvet/engine/keys" // this package has a func keys
)

// TestReadmeStorageTable checks the README's table of Redis keys against
// package keys, both ways: a key korvet writes but the README does not
// document fails, and so does a README row no code builds.
func TestReadmeStorageTable(t *testing.T) {
	rows := readmeStorageRows(t)
	want := map[string]string{} // pattern -> Redis type
	for _, k := range rkeys.Layout() {
		want[k.Pattern] = k.Type
		typ, ok := rows[k.Pattern]
		switch {
		case !ok:
			t.Errorf("README's storage table lacks %s (%s: %s)", k.Pattern, k.Type, k.Holds)
		case typ != k.Type:
			t.Errorf("README says %s is a %s; package keys says %s", k.Pattern, typ, k.Type)
		}
	}
	for pattern := range rows {
		if _, ok := want[pattern]; !ok {
			t.Errorf("README's storage table has %s, which package keys does not build", pattern)
		}
	}
}

// readmeStorageRows returns the rows of the table under "## How data is
// stored": key pattern (the first cell, in backticks) -> Redis type.
func readmeStorageRows(t *testing.T) map[string]string {
	t.Helper()
	f, err := os.Open("README.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows := map[string]string{}
	in, inTable := false, false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			in = line == "## How data is stored"
			continue
		}
		if !in {
			continue
		}
		if !strings.HasPrefix(line, "|") {
			if inTable {
				break // the table ended
			}
			continue
		}
		inTable = true
		cells := strings.SplitN(line, "|", 4)
		if len(cells) < 4 {
			t.Fatalf("README storage table: bad row %q", line)
		}
		key, typ := strings.TrimSpace(cells[1]), strings.TrimSpace(cells[2])
		if key == "Redis key" || strings.HasPrefix(key, "---") {
			continue // header and separator
		}
		pattern, ok := strings.CutPrefix(key, "`")
		pattern, ok2 := strings.CutSuffix(pattern, "`")
		if !ok || !ok2 {
			t.Fatalf("README storage table: key %q is not in backticks", key)
		}
		if _, dup := rows[pattern]; dup {
			t.Errorf("README storage table lists %s twice", pattern)
		}
		rows[pattern] = typ
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(rows) == 0 {
		t.Fatal(`README.md has no table under "## How data is stored"`)
	}
	return rows
}
