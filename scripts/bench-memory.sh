#!/usr/bin/env bash
# Redis memory benchmark (not a test): what a record takes in korvet's
# Redis. Starts redis-server (AOF everysec) and korvet on free 127.0.0.1
# ports in a temp dir, then for each workload
#   (a) 1 KiB compact JSON, (b) ~700 B JSON with spaces (Python json.dumps),
#   (c) 256 B random binary, (d) 100 B log lines, (e) ~1 KiB IoT JSON
#   (nested metadata, ~20 varying figures)
# and each storage mode (korvet.storage.compression=none: raw, or flattened
# JSON where korvet can; =zstd: compressed at rest, measured once the
# topic's dictionary is trained) produces RECORDS records with franz-go and
# prints, next to the value size, Redis bytes per record (used_memory delta,
# exact MEMORY USAGE delta, and korvet's own sampled figure) and the
# produce and fetch rates with compression on vs off, from the same run.
# Targets: JSON with zstd at rest <= 0.3x the value size; produce rate with
# zstd >= 0.8x without. A korvet without korvet.storage.compression prints
# "n/a" for the zstd rows.
#
#   scripts/bench-memory.sh
#
# Environment: RECORDS (default 100000), WARMUP (3000, produced before the
# measured records: dictionary training), WORKLOADS (a,b,c,d,e), KCAT (1:
# also time kcat producing the text workloads, when kcat is installed),
# KORVET_BIN (skip the build).
set -euo pipefail

# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

RECORDS=${RECORDS:-100000}
WARMUP=${WARMUP:-3000}
WORKLOADS=${WORKLOADS:-a,b,c,d,e}
KCAT=${KCAT:-1}

need_cmd redis-server redis-server

TMP=$(mktemp -d "${TMPDIR:-/tmp}/korvet-bench-memory.XXXXXX")
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
echo "building korvet and benchmemory"
BIN=${KORVET_BIN:-$TMP/bin/korvet}
[[ -n ${KORVET_BIN:-} ]] || build_korvet "$BIN"
(cd "$REPO" && go build -o "$TMP/benchmemory" ./scripts/benchmemory) || die "go build ./scripts/benchmemory failed"

start_redis "$TMP/redis"
# Sample every second, so that korvet's own figure is there right after
# each run.
KORVET_REDIS_TOML='memory_sample_interval = "1s"' start_korvet "$BIN" "$TMP/korvet" "$REDIS_PORT"
echo "redis-server $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/') on 127.0.0.1:$REDIS_PORT, korvet on 127.0.0.1:$KAFKA_PORT"
echo "$(nproc) CPUs; $RECORDS records per workload and mode (after $WARMUP warm-up records)"

kcat_arg=()
if [[ $KCAT == 1 ]] && command -v kcat >/dev/null 2>&1; then
	kcat_arg=(-kcat "$(command -v kcat)")
fi
"$TMP/benchmemory" -brokers "127.0.0.1:$KAFKA_PORT" -redis "127.0.0.1:$REDIS_PORT" -http "127.0.0.1:$HTTP_PORT" \
	-records "$RECORDS" -warmup "$WARMUP" -workloads "$WORKLOADS" "${kcat_arg[@]}"

if grep -E 'level=(ERROR|WARN)' "$TMP/korvet/korvet.log" >"$TMP/warn.txt"; then
	echo
	echo "korvet logged warnings or errors during the run:"
	head -n 20 "$TMP/warn.txt"
fi
echo "(took $((SECONDS - started))s)"
