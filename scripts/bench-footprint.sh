#!/usr/bin/env bash
# Footprint benchmark (not a test): how big korvet is and how much memory
# it holds. Prints, each next to its target:
#   - the binary as `go build -trimpath` makes it, and stripped (-s -w),
#     with the ten largest modules by symbol size (go tool nm -size);
#   - with DEB=1, the .deb of scripts/build-deb.sh;
#   - the resident memory (VmRSS) of a korvet started on a fresh
#     redis-server with an empty data dir, once it has settled (idle),
#     split into anonymous memory and the binary's own file pages;
#   - the peak resident memory (VmHWM) while scripts/benchproduce produces
#     RECORDS records as fast as it can (loaded), and the rate reached.
# Targets (issue 20): stripped <= 40 MB, .deb <= 10 MB, idle <= 40 MB,
# loaded <= 150 MB.
#
#   scripts/bench-footprint.sh
#   DEB=1 RECORDS=1000000 scripts/bench-footprint.sh
#
# Environment: RECORDS (default 500000), SIZE (100), PARTITIONS (4),
# SETTLE (seconds idle before measuring, default 10), BUDGET (memory.budget
# for the measured korvet; default: korvet's own), DEB (1: also build the
# .deb), KORVET_BIN (measure this binary for RSS; sizes are still of this
# checkout's build).
set -euo pipefail

# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

RECORDS=${RECORDS:-500000}
SIZE=${SIZE:-100}
PARTITIONS=${PARTITIONS:-4}
SETTLE=${SETTLE:-10}
DEB=${DEB:-0}

need_cmd redis-server redis-server

