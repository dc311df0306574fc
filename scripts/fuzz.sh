#!/usr/bin/env bash
# Runs every Go fuzz target in the repository (each `func FuzzX(f
# *testing.F)` in a _test.go file) for FUZZTIME, one at a time. Seed
# corpora are the f.Add calls plus testdata/fuzz/FuzzX/ in each package; a
# failing input is written there by `go test` and makes this script fail.
#
#   scripts/fuzz.sh                       # 10s per target
#   FUZZTIME=2m scripts/fuzz.sh           # longer
#   FUZZTIME=30s scripts/fuzz.sh ./web    # only the targets of these packages
set -euo pipefail

# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$REPO"

FUZZTIME=${FUZZTIME:-10s}
command -v go >/dev/null 2>&1 || die "go is not on PATH"

# "package-dir target" lines, sorted.
mapfile -t targets < <(grep -rEo --include='*_test.go' '^func Fuzz[A-Za-z0-9_]+\(f \*testing\.F\)' . |
	sed -E 's|^\./(.*)/[^/]*_test\.go:func (Fuzz[A-Za-z0-9_]+).*|./\1 \2|; s|^\./[^/]*_test\.go:func (Fuzz[A-Za-z0-9_]+).*|. \1|' | sort -u)
[[ ${#targets[@]} -gt 0 ]] || die "no fuzz targets found"

if [[ $# -gt 0 ]]; then
	keep=()
	for t in "${targets[@]}"; do
		for pkg in "$@"; do
			[[ ${t%% *} == "${pkg%/}" ]] && keep+=("$t")
		done
	done
	targets=("${keep[@]}")
fi

# corpus_files PKG NAME: the files of a target's corpus, one a line.
corpus_files() { ls "$1/testdata/fuzz/$2" 2>/dev/null || true; }

failed=()
started=$SECONDS
for t in "${targets[@]}"; do
	pkg=${t%% *}
	name=${t#* }
	printf '%-40s ' "$name ($pkg)"
	out=$(mktemp)
	t0=$SECONDS
	before=$(corpus_files "$pkg" "$name")
	for try in 1 2; do
		if go test -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" "$pkg" >"$out" 2>&1; then
			ok=1
			break
		fi
		ok=0
		# Go 1.26's fuzz coordinator can report the end of -fuzztime as
		# "context deadline exceeded" on a busy machine (go.dev/issue/75804,
		# fixed in Go 1.27). A real failure writes its input to the
		# corpus; without one, run the target again.
		if [[ $(corpus_files "$pkg" "$name") != "$before" ]] || ! grep -q 'context deadline exceeded' "$out"; then
			break
		fi
		if [[ $try == 2 ]]; then
			ok=1
			echo -n "(twice the fuzztime race of go.dev/issue/75804, no failing input) "
		fi
	done
	if [[ $ok == 1 ]]; then
		# The last progress line has the execution count.
		execs=$(grep -Eo 'execs: [0-9]+' "$out" | tail -n 1 | cut -d' ' -f2 || true)
		if [[ -n $execs ]]; then
			echo "ok  $execs execs in $((SECONDS - t0))s"
		else
			echo "ok  (FUZZTIME spent replaying the corpus) in $((SECONDS - t0))s"
		fi
	else
		echo "FAIL"
		sed 's/^/    /' "$out"
		failed+=("$name")
	fi
	rm -f "$out"
done
echo "${#targets[@]} fuzz targets, ${FUZZTIME} each, in $((SECONDS - started))s"
if [[ ${#failed[@]} -gt 0 ]]; then
	die "fuzz targets failed: ${failed[*]} (the failing inputs are under testdata/fuzz/ in their packages)"
fi
