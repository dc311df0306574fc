#!/usr/bin/env bash
# Several brokers benchmark (not a test, not in CI): one korvet and then
# three korvets on the same Redis, in one run.
#   a) produce and consume rate with one broker, then with three (all
#      three as seeds), the same load; the ratio three/one;
#   b) CPU seconds of each korvet and of redis-server in each step (from
#      /proc/PID/stat), since the box's cores are shared by all of them;
#   c) failover: KILLS times, SIGKILL the leader of a partition while a
#      client produces to it, time until the first record handed to the
#      client after the kill is acknowledged; the killed broker is
#      started again before the next kill. p50 and max.
# Target (issue 14): three >= one; failover within 2 x the lease.
#
#   scripts/bench-brokers.sh
#
# Environment: RECORDS (default 300000), SIZE (100), PRODUCERS (3 client
# connections), PARTITIONS (6), KILLS (10), LEASE (kafka.broker_session_timeout
# of the three, default 2s; only set when this checkout knows the key),
# KORVET_BIN (skip the build), KEEP_TMP=1 (keep logs).
set -euo pipefail

# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

RECORDS=${RECORDS:-300000}
SIZE=${SIZE:-100}
PRODUCERS=${PRODUCERS:-3}
PARTITIONS=${PARTITIONS:-6}
KILLS=${KILLS:-10}
LEASE=${LEASE:-2s}

need_cmd redis-server redis-server

