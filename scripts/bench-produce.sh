#!/usr/bin/env bash
# Produce/consume benchmark (not a test): korvet against the Redis it runs
# on. Starts redis-server (AOF everysec, as a real setup) and korvet on free
# 127.0.0.1 ports in a temp dir, then measures in the same run, RUNS times:
#   a) raw pipelined XADD into that Redis (redis-benchmark) of the fields
#      korvet writes for a record: __ts, __key and the value, the ceiling;
#   b) korvet produce of those records (4-byte key, SIZE-4 byte value) with
#      franz-go, 1 partition, and franz-go consume of them;
#   c) the same with kcat (librdkafka): kcat -P, then kcat -C -e;
# then once: franz-go produce and consume with 8 partitions, and produce at
# a moderate rate (latency). For each korvet run it prints the CPU time of
# korvet, redis-server and the client, records per Produce request and
# Redis commands per record. The table gives the median of the RUNS runs.
# Targets: produce/raw >= 0.85 (both clients), consume/produce >= 2
# (franz-go), >= 1 (kcat).
#
#   scripts/bench-produce.sh
#
# Environment: RECORDS (default 1000000), SIZE (100: key + value bytes),
# PRODUCERS (1), XADD_N (300000), LATENCY_RATE (20000: records/s of a 3 s
# run at a moderate load, for latency without client-side queueing), RUNS
# (3), KCAT (1: also kcat; 0: franz-go only), BIG_BUFFER (50000: franz-go's
# MaxBufferedRecords of a second franz-go row; its default is 10000),
# KORVET_BIN (skip the build).
set -euo pipefail

# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

