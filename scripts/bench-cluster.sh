#!/usr/bin/env bash
# Redis Cluster benchmark (not a test, not in CI): one korvet build, one
# run, produce (franz-go, acks=all, idempotent) against
#   a) 1 shard: ONE redis-server in cluster mode serving all 16384 slots
#      (the same cluster client path as b, so the ratio is the sharding);
#   b) 3 shards: 3 masters, no replicas, the same load;
#   c) 3 masters + 3 replicas with [redis] wait_replicas = 0, and = 1
#      (every acks=all append round waits for one replica's ack), the
#      same load; two korvets on the one cluster, in two keyspaces.
# All clusters and korvets run side by side; the cases take turns, ROUNDS
# times (a b c0 c1, a b c0 c1, ...), so that a burst of other load on the
# box hits all of them alike. For each case: records/s (median and range
# over the rounds) and latency; CPU seconds of its korvet, of its
# redis-servers (/proc/PID/stat utime+stime over the measured window) and
# of the producer; how busy the box's CPUs were; used_memory and
# used_memory_dataset growth of the masters per record (bytes per record
# in Redis) and of their AOF files; the EXEC and WAIT commands the
# masters ran. Each figure is
# printed next to its reference measured in the same run.
#
#   scripts/bench-cluster.sh
#
# Environment: RECORDS (default 200000 per case and round), SIZE (100),
# PRODUCERS (3 client connections), PARTITIONS (12), ROUNDS (3),
# KORVET_BIN (skip the build), KEEP_TMP=1 (keep logs and data).
set -euo pipefail

# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

RECORDS=${RECORDS:-200000}
SIZE=${SIZE:-100}
PRODUCERS=${PRODUCERS:-3}
PARTITIONS=${PARTITIONS:-12}
ROUNDS=${ROUNDS:-3}

need_cmd redis-server redis-server
need_cmd redis-cli redis-tools