TMP=$(mktemp -d "${TMPDIR:-/tmp}/korvet-bench-brokers.XXXXXX")
REDIS_PID=""
declare -A PIDS=() PORTS=()
cleanup() {
	local rc=$? n
	for n in "${!PIDS[@]}"; do
		stop_pid "${PIDS[$n]}" 15
	done
	stop_pid "$REDIS_PID" 15
	if [[ $rc -ne 0 ]]; then
		for n in "$TMP"/node-*/korvet.log; do
			[[ -f $n ]] || continue
			echo "--- tail of $n ---" >&2
			tail -n 20 "$n" >&2 || true
		done
	fi
	if [[ ${KEEP_TMP:-} == 1 ]]; then
		echo "kept $TMP" >&2
	else
		rm -rf "$TMP"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

started=$SECONDS
echo "building korvet, benchproduce and benchbrokers"
BIN=${KORVET_BIN:-$TMP/bin/korvet}
[[ -n ${KORVET_BIN:-} ]] || build_korvet "$BIN"
(cd "$REPO" && go build -o "$TMP/benchproduce" ./scripts/benchproduce && go build -o "$TMP/benchbrokers" ./scripts/benchbrokers) ||
	die "go build of the helpers failed"

# The lease key comes with several-broker support; older checkouts start
# without it.
LEASE_LINE=""
if grep -qE '^broker_session_timeout *=' "$REPO/korvet.toml"; then
	LEASE_LINE="broker_session_timeout = \"$LEASE\""
else
	log "this checkout has no kafka.broker_session_timeout: the brokers run without it"
fi

# start_broker N [LEASE_LINE]: starts node N (ports kept across restarts)
# in $TMP/node-N, waits until it logged that it started.
start_broker() {
	local n=$1 lease_line=${2:-} dir=$TMP/node-$1 kport hport
	mkdir -p "$dir"
	if [[ -z ${PORTS[$n]:-} ]]; then
		# (free_port's own locals are p and i.)
		free_port kport
		free_port hport
		PORTS[$n]="$kport $hport"
	fi
	read -r kport hport <<<"${PORTS[$n]}"
	cat >"$dir/korvet.toml" <<TOML
data_dir = "$dir/data"
log_level = "info"
shutdown_grace = "5s"

[kafka]
listen = "127.0.0.1:$kport"
node_id = $n
$lease_line

[http]
listen = "127.0.0.1:$hport"

$(registry_toml)

[redis]
url = "redis://127.0.0.1:$REDIS_PORT/0"
TOML
	local before=0
	[[ -f $dir/korvet.log ]] && before=$(grep -c 'msg="korvet started"' "$dir/korvet.log" || true)
	"$BIN" serve --config "$dir/korvet.toml" </dev/null >>"$dir/korvet.log" 2>&1 &
	PIDS[$n]=$!
	local i
	for ((i = 0; i < 600; i++)); do
		kill -0 "${PIDS[$n]}" 2>/dev/null || die "korvet node $n exited: $(tail -n 20 "$dir/korvet.log")"
		(($(grep -c 'msg="korvet started"' "$dir/korvet.log" || true) > before)) && return 0
		sleep 0.05
	done
	die "korvet node $n did not start in 30s"
}

# wait_registered: waits until Metadata lists the three brokers. A
# checkout without several-broker support never does: then it warns and
# goes on (the figures then measure three unconnected brokers).
wait_registered() {
	if [[ -n $LEASE_LINE ]]; then
		"$TMP/benchbrokers" -mode wait-brokers -brokers "$(seeds)" -n 3 -timeout 60s || die "the three brokers did not all register"
	elif ! "$TMP/benchbrokers" -mode wait-brokers -brokers "$(seeds)" -n 3 -timeout 3s 2>/dev/null; then
		log "warning: Metadata does not list three brokers (no several-broker support in this checkout)"
	fi
}

seeds() {
	local n s=""
	for n in $(printf '%s\n' "${!PIDS[@]}" | sort -n); do
		s+="${s:+,}127.0.0.1:${PORTS[$n]%% *}"
	done
	printf '%s' "$s"
}

# cpu_ticks PID: user+system clock ticks the process has used.
cpu_ticks() {
	local stat
	stat=$(cat "/proc/$1/stat") || {
		echo 0
		return
	}
	stat=${stat##*) }
	# Fields after "comm) ": state is 1, utime 12, stime 13.
	awk '{ print $12 + $13 }' <<<"$stat"
}
TCK=$(getconf CLK_TCK)

# snapshot NAME: CPU ticks of redis-server and each broker, into $TMP/cpu.NAME.
snapshot() {
	local n
	{
		echo "redis $(cpu_ticks "$REDIS_PID")"
		for n in "${!PIDS[@]}"; do
			echo "node-$n $(cpu_ticks "${PIDS[$n]}")"
		done
	} >"$TMP/cpu.$1"
}

# cpu_report FROM TO SECONDS: CPU seconds and share of one core per process.
cpu_report() {
	join <(sort "$TMP/cpu.$1") <(sort "$TMP/cpu.$2") |
		awk -v tck="$TCK" -v s="$3" '{ c = ($3 - $2) / tck; printf "%s %.1fs (%.0f%% of a core)  ", $1, c, 100 * c / s } END { print "" }'
}

result() { sed -n "s/^RESULT .*\b$2=\([^ ]*\).*/\1/p" "$1" | tail -n 1; }

# phase NAME TOPIC: produce then consume RECORDS through the running
# brokers, with the CPU picture of each step.
phase() {
	local name=$1 topic=$2 s
	echo
	echo "== $name: produce $RECORDS records of $SIZE B to $topic ($PARTITIONS partitions, $PRODUCERS producers) via $(seeds)"
	snapshot "$topic.0"
	"$TMP/benchproduce" -mode produce -brokers "$(seeds)" -topic "$topic" -partitions "$PARTITIONS" \
		-records "$RECORDS" -size "$SIZE" -producers "$PRODUCERS" | tee "$TMP/$topic.produce"
	snapshot "$topic.1"
	s=$(result "$TMP/$topic.produce" seconds)
	echo "CPU while producing ($s s): $(cpu_report "$topic.0" "$topic.1" "$s")" | tee "$TMP/$topic.cpu.produce"
	"$TMP/benchproduce" -mode consume -brokers "$(seeds)" -topic "$topic" -records "$RECORDS" | tee "$TMP/$topic.consume"
	snapshot "$topic.2"
	s=$(result "$TMP/$topic.consume" seconds)
	echo "CPU while consuming ($s s): $(cpu_report "$topic.1" "$topic.2" "$s")" | tee "$TMP/$topic.cpu.consume"
}

start_redis "$TMP/redis"
echo "redis-server on 127.0.0.1:$REDIS_PORT (AOF everysec); $(nproc) CPUs shared by redis-server, the brokers and the clients"

# --- a) one broker
start_broker 1
# Every topic exists before the three start (brokers also load topics
# from Redis at start-up, whether or not they hear of new ones).
for t in bench-three bench-failover; do
	"$TMP/benchbrokers" -mode create -brokers "$(seeds)" -topic "$t" -partitions "$PARTITIONS" || die "create $t failed"
done
phase "one broker" bench-one
stop_pid "${PIDS[1]}" 30
unset 'PIDS[1]'

# --- a) three brokers, the same load
for n in 1 2 3; do
	start_broker "$n" "$LEASE_LINE"
done
wait_registered
phase "three brokers" bench-three

# --- c) failover
echo
echo "== failover: $KILLS times SIGKILL the leader of bench-failover[0] while producing to it"
times=()
for ((k = 1; k <= KILLS; k++)); do
	leader=$("$TMP/benchbrokers" -mode leader -brokers "$(seeds)" -topic bench-failover -partition 0 -timeout 30s)
	[[ -n ${PIDS[$leader]:-} ]] || die "leader $leader is not a broker this script started"
	"$TMP/benchbrokers" -mode failover -brokers "$(seeds)" -topic bench-failover -partition 0 \
		-pid "${PIDS[$leader]}" -timeout 60s >"$TMP/failover.$k" || die "failover $k: $(cat "$TMP/failover.$k")"
	wait "${PIDS[$leader]}" 2>/dev/null || true
	ms=$(result "$TMP/failover.$k" failover_ms)
	times+=("$ms")
	echo "kill $k: node $leader, first produce after ${ms} ms"
	start_broker "$leader" "$LEASE_LINE"
	wait_registered
done
read -r p50 fmax < <(printf '%s\n' "${times[@]}" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)], v[NR] }')

