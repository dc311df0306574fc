#!/usr/bin/env bash
# KV view benchmarks (not a test): korvet's key index and HTTP reads, each
# figure printed next to its reference, measured in the same run on one
# redis-server (AOF everysec) and korvet on free 127.0.0.1 ports:
#   a) index size: 1M keys k-%07d over 2 partitions, every file of the
#      index directory after korvet stops (and after an offline rebuild);
#      reference rpkv 14.16 B/key, target <= 14;
#   b) rebuild: `korvet index rebuild` of 1M keys with 256 B values;
#      reference rpkv ~996k keys/s (6-core laptop), target >= 1M keys/s,
#      next to its floor: the same XRANGEs with the replies dropped;
#   c) reads: 5000 random sequential GETs among 100k keys with 256 B
#      values, p50/p99 (rpkv 11.07/16.85 ms; targets 0.5/2 ms), next to
#      the floor, a plain Redis GET of a materialized copy of the values,
#      and throughput with 16 concurrent clients, korvet and floor; and
#      the same reads from a minimal Go net/http handler answering the same
#      256 bytes (benchkv -mode serve), the reference for korvet's HTTP
#      path, and from one that first reads one entry with XRANGE (benchkv
#      -mode serve -xrange: korvet's floor, the least a read of the log
#      can cost), with the CPU time korvet, Redis, the handlers and the
#      load generator used during each throughput run.
#
#   scripts/bench-kv.sh
#
# Environment: SIZE_KEYS (1000000), REBUILD_KEYS (1000000), READ_KEYS
# (100000), READS (5000), CLIENTS (16), KORVET_BIN (skip the build), PARTS
# (default "size rebuild reads": which of a), b), c) to run), PERF_OUT (a
# file: perf record korvet during its GET throughput run into it), CLIENT
# (lean: the load generator's keep-alive HTTP/1.1 loop, the default; or
# net/http: Go's client; the same for korvet and the reference),
# REBUILD_RUNS (3: rebuilds in b), the median is the figure), and
# KORVET_BIN_BEFORE (another korvet binary, e.g. a build of the previous
# commit: b) then alternates its rebuilds with KORVET_BIN's and the floor,
# round after round on the same data, and prints both medians), and
# REBUILD_SHUFFLE=1 (b) produces its keys in a random order instead of
# k-0000000 up: each partition's keys then come in random order, and the
# rebuild sorts them).
set -euo pipefail

# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

SIZE_KEYS=${SIZE_KEYS:-1000000}
REBUILD_KEYS=${REBUILD_KEYS:-1000000}
READ_KEYS=${READ_KEYS:-100000}
READS=${READS:-5000}
CLIENTS=${CLIENTS:-16}
PARTS=${PARTS:-size rebuild reads}
PERF_OUT=${PERF_OUT:-}
CLIENT=${CLIENT:-lean}
REBUILD_RUNS=${REBUILD_RUNS:-3}
BEFORE_BIN=${KORVET_BIN_BEFORE:-}
REBUILD_SHUFFLE=${REBUILD_SHUFFLE:-}
part() { [[ " $PARTS " == *" $1 "* ]]; }

need_cmd redis-server redis-server