TMP=$(mktemp -d "${TMPDIR:-/tmp}/korvet-bench-footprint.XXXXXX")
REDIS_PID=""
KORVET_PID=""
cleanup() {
	local rc=$?
	stop_pid "$KORVET_PID" 15
	stop_pid "$REDIS_PID" 15
	if [[ $rc -ne 0 ]]; then
		echo "--- tail of korvet.log ---" >&2
		tail -n 30 "$TMP/korvet/korvet.log" >&2 2>/dev/null || true
	fi
	rm -rf "$TMP"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

mb() { awk -v b="$1" 'BEGIN { printf "%.1f MB", b / 1e6 }'; }
kb_mb() { awk -v k="$1" 'BEGIN { printf "%.1f MB", k * 1024 / 1e6 }'; }
verdict() { awk -v v="$1" -v t="$2" 'BEGIN { print (v <= t ? "ok" : "OVER") }'; }
row() { printf '%-28s %12s   %-8s %s\n' "$1" "$2" "$3" "$4"; }
# proc_kb PID FIELD: a /proc/PID/status field in kB (VmRSS, VmHWM).
proc_kb() { awk -v f="$2:" '$1 == f { print $2 }' "/proc/$1/status"; }

started=$SECONDS
cd "$REPO"
mkdir -p "$TMP/bin"
echo "building korvet (go build -trimpath, with and without -s -w)"
CGO_ENABLED=0 go build -trimpath -o "$TMP/bin/korvet.full" . || die "go build failed"
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$TMP/bin/korvet" . || die "go build -s -w failed"
go build -o "$TMP/benchproduce" ./scripts/benchproduce || die "go build ./scripts/benchproduce failed"
full=$(stat -c %s "$TMP/bin/korvet.full")
stripped=$(stat -c %s "$TMP/bin/korvet")

echo
echo "largest modules by machine code (text symbols of go tool nm -size; the stripped binary has"
echo "the same code, and its function tables (.gopclntab) grow with it):"
go tool nm -size "$TMP/bin/korvet.full" | awk '
	NF >= 4 && ($3 == "T" || $3 == "t") {
		# Module of a symbol: host/owner/repo for the code hosts, else
		# host/first; a first element without a dot is the standard
		# library (runtime included) or package main.
		sym = $4
		sub(/^type:/, "", sym); sub(/^go:itab\./, "", sym); sub(/^\*/, "", sym)
		n = split(sym, p, "/")
		if (p[1] !~ /\./ || n < 2) {
			mod = "standard library, runtime and main"
		} else {
			k = (p[1] ~ /^(github\.com|golang\.org|gopkg\.in)$/) ? 3 : 2
			if (k > n) k = n
			last = p[k]; sub(/\..*$/, "", last)
			mod = p[1]; for (i = 2; i < k; i++) mod = mod "/" p[i]; mod = mod "/" last
		}
		size[mod] += $2
	}
	END { for (m in size) printf "%10.1f MB  %s\n", size[m] / 1e6, m }' | sort -rn | head -n 10

deb=""
if [[ $DEB == 1 ]]; then
	echo
	echo "building the .deb"
	debfile=$(OUT_DIR="$TMP/deb" scripts/build-deb.sh 2>/dev/null | tail -n 1)
	[[ -f $debfile ]] || die "scripts/build-deb.sh made no .deb"
	deb=$(stat -c %s "$debfile")
fi

BIN=${KORVET_BIN:-$TMP/bin/korvet}
start_redis "$TMP/redis"
if [[ -n ${BUDGET:-} ]]; then
	# A [memory] table after [redis]: start_korvet writes [redis] last.
	KORVET_REDIS_TOML=$'\n[memory]\nbudget = "'"$BUDGET"'"' start_korvet "$BIN" "$TMP/korvet" "$REDIS_PORT"
else
	start_korvet "$BIN" "$TMP/korvet" "$REDIS_PORT"
fi
echo
echo "korvet on 127.0.0.1:$KAFKA_PORT (redis-server on $REDIS_PORT); idle for ${SETTLE}s"
sleep "$SETTLE" # a settling period is what is measured, not a wait for a condition
idle=$(proc_kb "$KORVET_PID" VmRSS)
# The split matters: RssFile is the binary's own pages (on kernels with
# large page-cache folios nearly all of text+rodata, however little runs),
# RssAnon is what korvet allocated (heap, stacks).
idle_anon=$(proc_kb "$KORVET_PID" RssAnon)
idle_file=$(proc_kb "$KORVET_PID" RssFile)

echo "producing $RECORDS records of $SIZE B to $PARTITIONS partitions"
"$TMP/benchproduce" -brokers "127.0.0.1:$KAFKA_PORT" -topic footprint -partitions "$PARTITIONS" \
	-records "$RECORDS" -size "$SIZE" >"$TMP/produce.txt" 2>&1 || {
	cat "$TMP/produce.txt" >&2
	die "benchproduce failed"
}
rate=$(awk '/^RESULT/ { for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] == "records_per_sec" || kv[1] == "rps") print kv[2] } }' "$TMP/produce.txt")
loaded=$(proc_kb "$KORVET_PID" VmHWM)
after=$(proc_kb "$KORVET_PID" VmRSS)

echo
printf '%-28s %12s   %-8s %s\n' "figure" "measured" "target" ""
row "binary (-trimpath)" "$(mb "$full")" "-" ""
row "binary stripped (-s -w)" "$(mb "$stripped")" "40 MB" "$(verdict "$stripped" 40e6)"
if [[ -n $deb ]]; then
	row ".deb" "$(mb "$deb")" "10 MB" "$(verdict "$deb" 10e6)"
fi
row "idle RSS" "$(kb_mb "$idle")" "40 MB" "$(verdict "$((idle * 1024))" 40e6)"
row "  of it anonymous (heap)" "$(kb_mb "$idle_anon")" "-" ""
row "  of it file (binary pages)" "$(kb_mb "$idle_file")" "-" ""
row "peak RSS under produce" "$(kb_mb "$loaded")" "150 MB" "$(verdict "$((loaded * 1024))" 150e6)"
row "RSS after produce" "$(kb_mb "$after")" "-" ""
echo "produce: $(grep '^RESULT' "$TMP/produce.txt" || tail -n 1 "$TMP/produce.txt")${rate:+ ($rate records/s)}"
echo "$(nproc) CPUs; load average $(cut -d' ' -f1-3 /proc/loadavg) (figures under load from other processes vary)"
echo "(took $((SECONDS - started))s)"