for n in "${!PIDS[@]}"; do
	if grep -E 'level=(ERROR|WARN)' "$TMP/node-$n/korvet.log" >"$TMP/warn.$n"; then
		echo
		echo "node $n logged warnings or errors (first 5):"
		head -n 5 "$TMP/warn.$n"
	fi
done

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
p1=$(result "$TMP/bench-one.produce" rps)
c1=$(result "$TMP/bench-one.consume" rps)
p3=$(result "$TMP/bench-three.produce" rps)
c3=$(result "$TMP/bench-three.consume" rps)
echo
echo "== results ($RECORDS records of $SIZE B, $PARTITIONS partitions, $PRODUCERS producers; $(nproc) CPUs)"
printf '%-28s %12s %12s %8s\n' "measure" "one broker" "three" "ratio"
printf '%-28s %12s %12s %8s\n' "produce records/s" "$p1" "$p3" "$(ratio "$p3" "$p1")"
printf '%-28s %12s %12s %8s\n' "consume records/s" "$c1" "$c3" "$(ratio "$c3" "$c1")"
echo "target: three >= one (ratio >= 1.00)"
echo "CPU, one broker:    $(cat "$TMP/bench-one.cpu.produce")"
echo "                    $(cat "$TMP/bench-one.cpu.consume")"
echo "CPU, three brokers: $(cat "$TMP/bench-three.cpu.produce")"
echo "                    $(cat "$TMP/bench-three.cpu.consume")"
echo "failover over $KILLS kills: p50 ${p50} ms, max ${fmax} ms (target: within 2 x lease = 2 x $LEASE)"
echo "(took $((SECONDS - started))s)"
