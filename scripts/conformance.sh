#!/usr/bin/env bash
# Runs franz-go's own kgo integration tests against a korvet it starts:
# builds korvet from this checkout, starts redis-server and korvet on free
# 127.0.0.1 ports in a temp dir, copies franz-go (the version in go.mod)
# out of the module cache and runs `go test` in its pkg/kgo with KGO_SEEDS
# pointing at korvet. Prints a PASS/FAIL/SKIP line per test and exits
# non-zero if any selected test fails (or go test itself does).
#
#   scripts/conformance.sh [RUN_REGEX]
#
# RUN_REGEX is go test's -run pattern; the default selects the group,
# consumer, KIP-848, share group and transaction tests (kgo runs its 848
# and share paths because korvet advertises ConsumerGroupHeartbeat v1,
# ShareFetch v2 and ShareAcknowledge v2; TestTxnEtl chains transactional
# consume-transform-produce stages under every balancer). Environment:
#   SKIP_RUN          go test -skip pattern, e.g. 'TestShareGroup'
#   KGO_TEST_RECORDS  records per ETL test (default 20000)
#   TEST_TIMEOUT      go test -timeout (default 900s)
#   KORVET_BIN        use this korvet binary instead of building one
#   BROKERS           korvet brokers on the one Redis (default 1; node ids
#                     1..N, each on its own port; kgo gets all as seeds)
#   REDIS_CLUSTER=1   a Redis Cluster instead of one redis-server: 3 masters
#                     + 3 replicas (cluster-enabled, joined by redis-cli
#                     --cluster create --cluster-replicas 1), korvet with
#                     redis.cluster = true, the first master as redis.url
#                     and every node in redis.seeds. The SCRAM korvet uses
#                     the same cluster.
#   KEEP_TMP=1        keep the temp dir (korvet*.log, test.log)
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

DEFAULT_RUN='^(TestGroupETL|TestGroupSimple|TestUnknownGroupOffsetFetchPinned|TestIssue325|TestConsumeTopicRetrieval|TestConsumeTopicRetrieval_Many|TestIssue337|TestDirectPartitionPurge|TestIssue434|TestAddRemovePartitions|TestPauseIssue489|TestPauseIssueOct2023|TestIssue523|TestIssue648|TestIssue810|TestIssue865|TestHookPollStart|TestPollWaitStateNoUnderflow|TestLookbackMilli|TestIssueFetchLargerThanBrokerMaxReadBytes|TestPing|TestIssue1034|TestPooling|TestConsumeRegex|TestConsumeMaxDecompressBatchBytes|TestClient_Produce|TestClient_ProduceLargeMessages|Test848RegexBrokerResolves|TestShareGroup|TestShareGroupETL|TestShareGroupOffsetsAdmin|TestShareGroupAckOnClose|TestConsumeRegexShareSkipsInternal|TestTxnEtl)$'
RUN=${1:-$DEFAULT_RUN}