TMP=$(mktemp -d "${TMPDIR:-/tmp}/korvet-bench-cluster.XXXXXX")
ALL_PIDS=() # every process started, korvets first, for cleanup
cleanup() {
	local rc=$? p
	for p in "${ALL_PIDS[@]}"; do
		stop_pid "$p" 15
	done
	if [[ $rc -ne 0 ]]; then
		for p in "$TMP"/*/korvet.log; do
			[[ -f $p ]] || continue
			echo "--- tail of $p ---" >&2
			tail -n 20 "$p" >&2 || true
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
echo "building korvet and benchproduce"
BIN=${KORVET_BIN:-$TMP/bin/korvet}
[[ -n ${KORVET_BIN:-} ]] || build_korvet "$BIN"
(cd "$REPO" && go build -o "$TMP/benchproduce" ./scripts/benchproduce) || die "go build of benchproduce failed"
grep -qE '^wait_replicas *=' "$REPO/korvet.toml" || die "this checkout has no [redis] wait_replicas: no Redis Cluster support to measure"

rcli() { redis-cli -h 127.0.0.1 -p "$@"; }

# info_field PORT SECTION FIELD: one INFO field of the Redis on PORT.
info_field() {
	rcli "$1" INFO "$2" | tr -d '\r' | sed -n "s/^$3://p"
}

# start_node DIR: starts a cluster-enabled redis-server (AOF everysec, as
# korvet wants) on a free port; appends its pid and port to RPIDS/RPORTS.
start_node() {
	local dir=$1 port cport pid try
	mkdir -p "$dir"
	for try in 1 2 3; do
		free_port port
		free_port cport # the bus: port + 10000 may be taken, or past 65535
		# announce-ip: a node that never met another does not know its
		# own address and would announce an empty one. No automatic AOF
		# rewrite: the AOF's growth is then the bytes written per record.
		redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly yes --appendfsync everysec \
			--auto-aof-rewrite-percentage 0 \
			--cluster-enabled yes --cluster-port "$cport" --cluster-config-file nodes.conf --cluster-node-timeout 5000 --cluster-announce-ip 127.0.0.1 \
			--dir "$dir" --daemonize no --logfile "$dir/redis.log" </dev/null &
		pid=$!
		if wait_redis "$port" 15 "$pid"; then
			ALL_PIDS+=("$pid")
			RPIDS+=("$pid")
			RPORTS+=("$port")
			return 0
		fi
		stop_pid "$pid" 5
		grep -q 'Address already in use' "$dir/redis.log" 2>/dev/null || break
		mv "$dir/redis.log" "$dir/redis.log.$try"
	done
	die "redis-server in $dir did not come up: $(tail -n 5 "$dir/redis.log")"
}

cluster_state() { rcli "$1" CLUSTER INFO | tr -d '\r' | sed -n 's/^cluster_state://p'; }

# make_cluster NAME MASTERS REPLICAS: starts a cluster in $TMP/NAME and
# writes $TMP/NAME/nodes: "pid port role" per node, masters first.
# redis-cli --cluster create wants 3 masters at least: a 1-master cluster
# gets all slots with CLUSTER ADDSLOTSRANGE instead.
make_cluster() {
	local name=$1 m=$2 r=$3 i p n=$(($2 * (1 + $3))) addrs=() ok=0
	RPIDS=()
	RPORTS=()
	for ((i = 0; i < n; i++)); do
		start_node "$TMP/$name/redis-$i"
		addrs+=("127.0.0.1:${RPORTS[$i]}")
	done
	if ((m == 1 && r == 0)); then
		rcli "${RPORTS[0]}" CLUSTER ADDSLOTSRANGE 0 16383 >/dev/null
	else
		redis-cli --cluster create "${addrs[@]}" --cluster-replicas "$r" --cluster-yes >"$TMP/$name/create.log" 2>&1 ||
			die "redis-cli --cluster create: $(tail -n 5 "$TMP/$name/create.log")"
	fi
	for ((i = 0; i < 300; i++)); do
		ok=1
		for p in "${RPORTS[@]}"; do
			[[ $(cluster_state "$p") == ok ]] || ok=0
			if [[ $(info_field "$p" replication role) == slave && $(info_field "$p" replication master_link_status) != up ]]; then
				ok=0
			fi
		done
		((ok)) && break
		sleep 0.1
	done
	((ok)) || die "cluster $name did not reach cluster_state:ok with replicas in sync"
	# redis-cli chose which nodes are masters: ask them.
	: >"$TMP/$name/nodes"
	for role in master slave; do
		for ((i = 0; i < n; i++)); do
			[[ $(info_field "${RPORTS[$i]}" replication role) == "$role" ]] || continue
			echo "${RPIDS[$i]} ${RPORTS[$i]} ${role/slave/replica}" >>"$TMP/$name/nodes"
		done
	done
	(($(grep -c ' master$' "$TMP/$name/nodes") == m)) || die "cluster $name does not have $m masters"
}

# use_cluster NAME: RPIDS, RPORTS (masters first) and MASTERS of cluster NAME.
use_cluster() {
	local pid port role
	RPIDS=()
	RPORTS=()
	MASTERS=0
	while read -r pid port role; do
		RPIDS+=("$pid")
		RPORTS+=("$port")
		if [[ $role == master ]]; then
			MASTERS=$((MASTERS + 1))
		fi
	done <"$TMP/$1/nodes"
}

# start_korvet_for CASE CLUSTER WAIT_REPLICAS KEYSPACE: korvet in
# $TMP/CASE against cluster CLUSTER (every node a seed); writes
# $TMP/CASE/korvet.env (KORVET_PID, KAFKA_PORT, CLUSTER).
start_korvet_for() {
	local name=$1 cl=$2 wait=$3 ks=$4 dir=$TMP/$1 seeds="" p pid kport hport
	use_cluster "$cl"
	for p in "${RPORTS[@]}"; do
		seeds+="${seeds:+, }\"127.0.0.1:$p\""
	done
	mkdir -p "$dir"
	free_port kport
	free_port hport
	cat >"$dir/korvet.toml" <<TOML
data_dir = "$dir/data"
log_level = "info"
shutdown_grace = "5s"

[kafka]
listen = "127.0.0.1:$kport"

[http]
listen = "127.0.0.1:$hport"

$(registry_toml)

[redis]
url = "redis://127.0.0.1:${RPORTS[0]}/0"
keyspace = "$ks"
cluster = true
seeds = [$seeds]
wait_replicas = $wait
wait_timeout = "1s"
TOML
	"$BIN" serve --config "$dir/korvet.toml" </dev/null >"$dir/korvet.log" 2>&1 &
	pid=$!
	ALL_PIDS=("$pid" "${ALL_PIDS[@]}")
	wait_korvet "$dir/korvet.log" 60 "$pid" || die "korvet ($name) did not start: $(tail -n 20 "$dir/korvet.log")"
	echo "KORVET_PID=$pid KAFKA_PORT=$kport HTTP_PORT=$hport CLUSTER=$cl" >"$dir/korvet.env"
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

# snapshot FILE: CPU ticks of the case's korvet and of every
# redis-server of its cluster ("master:PORT", "replica:PORT").
snapshot() {
	local i role
	{
		echo "korvet $(cpu_ticks "$KORVET_PID")"
		for i in "${!RPIDS[@]}"; do
			role=master
			((i < MASTERS)) || role=replica
			echo "$role:${RPORTS[$i]} $(cpu_ticks "${RPIDS[$i]}")"
		done
	} >"$1"
}

# masters_sum SECTION FIELD: an INFO field summed over the masters
# (memory used_memory, memory used_memory_dataset).
masters_sum() {
	local i sum=0
	for ((i = 0; i < MASTERS; i++)); do
		sum=$((sum + $(info_field "${RPORTS[$i]}" "$1" "$2")))
	done
	echo "$sum"
}

# cmd_calls CMD: how many times the masters have run CMD (INFO
# commandstats; cmd_calls wait, cmd_calls exec).
cmd_calls() {
	local i sum=0 v
	for ((i = 0; i < MASTERS; i++)); do
		v=$(info_field "${RPORTS[$i]}" commandstats "cmdstat_$1")
		v=${v#calls=}
		v=${v%%,*}
		sum=$((sum + ${v:-0})) # no line until a first call
	done
	echo "$sum"
}

# box_ticks: "busy total" clock ticks of every CPU of the box (/proc/stat).
box_ticks() {
	awk '$1 == "cpu" { busy = $2 + $3 + $4 + $7 + $8 + $9; print busy, busy + $5 + $6; exit }' /proc/stat
}

# children_times FILE: bash's times into FILE: its last line is the CPU
# of this shell's children that have ended and been waited for. It runs
# in this shell (a pipe or $(...) would ask a subshell about its own).
children_times() { times >"$1"; }

# children_cpu FILE: user + system seconds from a children_times FILE.
children_cpu() {
	tail -n 1 "$1" | awk '{
		s = 0
		for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); s += a[1] * 60 + a[2] }
		printf "%.2f\n", s
	}'
}

result() { sed -n "s/^RESULT .*\b$2=\([^ ]*\).*/\1/p" "$1" | tail -n 1; }

# measure CASE ROUND: produces RECORDS records to topic CASE-ROUND
# through the case's korvet and appends one line to $TMP/CASE.rows:
#   rps p50 p99 seconds korvet_cpu redis_cpu client_cpu box_busy_ticks
#   box_total_ticks used_memory_growth dataset_growth exec wait
#   masters_cpu aof_growth
measure() {
	local name=$1 round=$2 topic=$1-$2 m0 m1 d0 d1 a0 a1 w0 e0 c0 c1 b0 b1 s out
	# shellcheck disable=SC1090
	source <(tr ' ' '\n' <"$TMP/$name/korvet.env")
	use_cluster "$CLUSTER"
	m0=$(masters_sum memory used_memory)
	d0=$(masters_sum memory used_memory_dataset)
	a0=$(masters_sum persistence aof_current_size)
	w0=$(cmd_calls wait)
	e0=$(cmd_calls exec)
	children_times "$TMP/$topic.c0"
	read -r -a b0 < <(box_ticks)
	snapshot "$TMP/$topic.cpu0"
	out=$TMP/$topic.produce
	"$TMP/benchproduce" -mode produce -brokers "127.0.0.1:$KAFKA_PORT" -topic "$topic" -partitions "$PARTITIONS" \
		-records "$RECORDS" -size "$SIZE" -producers "$PRODUCERS" >"$out" || die "produce $topic failed: $(cat "$out")"
	snapshot "$TMP/$topic.cpu1"
	read -r -a b1 < <(box_ticks)
	children_times "$TMP/$topic.c1"
	c0=$(children_cpu "$TMP/$topic.c0")
	c1=$(children_cpu "$TMP/$topic.c1")
	m1=$(masters_sum memory used_memory)
	d1=$(masters_sum memory used_memory_dataset)
	a1=$(masters_sum persistence aof_current_size)
	s=$(result "$out" seconds)
	join <(sort "$TMP/$topic.cpu0") <(sort "$TMP/$topic.cpu1") |
		awk -v tck="$TCK" '{ printf "%s %.2f\n", $1, ($3 - $2) / tck }' >"$TMP/$topic.cpu"
	echo "$(result "$out" rps) $(result "$out" p50_ms) $(result "$out" p99_ms) $s" \
		"$(awk '$1 == "korvet" { print $2 }' "$TMP/$topic.cpu")" \
		"$(awk '$1 != "korvet" { s += $2 } END { printf "%.2f", s }' "$TMP/$topic.cpu")" \
		"$(awk -v a="$c0" -v b="$c1" 'BEGIN { printf "%.2f", b - a }')" \
		"$((b1[0] - b0[0])) $((b1[1] - b0[1])) $((m1 - m0)) $((d1 - d0))" \
		"$(($(cmd_calls exec) - e0)) $(($(cmd_calls wait) - w0))" \
		"$(awk '$1 ~ /^master:/ { s += $2 } END { printf "%.2f", s }' "$TMP/$topic.cpu")" "$((a1 - a0))" >>"$TMP/$name.rows"
	printf '%-13s round %d: %7s records/s, p50 %7s ms, p99 %7s ms; CPU s: korvet %s, redis-servers %s, producer %s\n' \
		"$name" "$round" "$(result "$out" rps)" "$(result "$out" p50_ms)" "$(result "$out" p99_ms)" \
		"$(awk '$1 == "korvet" { print $2 }' "$TMP/$topic.cpu")" \
		"$(awk '$1 != "korvet" { s += $2 } END { printf "%.2f", s }' "$TMP/$topic.cpu")" \
		"$(awk -v a="$c0" -v b="$c1" 'BEGIN { printf "%.2f", b - a }')"
}

echo "$(nproc) CPUs shared by korvet, every redis-server and the producer clients (and anything else on the box)"
make_cluster one 1 0
make_cluster three 3 0
make_cluster replicated 3 1
for cl in one three replicated; do
	use_cluster "$cl"
	echo "cluster $cl: masters ${RPORTS[*]:0:$MASTERS}${RPORTS[$MASTERS]:+, replicas ${RPORTS[*]:$MASTERS}}"
done
start_korvet_for one-shard one 0 korvet
start_korvet_for three-shards three 0 korvet
start_korvet_for wait-0 replicated 0 korvet
start_korvet_for wait-1 replicated 1 korvetw
CASES=(one-shard three-shards wait-0 wait-1)

echo
echo "== $ROUNDS rounds of: produce $RECORDS records of $SIZE B per case ($PARTITIONS partitions, $PRODUCERS producers, acks=all, idempotent)"
for ((round = 1; round <= ROUNDS; round++)); do
	for c in "${CASES[@]}"; do
		measure "$c" "$round"
	done
done

for c in "${CASES[@]}"; do
	if grep -E 'level=(ERROR|WARN)' "$TMP/$c/korvet.log" >"$TMP/$c/warn"; then
		echo
		echo "korvet $c logged warnings or errors (first 5):"
		head -n 5 "$TMP/$c/warn"
	fi
done

# col CASE N: column N of every round of CASE, one per line.
col() { awk -v n="$2" '{ print $n }' "$TMP/$1.rows"; }
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
sum() { awk '{ s += $1 } END { printf "%.2f", s }'; }
# fig CASE WHAT: the figure WHAT of CASE over its rounds.
fig() {
	local c=$1
	case $2 in
	rps) col "$c" 1 | median ;;
	range) printf '%s-%s' "$(col "$c" 1 | sort -g | head -n 1)" "$(col "$c" 1 | sort -g | tail -n 1)" ;;
	lat) printf '%s / %s' "$(col "$c" 2 | median)" "$(col "$c" 3 | median)" ;;
	korvet) col "$c" 5 | sum ;;
	redis) col "$c" 6 | sum ;;
	masters) col "$c" 14 | sum ;;
	client) col "$c" 7 | sum ;;
	busy) awk '{ b += $8; t += $9 } END { printf "%.0f", (t > 0 ? 100 * b / t : 0) }' "$TMP/$c.rows" ;;
	per-korvet) awk -v n="$RECORDS" '{ r += n; c += $5 } END { printf "%.0f", (c > 0 ? r / c : 0) }' "$TMP/$c.rows" ;;
	per-redis) awk -v n="$RECORDS" '{ r += n; c += $6 } END { printf "%.0f", (c > 0 ? r / c : 0) }' "$TMP/$c.rows" ;;
	per-master) awk -v n="$RECORDS" '{ r += n; c += $14 } END { printf "%.0f", (c > 0 ? r / c : 0) }' "$TMP/$c.rows" ;;
	aof) awk -v n="$RECORDS" '{ r += n; m += $15 } END { printf "%.0f", m / r }' "$TMP/$c.rows" ;;
	mem) awk -v n="$RECORDS" '{ r += n; m += $10 } END { printf "%.0f", m / r }' "$TMP/$c.rows" ;;
	dataset) awk -v n="$RECORDS" '{ r += n; m += $11 } END { printf "%.0f", m / r }' "$TMP/$c.rows" ;;
	exec) col "$c" 12 | sum | cut -d. -f1 ;;
	wait) col "$c" 13 | sum | cut -d. -f1 ;;
	esac
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
row() { printf '%-36s %15s %15s %6s\n' "$@"; }
# table A B: the rows comparing case A with case B.
table() {
	local a=$1 b=$2
	row "produce records/s (median)" "$(fig "$a" rps)" "$(fig "$b" rps)" "$(ratio "$(fig "$b" rps)" "$(fig "$a" rps)")"
	row "  range over the rounds" "$(fig "$a" range)" "$(fig "$b" range)" ""
	row "latency p50 / p99 ms (median)" "$(fig "$a" lat)" "$(fig "$b" lat)" ""
	row "CPU s: korvet" "$(fig "$a" korvet)" "$(fig "$b" korvet)" ""
	row "CPU s: its redis-servers (sum)" "$(fig "$a" redis)" "$(fig "$b" redis)" ""
	row "  of which the masters" "$(fig "$a" masters)" "$(fig "$b" masters)" ""
	row "CPU s: producer client" "$(fig "$a" client)" "$(fig "$b" client)" ""
	row "box CPUs busy % (while measured)" "$(fig "$a" busy)" "$(fig "$b" busy)" ""
	row "records per korvet CPU-second" "$(fig "$a" per-korvet)" "$(fig "$b" per-korvet)" ""
	row "records per redis CPU-second" "$(fig "$a" per-redis)" "$(fig "$b" per-redis)" ""
	row "records per master CPU-second" "$(fig "$a" per-master)" "$(fig "$b" per-master)" ""
	row "used_memory B per record (masters)" "$(fig "$a" mem)" "$(fig "$b" mem)" ""
	row "used_memory_dataset B per record" "$(fig "$a" dataset)" "$(fig "$b" dataset)" ""
	row "AOF B written per record (masters)" "$(fig "$a" aof)" "$(fig "$b" aof)" ""
	row "EXEC on the masters (append rounds)" "$(fig "$a" exec)" "$(fig "$b" exec)" ""
	row "WAIT on the masters" "$(fig "$a" wait)" "$(fig "$b" wait)" ""
}

echo
echo "== results ($ROUNDS rounds x $RECORDS records of $SIZE B per case, $PARTITIONS partitions, $PRODUCERS producers, acks=all, idempotent; $(nproc) CPUs)"
row "measure" "1 shard" "3 shards" "3/1"
table one-shard three-shards
echo "(1 shard: one redis-server in cluster mode serving all 16384 slots, reached through the same cluster client)"
echo
row "3 masters + 3 replicas" "wait_replicas=0" "wait_replicas=1" "1/0"
table wait-0 wait-1
echo
b3=$(fig three-shards busy)
if ((b3 >= 75)); then
	echo "CPU-bound: the box's $(nproc) CPUs were ${b3}% busy while the 3 shards were measured (korvet, the redis-servers"
	echo "and the producer share them), so the 3/1 ratio measures this box's cores, not what 3 shards on their own"
	echo "machines give."
else
	echo "not CPU-bound by this measure: the box's $(nproc) CPUs were only ${b3}% busy while the 3 shards were measured;"
	echo "the limit is elsewhere (round trips, batching), so the 3/1 ratio is not a CPU figure either."
fi
echo "Size from the per-CPU-second and bytes-per-record figures instead (README, Redis Cluster: sizing)."
echo "(took $((SECONDS - started))s)"
