#!/usr/bin/env bash
# Transactional produce benchmark (not a test): in one run against one
# korvet and its Redis, franz-go produces the same records
#   a) idempotent, no transactions (the reference);
#   b) transactional, one commit per 1,000 records;
#   c) transactional, one commit per 100 records;
# each to its own topic, and prints records/s and the ratio of b) and c)
# to a). Target: b)/a) >= 0.8.
#
#   scripts/bench-txn.sh
#
# Environment: RECORDS (default 300000), SIZE (100), PARTITIONS (3),
# PRODUCERS (1), KORVET_BIN (skip the build).
set -euo pipefail

# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

RECORDS=${RECORDS:-300000}
SIZE=${SIZE:-100}
PARTITIONS=${PARTITIONS:-3}
PRODUCERS=${PRODUCERS:-1}

need_cmd redis-server redis-server

TMP=$(mktemp -d "${TMPDIR:-/tmp}/korvet-bench-txn.XXXXXX")
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
echo "korvet on $B, redis-server on 127.0.0.1:$REDIS_PORT; $(nproc) CPUs"
echo "$RECORDS records of $SIZE B, $PARTITIONS partitions, $PRODUCERS producer client(s) per run"

result() { sed -n "s/^RESULT .*\b$2=\([^ ]*\).*/\1/p" "$1" | tail -n 1; }
run() {
	local name=$1 txn=$2
	echo
	echo "== $name (records per transaction: $txn; 0 = idempotent, no transactions)"
	"$TMP/benchproduce" -mode produce -brokers "$B" -topic "bench-$name" -partitions "$PARTITIONS" \
		-records "$RECORDS" -size "$SIZE" -producers "$PRODUCERS" -txn "$txn" | tee "$TMP/$name.out"
}
run idempotent 0
run txn1000 1000
run txn100 100

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
base=$(result "$TMP/idempotent.out" rps)
t1000=$(result "$TMP/txn1000.out" rps)
t100=$(result "$TMP/txn100.out" rps)
[[ -n $base && -n $t1000 && -n $t100 ]] || die "missing results"
echo
echo "== results ($RECORDS records of $SIZE B, $PARTITIONS partitions; $(nproc) CPUs shared by redis-server, korvet and the client)"
printf '%-40s %12s %10s\n' "produce" "records/s" "ratio"
printf '%-40s %12s %10s\n' "idempotent (reference)" "$base" "1.00"
printf '%-40s %12s %10s\n' "transactional, commit per 1,000 records" "$t1000" "$(ratio "$t1000" "$base") (target >= 0.8)"
printf '%-40s %12s %10s\n' "transactional, commit per 100 records" "$t100" "$(ratio "$t100" "$base")"
echo "(took $((SECONDS - started))s)"