RECORDS=${RECORDS:-1000000}
SIZE=${SIZE:-100}
PRODUCERS=${PRODUCERS:-1}
XADD_N=${XADD_N:-300000}
LATENCY_RATE=${LATENCY_RATE:-20000}
RUNS=${RUNS:-3}
KCAT=${KCAT:-1}
BIG_BUFFER=${BIG_BUFFER:-50000}
# Every record carries this key: korvet stores __ts, __key and __value.
KEY=k001
VSIZE=$((SIZE - ${#KEY}))
((VSIZE >= 0)) || die "SIZE must be at least ${#KEY} (the key)"

need_cmd redis-server redis-server
need_cmd redis-benchmark redis-tools
need_cmd redis-cli redis-tools
need_cmd curl curl
[[ $KCAT == 0 ]] || need_cmd kcat kcat

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
echo "$(nproc) CPUs; $RECORDS records of $SIZE B ($KEY key + $VSIZE B value) per korvet run, $PRODUCERS franz-go producer client(s), $RUNS runs"

# result FILE KEY: the value of KEY in FILE's RESULT line.
result() { sed -n "s/^RESULT .*\b$2=\([^ ]*\).*/\1/p" "$1" | tail -n 1; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
mb() { awk -v r="$1" -v s="$SIZE" 'BEGIN { printf "%.1f", r * s / 1e6 }'; }
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
# ticks PID: CPU time (utime+stime) of a process, in clock ticks.
ticks() { awk '{ sub(/.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"; }
metric() { { curl -fsS "http://127.0.0.1:$HTTP_PORT/metrics" || true; } | awk -v m="$1" '$1 == m { print $2 }'; }
redis_cmds() { redis-cli -p "$REDIS_PORT" INFO stats | tr -d '\r' | sed -n 's/^total_commands_processed://p'; }
PRODUCE_REQS='korvet_kafka_requests_total{api="Produce"}'

# timed NAME CMD...: runs CMD (its stdout to $TMP/NAME.out), sets wall to
# its seconds and prints a line of what korvet, redis-server and the
# client used while it ran.
timed() {
	local name=$1 k0 r0 q0 c0 k1 r1 q1 c1 t cu cs
	shift
	k0=$(ticks "$KORVET_PID") r0=$(ticks "$REDIS_PID") q0=$(metric "$PRODUCE_REQS") c0=$(redis_cmds)
	t=$( { TIMEFORMAT='%R %U %S'; time "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"; } 2>&1) ||
		{ cat "$TMP/$name.out" "$TMP/$name.err"; die "$name failed"; }
	k1=$(ticks "$KORVET_PID") r1=$(ticks "$REDIS_PID") q1=$(metric "$PRODUCE_REQS") c1=$(redis_cmds)
	read -r wall cu cs <<<"$t"
	awk -v n="$name" -v w="$wall" -v cu="$cu" -v cs="$cs" -v k=$((k1 - k0)) -v r=$((r1 - r0)) \
		-v q="$(awk -v a="$q0" -v b="$q1" 'BEGIN { print b - a }')" -v c=$((c1 - c0)) -v n_rec="$RECORDS" 'BEGIN {
		printf "CPU %s: %.2f s wall; korvet %.2f s, redis %.2f s, client %.2f s", n, w, k / 100, r / 100, cu + cs
		if (q > 0) printf "; %d Produce requests (%.0f records each)", q, n_rec / q
		printf "; %d Redis commands (%.3f per record)\n", c, c / n_rec
	}' | tee -a "$TMP/cpu.txt"
}

value=$(head -c "$VSIZE" /dev/zero | tr '\0' 'x')
if [[ $KCAT != 0 ]]; then
	# kcat's input: one "key:value" line per record.
	awk -v n="$RECORDS" -v k="$KEY" -v v="$VSIZE" 'BEGIN {
		s = sprintf("%*s", v, ""); gsub(/ /, "a", s)
		for (i = 0; i < n; i++) print k ":" s
	}' >"$TMP/kcat.in"
fi

raws=() fps=() fcs=() kps=() kcs=() rf=() rk=() fbs=() rb=()
for run in $(seq "$RUNS"); do
	echo
	echo "== run $run: raw XADD: redis-benchmark -n $XADD_N -c 50 -P 16 XADD benchstream * __ts <13 B> __key $KEY __value <$VSIZE B>"
	redis-benchmark -h 127.0.0.1 -p "$REDIS_PORT" -n "$XADD_N" -c 50 -P 16 -q \
		XADD benchstream '*' __ts 1700000000000 __key "$KEY" __value "$value" 2>&1 |
		tr '\r' '\n' | grep 'requests per second' | tail -n 1 | tee "$TMP/xadd.txt"
	raw=$(sed -n 's/.*: \([0-9.]*\) requests per second.*/\1/p' "$TMP/xadd.txt")
	[[ -n $raw ]] || die "could not read redis-benchmark's requests per second"
	raws+=("${raw%.*}")
	# Leave Redis as it was for korvet (the stream would only take memory).
	redis-cli -p "$REDIS_PORT" DEL benchstream >/dev/null

	echo "== run $run: korvet produce with franz-go, topic fr-$run, 1 partition"
	timed "fr-$run.produce" "$TMP/benchproduce" -mode produce -brokers "$B" -topic "fr-$run" -partitions 1 \
		-records "$RECORDS" -size "$VSIZE" -key "$KEY" -producers "$PRODUCERS"
	cat "$TMP/fr-$run.produce.out"
	timed "fr-$run.consume" "$TMP/benchproduce" -mode consume -brokers "$B" -topic "fr-$run" -records "$RECORDS"
	cat "$TMP/fr-$run.consume.out"
	p=$(result "$TMP/fr-$run.produce.out" rps) c=$(result "$TMP/fr-$run.consume.out" rps)
	fps+=("$p") fcs+=("$c") rf+=("$(ratio "$p" "${raw%.*}")")

	# franz-go buffers at most 10,000 records per client by default: with
	# them all in flight, the rate is 10,000 / the time one takes through
	# korvet and Redis (Little's law). The same with BIG_BUFFER of them.
	echo "== run $run: korvet produce with franz-go, $BIG_BUFFER records buffered, topic fb-$run, 1 partition"
	timed "fb-$run.produce" "$TMP/benchproduce" -mode produce -brokers "$B" -topic "fb-$run" -partitions 1 \
		-records "$RECORDS" -size "$VSIZE" -key "$KEY" -producers "$PRODUCERS" -max-buffered "$BIG_BUFFER"
	cat "$TMP/fb-$run.produce.out"
	p=$(result "$TMP/fb-$run.produce.out" rps)
	fbs+=("$p") rb+=("$(ratio "$p" "${raw%.*}")")

	if [[ $KCAT != 0 ]]; then
		echo "== run $run: korvet produce with kcat, topic kc-$run, 1 partition"
		"$TMP/benchproduce" -mode create -brokers "$B" -topic "kc-$run" -partitions 1
		timed "kc-$run.produce" kcat -P -b "$B" -t "kc-$run" -K: -X acks=all -X linger.ms=5 \
			-X batch.num.messages=10000 -X queue.buffering.max.messages=1000000 -l "$TMP/kcat.in"
		p=$(awk -v n="$RECORDS" -v w="$wall" 'BEGIN { printf "%.0f", n / w }')
		echo "kcat produced $RECORDS records in $wall s: $p records/s"
		timed "kc-$run.consume" kcat -C -b "$B" -t "kc-$run" -o beginning -e -q -f '%o\n'
		n=$(wc -l <"$TMP/kc-$run.consume.out")
		[[ $n == "$RECORDS" ]] || die "kcat consumed $n records, not $RECORDS"
		c=$(awk -v n="$RECORDS" -v w="$wall" 'BEGIN { printf "%.0f", n / w }')
		echo "kcat consumed $n records in $wall s: $c records/s"
		kps+=("$p") kcs+=("$c") rk+=("$(ratio "$p" "${raw%.*}")")
	fi
done

echo
echo "== korvet produce and consume with franz-go: topic bench-8p, 8 partitions"
"$TMP/benchproduce" -mode produce -brokers "$B" -topic bench-8p -partitions 8 \
	-records "$RECORDS" -size "$VSIZE" -key "$KEY" -producers "$PRODUCERS" | tee "$TMP/bench-8p.produce"
"$TMP/benchproduce" -mode consume -brokers "$B" -topic bench-8p -records "$RECORDS" | tee "$TMP/bench-8p.consume"
echo
echo "== korvet produce at $LATENCY_RATE records/s for 3 s (latency at a moderate load), 1 partition"
"$TMP/benchproduce" -mode produce -brokers "$B" -topic bench-lat -partitions 1 \
	-records $((LATENCY_RATE * 3)) -size "$VSIZE" -key "$KEY" -rate "$LATENCY_RATE" | tee "$TMP/bench-lat.produce"

p8=$(result "$TMP/bench-8p.produce" rps)
c8=$(result "$TMP/bench-8p.consume" rps)
[[ -n $p8 && -n $c8 ]] || die "missing results"

if grep -E 'level=(ERROR|WARN)' "$TMP/korvet/korvet.log" >"$TMP/warn.txt"; then
	echo
	echo "korvet logged warnings or errors during the run:"
	head -n 20 "$TMP/warn.txt"
fi

raw=$(median "${raws[@]}") p1=$(median "${fps[@]}") c1=$(median "${fcs[@]}")
echo
echo "== results ($RECORDS records of $SIZE B; medians of $RUNS runs; $(nproc) CPUs shared by redis-server, korvet and the client)"
printf '%-38s %12s %7s %30s\n' "measure" "records/s" "MB/s" "note"
printf '%-38s %12s %7s %30s\n' "raw XADD (redis-benchmark -P 16)" "$raw" "$(mb "$raw")" "runs: ${raws[*]}"
printf '%-38s %12s %7s %30s\n' "franz-go produce, 1 partition" "$p1" "$(mb "$p1")" "runs: ${fps[*]}"
printf '%-38s %12s %7s %30s\n' "franz-go consume, 1 partition" "$c1" "$(mb "$c1")" "runs: ${fcs[*]}"
if [[ $KCAT != 0 ]]; then
	kp=$(median "${kps[@]}") kc=$(median "${kcs[@]}")
	printf '%-38s %12s %7s %30s\n' "kcat produce, 1 partition" "$kp" "$(mb "$kp")" "runs: ${kps[*]}"
	printf '%-38s %12s %7s %30s\n' "kcat consume, 1 partition" "$kc" "$(mb "$kc")" "runs: ${kcs[*]}"
fi
printf '%-38s %12s %7s %30s\n' "franz-go produce, 8 partitions" "$p8" "$(mb "$p8")" \
	"p50 $(result "$TMP/bench-8p.produce" p50_ms) p99 $(result "$TMP/bench-8p.produce" p99_ms) ms"
printf '%-38s %12s %7s %30s\n' "franz-go consume, 8 partitions" "$c8" "$(mb "$c8")" "vs produce $(ratio "$c8" "$p8")"
printf '%-38s %12s %7s %30s\n' "franz-go produce, 1p, rate-limited" "$(result "$TMP/bench-lat.produce" rps)" \
	"$(mb "$(result "$TMP/bench-lat.produce" rps)")" \
	"p50 $(result "$TMP/bench-lat.produce" p50_ms) p99 $(result "$TMP/bench-lat.produce" p99_ms) ms"
printf '%-38s %s\n' "franz-go produce / raw XADD, 1p" "$(median "${rf[@]}") (runs: ${rf[*]}; target >= 0.85)"
printf '%-38s %s\n' "franz-go ($BIG_BUFFER buffered) / raw XADD" "$(median "${rb[@]}") (runs: ${rb[*]}; produce $(median "${fbs[@]}") records/s)"
printf '%-38s %s\n' "franz-go consume / produce, 1p" "$(ratio "$c1" "$p1") (target >= 2)"
if [[ $KCAT != 0 ]]; then
	printf '%-38s %s\n' "kcat produce / raw XADD, 1p" "$(median "${rk[@]}") (runs: ${rk[*]}; target >= 0.85)"
	printf '%-38s %s\n' "kcat consume / produce, 1p" "$(ratio "$kc" "$kp") (target >= 1)"
fi
echo "CPU time per korvet run (korvet, redis-server, the client):"
cat "$TMP/cpu.txt"
echo "(took $((SECONDS - started))s)"
