#!/usr/bin/env bash
# Produce/consume benchmark (not a test): korvet against the Redis it runs
# on. Starts redis-server (AOF everysec, as a real setup) and korvet on free
# 127.0.0.1 ports in a temp dir, then measures in the same run:
#   a) raw pipelined XADD into that Redis (redis-benchmark), the ceiling;
#   b) korvet produce of 100 B records with franz-go, 1 and 8 partitions;
#   c) franz-go consume of those same records.
# and prints a table. Targets: korvet/raw >= 0.5, consume >= produce.
#
#   scripts/bench-produce.sh
#
# Environment: RECORDS (default 1000000), SIZE (100), PRODUCERS (1),
# XADD_N (300000), LATENCY_RATE (20000: records/s of a 3 s run at a
# moderate load, for latency without client-side queueing), KORVET_BIN
# (skip the build).
set -euo pipefail

# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

RECORDS=${RECORDS:-1000000}
SIZE=${SIZE:-100}
PRODUCERS=${PRODUCERS:-1}
XADD_N=${XADD_N:-300000}
LATENCY_RATE=${LATENCY_RATE:-20000}

need_cmd redis-server redis-server
need_cmd redis-benchmark redis-tools

TMP=$(mktemp -d "${TMPDIR:-/tmp}/korvet-bench.XXXXXX")
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

started=$SECONDS
echo "building korvet and benchproduce"
BIN=${KORVET_BIN:-$TMP/bin/korvet}
[[ -n ${KORVET_BIN:-} ]] || build_korvet "$BIN"
(cd "$REPO" && go build -o "$TMP/benchproduce" ./scripts/benchproduce) || die "go build ./scripts/benchproduce failed"

start_redis "$TMP/redis"
start_korvet "$BIN" "$TMP/korvet" "$REDIS_PORT"
B=127.0.0.1:$KAFKA_PORT
echo "redis-server $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/') on 127.0.0.1:$REDIS_PORT (AOF everysec), korvet on $B"
echo "$(nproc) CPUs; $RECORDS records of $SIZE B per korvet run, $PRODUCERS producer client(s)"

# result FILE KEY: the value of KEY in FILE's RESULT line.
result() { sed -n "s/^RESULT .*\b$2=\([^ ]*\).*/\1/p" "$1" | tail -n 1; }

# --- a) raw XADD
value=$(head -c "$SIZE" /dev/zero | tr '\0' 'x')
echo
echo "== raw XADD: redis-benchmark -n $XADD_N -c 50 -P 16 XADD benchstream * v <$SIZE B>"
redis-benchmark -h 127.0.0.1 -p "$REDIS_PORT" -n "$XADD_N" -c 50 -P 16 -q \
	XADD benchstream '*' v "$value" 2>&1 | tr '\r' '\n' | grep 'requests per second' | tail -n 1 | tee "$TMP/xadd.txt"
raw=$(sed -n 's/.*: \([0-9.]*\) requests per second.*/\1/p' "$TMP/xadd.txt")
[[ -n $raw ]] || die "could not read redis-benchmark's requests per second"
raw=${raw%.*}
# Leave Redis as it was for korvet (the stream would only take memory).
redis-benchmark -h 127.0.0.1 -p "$REDIS_PORT" -n 1 -c 1 -q DEL benchstream >/dev/null 2>&1 || true

# --- b) and c): korvet produce, then consume the same records
bench() {
	local name=$1 parts=$2
	echo
	echo "== korvet produce: topic $name, $parts partition(s)"
	"$TMP/benchproduce" -mode produce -brokers "$B" -topic "$name" -partitions "$parts" \
		-records "$RECORDS" -size "$SIZE" -producers "$PRODUCERS" | tee "$TMP/$name.produce"
	echo "== korvet consume: topic $name"
	"$TMP/benchproduce" -mode consume -brokers "$B" -topic "$name" -records "$RECORDS" | tee "$TMP/$name.consume"
}
bench bench-1p 1
bench bench-8p 8
echo
echo "== korvet produce at $LATENCY_RATE records/s for 3 s (latency at a moderate load), 1 partition"
"$TMP/benchproduce" -mode produce -brokers "$B" -topic bench-lat -partitions 1 \
	-records $((LATENCY_RATE * 3)) -size "$SIZE" -rate "$LATENCY_RATE" | tee "$TMP/bench-lat.produce"

p1=$(result "$TMP/bench-1p.produce" rps)
p8=$(result "$TMP/bench-8p.produce" rps)
c1=$(result "$TMP/bench-1p.consume" rps)
c8=$(result "$TMP/bench-8p.consume" rps)
[[ -n $p1 && -n $p8 && -n $c1 && -n $c8 ]] || die "missing results"
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
mb() { awk -v r="$1" -v s="$SIZE" 'BEGIN { printf "%.1f", r * s / 1e6 }'; }

if grep -E 'level=(ERROR|WARN)' "$TMP/korvet/korvet.log" >"$TMP/warn.txt"; then
	echo
	echo "korvet logged warnings or errors during the run:"
	head -n 20 "$TMP/warn.txt"
fi

echo
echo "== results ($RECORDS records of $SIZE B; $(nproc) CPUs shared by redis-server, korvet and the client)"
printf '%-34s %14s %9s %24s\n' "measure" "records/s" "MB/s" "note"
printf '%-34s %14s %9s %24s\n' "raw XADD (redis-benchmark -P 16)" "$raw" "$(mb "$raw")" ""
printf '%-34s %14s %9s %24s\n' "korvet produce, 1 partition" "$p1" "$(mb "$p1")" \
	"p50 $(result "$TMP/bench-1p.produce" p50_ms) p99 $(result "$TMP/bench-1p.produce" p99_ms) ms"
printf '%-34s %14s %9s %24s\n' "korvet produce, 8 partitions" "$p8" "$(mb "$p8")" \
	"p50 $(result "$TMP/bench-8p.produce" p50_ms) p99 $(result "$TMP/bench-8p.produce" p99_ms) ms"
printf '%-34s %14s %9s %24s\n' "korvet produce, 1p, rate-limited" "$(result "$TMP/bench-lat.produce" rps)" \
	"$(mb "$(result "$TMP/bench-lat.produce" rps)")" \
	"p50 $(result "$TMP/bench-lat.produce" p50_ms) p99 $(result "$TMP/bench-lat.produce" p99_ms) ms"
printf '%-34s %14s %9s %24s\n' "korvet consume, 1 partition" "$c1" "$(mb "$c1")" "vs produce $(ratio "$c1" "$p1")"
printf '%-34s %14s %9s %24s\n' "korvet consume, 8 partitions" "$c8" "$(mb "$c8")" "vs produce $(ratio "$c8" "$p8")"
printf '%-34s %14s\n' "ratio korvet/raw, 1 partition" "$(ratio "$p1" "$raw") (target >= 0.5)"
printf '%-34s %14s\n' "ratio korvet/raw, 8 partitions" "$(ratio "$p8" "$raw") (target >= 0.5)"
echo "(took $((SECONDS - started))s)"