# The helpers live here rather than in a shared file so that this script
# does not move when the others do.
log() { printf '%s\n' "$*" >&2; }
die() {
	printf 'error: %s\n' "$*" >&2
	exit 1
}
port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
_ports_given=" "
# free_port VAR: sets VAR to a TCP port on 127.0.0.1 that nothing uses.
free_port() {
	local p i
	for ((i = 0; i < 500; i++)); do
		p=$((20000 + RANDOM % 12000))
		[[ $_ports_given == *" $p "* ]] && continue
		port_in_use "$p" && continue
		_ports_given+="$p "
		printf -v "$1" '%s' "$p"
		return 0
	done
	die "no free TCP port found"
}
# wait_port PORT SECONDS PID: waits for 127.0.0.1:PORT; fails if PID exits.
wait_port() {
	local i
	for ((i = 0; i < $2 * 20; i++)); do
		port_in_use "$1" && return 0
		kill -0 "$3" 2>/dev/null || return 1
		sleep 0.05
	done
	return 1
}
# stop_pid PID SECONDS: SIGTERM, then SIGKILL after SECONDS. Only for
# processes this script started.
stop_pid() {
	local pid=$1 i
	[[ -n $pid ]] || return 0
	kill -TERM "$pid" 2>/dev/null || true
	for ((i = 0; i < $2 * 20; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.05
	done
	kill -KILL "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
}

command -v go >/dev/null 2>&1 || die "go is not on PATH"
command -v redis-server >/dev/null 2>&1 || die "redis-server is missing (apt-get install redis-server)"

BROKERS=${BROKERS:-1}
[[ $BROKERS =~ ^[1-9]$ ]] || die "BROKERS must be 1 to 9, not '$BROKERS'"

TMP=$(mktemp -d "${TMPDIR:-/tmp}/korvet-conformance.XXXXXX")
REDIS_PIDS=()
KORVET_PID=""
KORVET_PIDS=()
cleanup() {
	local rc=$? pid f
	for pid in "${KORVET_PIDS[@]}"; do
		stop_pid "$pid" 15
	done
	stop_pid "$KORVET_PID" 15
	for pid in "${REDIS_PIDS[@]}"; do
		stop_pid "$pid" 10
	done
	if [[ $rc -ne 0 ]]; then
		for f in "$TMP"/korvet*.log "$TMP"/cluster-create.log; do
			[[ -f $f ]] || continue
			echo "--- tail of $(basename "$f") ---" >&2
			tail -n 30 "$f" >&2 || true
		done
	fi
	if [[ ${KEEP_TMP:-} == 1 ]]; then
		echo "kept $TMP" >&2
	else
		chmod -R u+w "$TMP" 2>/dev/null || true
		rm -rf "$TMP"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

BIN=${KORVET_BIN:-}
if [[ -z $BIN ]]; then
	log "building korvet"
	BIN=$TMP/korvet
	(cd "$REPO" && go build -o "$BIN" .) || die "go build failed"
fi

# franz-go at the version korvet itself uses.
FRANZ_VERSION=$(cd "$REPO" && go list -m -f '{{.Version}}' github.com/twmb/franz-go)
log "fetching franz-go $FRANZ_VERSION"
(cd "$REPO" && go mod download "github.com/twmb/franz-go@$FRANZ_VERSION") || die "go mod download failed"
SRC="$(go env GOMODCACHE)/github.com/twmb/franz-go@$FRANZ_VERSION"
[[ -d $SRC/pkg/kgo ]] || die "franz-go source not found at $SRC"
cp -r "$SRC" "$TMP/franz"
chmod -R u+w "$TMP/franz"

# start_redis DIR PORT [ARGS...]: a redis-server on 127.0.0.1:PORT whose
# pid is appended to REDIS_PIDS.
start_redis() {
	local dir=$1 port=$2
	shift 2
	mkdir -p "$dir"
	redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no \
		--dir "$dir" --logfile "$dir/redis.log" "$@" </dev/null &
	REDIS_PIDS+=($!)
	wait_port "$port" 15 "$!" || die "redis-server on $port did not start: $(tail -n 5 "$dir/redis.log")"
}

# cluster_ok PORT: the node on PORT reports cluster_state:ok and knows all
# 16384 slots as assigned.
cluster_ok() {
	local info
	info=$(redis-cli -h 127.0.0.1 -p "$1" CLUSTER INFO 2>/dev/null | tr -d '\r') || return 1
	[[ $info == *"cluster_state:ok"* && $info == *"cluster_slots_assigned:16384"* ]]
}

REDIS_CLUSTER=${REDIS_CLUSTER:-0}
[[ $REDIS_CLUSTER == 0 || $REDIS_CLUSTER == 1 ]] || die "REDIS_CLUSTER must be 0 or 1, not '$REDIS_CLUSTER'"
REDIS_SEEDS=""
if [[ $REDIS_CLUSTER == 1 ]]; then
	command -v redis-cli >/dev/null 2>&1 || die "redis-cli is missing (apt-get install redis-tools)"
	grep -qE '^cluster *=' "$REPO/korvet.toml" || die "this korvet has no redis.cluster key yet (korvet.toml)"
	nodes=()
	for ((i = 0; i < 6; i++)); do
		# The cluster bus gets a free port of its own: the default, port +
		# 10000, can land in the kernel's range for outgoing connections
		# (32768 up), where a client socket may hold it.
		free_port port
		free_port cport
		start_redis "$TMP/redis-$i" "$port" --cluster-enabled yes --cluster-port "$cport" \
			--cluster-config-file nodes.conf --cluster-node-timeout 1000
		nodes+=("127.0.0.1:$port")
		REDIS_SEEDS+="${REDIS_SEEDS:+, }\"127.0.0.1:$port\""
	done
	# The first three become masters, the others their replicas.
	redis-cli --cluster create "${nodes[@]}" --cluster-replicas 1 --cluster-yes >"$TMP/cluster-create.log" 2>&1 ||
		die "redis-cli --cluster create failed: $(tail -n 20 "$TMP/cluster-create.log")"
	for n in "${nodes[@]}"; do
		for ((i = 0; i < 300; i++)); do
			cluster_ok "${n#*:}" && break
			sleep 0.1
		done
		cluster_ok "${n#*:}" || die "Redis Cluster node $n not ok after 30s"
	done
	REDIS_PORT=${nodes[0]#*:}
	REDIS_DESC="a Redis Cluster of 3 masters + 3 replicas (${nodes[*]})"
else
	free_port REDIS_PORT
	start_redis "$TMP/redis" "$REDIS_PORT"
	REDIS_DESC="redis-server on 127.0.0.1:$REDIS_PORT"
fi
# redis_toml: the [redis] keys every korvet here gets besides keyspace.
redis_toml() {
	echo "url = \"redis://127.0.0.1:$REDIS_PORT/0\""
	if [[ $REDIS_CLUSTER == 1 ]]; then
		echo "cluster = true"
		echo "seeds = [$REDIS_SEEDS]"
	fi
}

# BROKERS korvets on the one Redis and keyspace, node ids 1..BROKERS.
SEEDS=""
for ((n = 1; n <= BROKERS; n++)); do
	free_port KAFKA_PORT
	mkdir -p "$TMP/data-$n"
	cat >"$TMP/korvet-$n.toml" <<EOF
data_dir = "$TMP/data-$n"
log_level = "info"
shutdown_grace = "5s"

[kafka]
listen = "127.0.0.1:$KAFKA_PORT"
node_id = $n

[http]
listen = "127.0.0.1:0"

[schema_registry]
listen = "127.0.0.1:0"

[redis]
$(redis_toml)
EOF
	"$BIN" serve --config "$TMP/korvet-$n.toml" </dev/null >"$TMP/korvet-$n.log" 2>&1 &
	pid=$!
	KORVET_PIDS+=("$pid")
	wait_port "$KAFKA_PORT" 20 "$pid" || die "korvet node $n did not start: $(tail -n 20 "$TMP/korvet-$n.log")"
	SEEDS+="${SEEDS:+,}127.0.0.1:$KAFKA_PORT"
done
log "$REDIS_DESC, $BROKERS korvet broker(s) on $SEEDS"
log "running kgo tests matching $RUN"

skip=()
[[ -n ${SKIP_RUN:-} ]] && skip=(-skip "$SKIP_RUN")
set +e
(
	cd "$TMP/franz/pkg/kgo" &&
		KGO_SEEDS=$SEEDS KGO_TEST_RF=1 \
			KGO_TEST_RECORDS=${KGO_TEST_RECORDS:-20000} KGO_LOG_LEVEL=none \
			go test -count=1 -v -timeout "${TEST_TIMEOUT:-900s}" -run "$RUN" "${skip[@]}" .
) >"$TMP/test.log" 2>&1
rc=$?
set -e

# One line per test and subtest, in the order go test finished them.
echo
echo "=== kgo $FRANZ_VERSION tests against $BROKERS korvet broker(s) on $REDIS_DESC ==="
grep -E '^ *--- (PASS|FAIL|SKIP): ' "$TMP/test.log" |
	sed -E 's/^( *)--- (PASS|FAIL|SKIP): ([^ ]+) \(([^)]*)\).*/\2 \1\3 (\4)/' || true
pass=$(grep -cE '^--- PASS: ' "$TMP/test.log" || true)
fail=$(grep -cE '^--- FAIL: ' "$TMP/test.log" || true)
skip=$(grep -cE '^--- SKIP: ' "$TMP/test.log" || true)
echo "top-level tests: $pass passed, $fail failed, $skip skipped (go test exit $rc)"

if [[ $fail -gt 0 || $rc -ne 0 ]]; then
	echo
	echo "--- failure output ---"
	grep -E -B1 -A3 '^\s+[A-Za-z_0-9]+_test\.go:[0-9]+:|^panic:|^FAIL|test timed out' "$TMP/test.log" | head -n 200 || true
	exit 1
fi
echo "all selected kgo tests passed"

# SCRAM: kgo's SCRAM tests want a separate broker address that requires
# SASL. A second korvet on the same Redis (its own keyspace) serves it,
# with a user made by `korvet user add`, for both SCRAM-SHA-256 and -512.
if [[ ${SCRAM:-1} == 1 ]]; then
	free_port SCRAM_PORT
	mkdir -p "$TMP/data-scram"
	cat >"$TMP/scram.toml" <<TOML
data_dir = "$TMP/data-scram"
shutdown_grace = "5s"

[kafka]
listen = "127.0.0.1:$SCRAM_PORT"
auth = "sasl"
sasl_mechanisms = ["SCRAM-SHA-256", "SCRAM-SHA-512"]

[http]
listen = "127.0.0.1:0"

[schema_registry]
listen = "127.0.0.1:0"

[redis]
$(redis_toml)
keyspace = "scram"
TOML
	printf 'scram-secret\n' | "$BIN" user add --config "$TMP/scram.toml" kgo >/dev/null || die "korvet user add failed"
	for pid in "${KORVET_PIDS[@]}"; do
		stop_pid "$pid" 15
	done
	KORVET_PIDS=()
	"$BIN" serve --config "$TMP/scram.toml" </dev/null >"$TMP/korvet.log" 2>&1 &
	KORVET_PID=$!
	wait_port "$SCRAM_PORT" 20 "$KORVET_PID" || die "SCRAM korvet did not start: $(tail -n 20 "$TMP/korvet.log")"
	echo
	echo "=== kgo SCRAM tests against a korvet requiring SASL ==="
	for mech in 256 512; do
		set +e
		(
			cd "$TMP/franz/pkg/kgo" &&
				KGO_SEEDS=127.0.0.1:$SCRAM_PORT KGO_TEST_SCRAM_SEEDS=127.0.0.1:$SCRAM_PORT KGO_TEST_SCRAM=kgo:scram-secret:$mech \
					KGO_LOG_LEVEL=none go test -count=1 -v -timeout 120s -run '^(TestSCRAMAuth|TestSCRAMAuthBadCredentials)$' .
		) >"$TMP/scram.log" 2>&1
		rc=$?
		set -e
		sed -nE "s/^--- (PASS|FAIL|SKIP): ([^ ]+) \(([^)]*)\).*/\1 \2 SCRAM-SHA-$mech (\3)/p" "$TMP/scram.log"
		if [[ $rc -ne 0 ]] || ! grep -q '^--- PASS: TestSCRAMAuth ' "$TMP/scram.log"; then
			tail -n 30 "$TMP/scram.log" >&2
			die "kgo SCRAM-SHA-$mech tests failed"
		fi
	done
	echo "SCRAM tests passed"
fi