TMP=$(mktemp -d "${TMPDIR:-/tmp}/korvet-bench-kv.XXXXXX")
REDIS_PID=""
KORVET_PID=""
REF_PID=""
REFX_PID=""
cleanup() {
	local rc=$?
	stop_pid "$REFX_PID" 5
	stop_pid "$REF_PID" 5
	stop_pid "$KORVET_PID" 15
	stop_pid "$REDIS_PID" 15
	if [[ $rc -ne 0 ]]; then
		echo "--- tail of korvet.log ---" >&2
		tail -n 30 "$TMP"/k*/korvet.log >&2 2>/dev/null || true
	fi
	rm -rf "$TMP"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

started=$SECONDS
echo "building korvet and benchkv"
BIN=${KORVET_BIN:-$TMP/bin/korvet}
[[ -n ${KORVET_BIN:-} ]] || build_korvet "$BIN"
(cd "$REPO" && go build -o "$TMP/benchkv" ./scripts/benchkv) || die "go build ./scripts/benchkv failed"

start_redis "$TMP/redis"
REDIS_URL="redis://127.0.0.1:$REDIS_PORT/0"
echo "redis-server $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/') on 127.0.0.1:$REDIS_PORT (AOF everysec); $(nproc) CPUs shared by redis-server, korvet and the client"

# result FILE KEY: the value of KEY in FILE's RESULT line.
result() { sed -n "s/^RESULT .*\b$2=\([^ ]*\).*/\1/p" "$1" | tail -n 1; }
dir_bytes() { find "$1" -type f -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }'; }
# phase NAME: a fresh korvet (its own data_dir) on an emptied Redis.
phase() {
	stop_pid "$KORVET_PID" 15
	KORVET_PID=""
	"$TMP/benchkv" -mode flush -redis "$REDIS_URL"
	start_korvet "$BIN" "$TMP/$1" "$REDIS_PORT"
}

size_live="" size_rebuilt="" rebuild_rate="" floor_rate=""
# --- a) index size
if part size; then
echo
echo "== a) index size: $SIZE_KEYS keys k-%07d over 2 partitions (16 B values), indexed live as produced"
phase ksize
"$TMP/benchkv" -mode produce -brokers "127.0.0.1:$KAFKA_PORT" -topic kv-size -partitions 2 -keys "$SIZE_KEYS" -size 16 | tee "$TMP/size.txt"
stop_pid "$KORVET_PID" 15
KORVET_PID=""
size_live=$(dir_bytes "$TMP/ksize/data/index")
ls -l "$TMP/ksize/data/index"
"$BIN" index rebuild --config "$TMP/ksize/korvet.toml" >"$TMP/size-rebuild.txt" 2>&1 || { cat "$TMP/size-rebuild.txt"; die "index rebuild failed"; }
size_rebuilt=$(dir_bytes "$TMP/ksize/data/index")
echo "index after korvet stopped: $size_live bytes; after korvet index rebuild: $size_rebuilt bytes"
fi

# --- b) rebuild
if part rebuild; then
echo
echo "== b) rebuild: $REBUILD_KEYS keys with 256 B values over 2 partitions${REBUILD_SHUFFLE:+, produced in random order}"
phase krebuild
shuffle=()
[[ -z $REBUILD_SHUFFLE ]] || shuffle=(-shuffle)
"$TMP/benchkv" -mode produce -brokers "127.0.0.1:$KAFKA_PORT" -topic kv-rebuild -partitions 2 -keys "$REBUILD_KEYS" -size 256 "${shuffle[@]}" | tee "$TMP/rebuild-produce.txt"
stop_pid "$KORVET_PID" 15
KORVET_PID=""
"$TMP/benchkv" -mode quiesce -redis "$REDIS_URL"
# REBUILD_RUNS runs (the 2 cores are shared): the median is the figure.
# Each next to its floor: the same XRANGEs with the replies dropped unread
# (Redis is single-threaded; no client work beats it). With
# KORVET_BIN_BEFORE, each round rebuilds with it too, just before.
# Every run also says the CPU seconds korvet (the whole index rebuild
# process) and redis-server used.
redis_cpu() { awk -v t="$(getconf CLK_TCK)" '{ printf "%.2f", ($14 + $15) / t }' "/proc/$REDIS_PID/stat"; }
# rebuild_run BIN OUT: one rebuild, its output and a CPU line appended to OUT.
rebuild_run() {
	local r0 r1 cpu
	r0=$(redis_cpu)
	cpu=$( { TIMEFORMAT='%U %S'; time "$1" index rebuild --config "$TMP/krebuild/korvet.toml" >>"$2" 2>&1; } 2>&1) || { cat "$2"; die "index rebuild failed"; }
	r1=$(redis_cpu)
	awk -v c="$cpu" -v a="$r0" -v b="$r1" 'BEGIN { split(c, u, " "); printf "CPU korvet=%.2f redis=%.2f\n", u[1] + u[2], b - a }' >>"$2"
	tail -n 2 "$2"
}
for ((run = 0; run < REBUILD_RUNS; run++)); do
	[[ -z $BEFORE_BIN ]] || { echo "(before)"; rebuild_run "$BEFORE_BIN" "$TMP/rebuild-before.txt"; }
	rebuild_run "$BIN" "$TMP/rebuild.txt"
	r0=$(redis_cpu)
	"$TMP/benchkv" -mode xrange -redis "$REDIS_URL" -topic kv-rebuild | tee -a "$TMP/rebuild-floor.txt"
	echo "CPU redis=$(awk -v a="$r0" -v b="$(redis_cpu)" 'BEGIN { printf "%.2f", b - a }')" | tee -a "$TMP/rebuild-floor.txt"
done
# median FILE SED: the median of the numbers SED prints from FILE, then
# all of them in the order measured.
median() {
	local all
	all=$(sed -n "$2" "$1" | tr '\n' ' ')
	all=${all% }
	echo "$(tr ' ' '\n' <<<"$all" | grep . | sort -n | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }') ($all)"
}
rates='s/^rebuilt .*(\([0-9]*\) records\/s).*/\1/p'
rebuild_rate=$(median "$TMP/rebuild.txt" "$rates")
[[ $rebuild_rate != " ("* ]] || die "could not read the rebuild rate"
rebuild_cpu=$(median "$TMP/rebuild.txt" 's/^CPU korvet=\([^ ]*\).*/\1/p')
rebuild_rcpu=$(median "$TMP/rebuild.txt" 's/^CPU korvet=.* redis=\([^ ]*\).*/\1/p')
if [[ -n $BEFORE_BIN ]]; then
	before_rate=$(median "$TMP/rebuild-before.txt" "$rates")
	before_cpu=$(median "$TMP/rebuild-before.txt" 's/^CPU korvet=\([^ ]*\).*/\1/p')
	before_rcpu=$(median "$TMP/rebuild-before.txt" 's/^CPU korvet=.* redis=\([^ ]*\).*/\1/p')
fi
floor_rate=$(median "$TMP/rebuild-floor.txt" 's/^RESULT .*rate=\([0-9]*\).*/\1/p')
[[ $floor_rate != " ("* ]] || die "could not read the XRANGE floor"
floor_rcpu=$(median "$TMP/rebuild-floor.txt" 's/^CPU redis=\([^ ]*\).*/\1/p')
fi

# --- c) reads
p50="" rps=""
if part reads; then
echo
echo "== c) reads: $READ_KEYS keys with 256 B values, $READS random sequential GETs, $CLIENTS clients for throughput ($CLIENT HTTP client)"
phase kread
"$TMP/benchkv" -mode produce -brokers "127.0.0.1:$KAFKA_PORT" -topic kv-read -partitions 2 -keys "$READ_KEYS" -size 256 | tee "$TMP/read-produce.txt"
"$TMP/benchkv" -mode quiesce -redis "$REDIS_URL"
free_port REF_PORT
free_port REFX_PORT
"$TMP/benchkv" -mode serve -listen "127.0.0.1:$REF_PORT" -size 256 >"$TMP/ref.log" 2>&1 &
REF_PID=$!
"$TMP/benchkv" -mode serve -listen "127.0.0.1:$REFX_PORT" -size 256 -xrange -redis "$REDIS_URL" -topic kv-read -partitions 2 -concurrency "$CLIENTS" >"$TMP/refx.log" 2>&1 &
REFX_PID=$!
for ((i = 0; i < 200; i++)); do
	port_in_use "$REF_PORT" && port_in_use "$REFX_PORT" && break
	kill -0 "$REF_PID" 2>/dev/null || die "the reference handler did not start: $(cat "$TMP/ref.log")"
	kill -0 "$REFX_PID" 2>/dev/null || die "the XRANGE reference handler did not start: $(cat "$TMP/refx.log")"
	sleep 0.05
done
perf_args=()
[[ -z $PERF_OUT ]] || perf_args=(-perf-pid "$KORVET_PID" -perf-out "$PERF_OUT")
"$TMP/benchkv" -mode read -http "http://127.0.0.1:$HTTP_PORT" -redis "$REDIS_URL" -topic kv-read -keys "$READ_KEYS" -size 256 \
	-reads "$READS" -concurrency "$CLIENTS" -client "$CLIENT" -ref "http://127.0.0.1:$REF_PORT" -refx "http://127.0.0.1:$REFX_PORT" \
	-cpu "korvet=$KORVET_PID,redis=$REDIS_PID,ref=$REF_PID,refx=$REFX_PID" "${perf_args[@]}" | tee "$TMP/read.txt"
stop_pid "$REF_PID" 5
stop_pid "$REFX_PID" 5
REF_PID="" REFX_PID=""
fi

if grep -hE 'level=(ERROR|WARN)' "$TMP"/k*/korvet.log >"$TMP/warn.txt"; then
	echo
	echo "korvet logged warnings or errors during the run:"
	head -n 20 "$TMP/warn.txt"
fi

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
perkey() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
if part reads; then
p50=$(result "$TMP/read.txt" p50_ms)
p99=$(result "$TMP/read.txt" p99_ms)
fp50=$(result "$TMP/read.txt" floor_p50_ms)
fp99=$(result "$TMP/read.txt" floor_p99_ms)
rps=$(result "$TMP/read.txt" rps)
frps=$(result "$TMP/read.txt" floor_rps)
rp50=$(result "$TMP/read.txt" ref_p50_ms)
rp99=$(result "$TMP/read.txt" ref_p99_ms)
rrps=$(result "$TMP/read.txt" ref_rps)
xp50=$(result "$TMP/read.txt" refx_p50_ms)
xp99=$(result "$TMP/read.txt" refx_p99_ms)
xrps=$(result "$TMP/read.txt" refx_rps)
[[ -n $p50 && -n $rps && -n $fp50 && -n $rrps ]] || die "missing read results"
fi

echo
echo "== results ($(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg); rpkv's figures are from its author's 6-core laptop with Redpanda in Docker)"
printf '%-44s %22s %26s\n' "measure" "korvet" "reference"
if part size; then
printf '%-44s %22s %26s\n' "index size, $SIZE_KEYS keys, after stop" "$(perkey "$size_live" "$SIZE_KEYS") B/key" "rpkv 14.16 B/key (<= 14)"
printf '%-44s %22s %26s\n' "index size, $SIZE_KEYS keys, after index rebuild" "$(perkey "$size_rebuilt" "$SIZE_KEYS") B/key" "rpkv 14.16 B/key (<= 14)"
fi
if part rebuild; then
printf '%-44s %22s %26s\n' "rebuild, $REBUILD_KEYS keys x 256 B (median of $REBUILD_RUNS)" "${rebuild_rate%% *} keys/s" "rpkv ~996k keys/s (>= 1M)"
printf '%-44s %s\n' "  the runs, keys/s" "${rebuild_rate#* }"
printf '%-44s %s\n' "  CPU seconds: korvet, redis-server" "$rebuild_cpu; $rebuild_rcpu"
if [[ -n $BEFORE_BIN ]]; then
printf '%-44s %22s\n' "  before ($BEFORE_BIN)" "${before_rate%% *} keys/s"
printf '%-44s %s\n' "  the runs, keys/s" "${before_rate#* }"
printf '%-44s %s\n' "  CPU seconds: korvet, redis-server" "$before_cpu; $before_rcpu"
fi
printf '%-44s %22s\n' "  floor: raw XRANGE of the same streams" "${floor_rate%% *} keys/s"
printf '%-44s %s\n' "  the runs, keys/s" "${floor_rate#* }"
printf '%-44s %s\n' "  CPU seconds: redis-server" "$floor_rcpu"
fi
if part reads; then
printf '%-44s %22s %26s\n' "GET p50, $READ_KEYS keys x 256 B, sequential" "$p50 ms" "rpkv 11.07 ms (<= 0.5)"
printf '%-44s %22s %26s\n' "GET p99" "$p99 ms" "rpkv 16.85 ms (<= 2)"
printf '%-44s %22s %26s\n' "floor: Redis GET of a copy, p50 / p99" "$fp50 / $fp99 ms" "korvet/floor p50 $(ratio "$p50" "$fp50")x"
printf '%-44s %22s %26s\n' "GET throughput, $CLIENTS clients" "$rps reads/s" "floor $frps ($(ratio "$rps" "$frps")x)"
printf '%-44s %22s %26s\n' "  net/http handler, same 256 B, p50 / p99" "$rp50 / $rp99 ms" "korvet/handler p50 $(ratio "$p50" "$rp50")x"
printf '%-44s %22s %26s\n' "  net/http handler, $CLIENTS clients" "$rrps reads/s" "korvet/handler $(ratio "$rps" "$rrps") (>= 0.8)"
printf '%-44s %22s %26s\n' "  handler + one XRANGE, p50 / p99" "$xp50 / $xp99 ms" "korvet/it p50 $(ratio "$p50" "$xp50")x"
printf '%-44s %22s %26s\n' "  handler + one XRANGE, $CLIENTS clients" "$xrps reads/s" "korvet/it $(ratio "$rps" "$xrps")"
grep -h '^CPU during' "$TMP/read.txt" || true
fi
echo "(took $((SECONDS - started))s)"
