#!/usr/bin/env bash
# Soak test (not run by CI): starts redis-server (AOF on) and korvet on free
# 127.0.0.1 ports in a temporary directory, then runs scripts/soak
# against them: steady idempotent acks=all produce, a consumer checking
# every partition's sequence numbers, and a consumer group whose members
# leave and join. korvet's resident memory is sampled every 10 s. Prints
# peak and final RSS, rates, errors and a trend check (average RSS of the
# last third against the middle third; more than 20% growth is flagged).
#
#   scripts/soak.sh                     # 10 minutes at 20k records/s
#   SOAK_SECONDS=60 SOAK_RATE=5000 scripts/soak.sh
#
# Exit status: 0 fine, 1 a record was lost, duplicated or reordered or
# korvet died, 2 memory kept growing. KEEP=1 keeps the temporary directory.
set -euo pipefail

# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

SOAK_SECONDS=${SOAK_SECONDS:-600}
SOAK_RATE=${SOAK_RATE:-20000}
SOAK_PARTITIONS=${SOAK_PARTITIONS:-4}

command -v redis-server >/dev/null 2>&1 || die "redis-server is missing (apt-get install redis-server)"
work=$(mktemp -d "${TMPDIR:-/tmp}/korvet-soak.XXXXXX")
REDIS_PID=""
KORVET_PID=""
cleanup() {
	stop_pid "$KORVET_PID" 10
	stop_pid "$REDIS_PID" 10
	if [[ -n ${KEEP:-} ]]; then
		log "kept $work"
	else
		rm -rf "$work"
	fi
}
trap cleanup EXIT

log "building korvet and the soak driver"
build_korvet "$work/korvet"
(cd "$REPO" && go build -o "$work/soak" ./scripts/soak) || die "go build soak failed"

start_redis "$work/redis" || die "redis-server did not start"
start_korvet "$work/korvet" "$work/k" "$REDIS_PORT" || die "korvet did not start"
log "redis 127.0.0.1:$REDIS_PORT (pid $REDIS_PID), korvet kafka 127.0.0.1:$KAFKA_PORT http 127.0.0.1:$HTTP_PORT (pid $KORVET_PID)"

status=0
"$work/soak" -kafka "127.0.0.1:$KAFKA_PORT" -http "http://127.0.0.1:$HTTP_PORT" -pid "$KORVET_PID" \
	-duration "${SOAK_SECONDS}s" -rate "$SOAK_RATE" -partitions "$SOAK_PARTITIONS" || status=$?

if ! kill -0 "$KORVET_PID" 2>/dev/null; then
	log "korvet died during the soak; tail of its log:"
	tail -n 40 "$work/k/korvet.log" >&2 || true
	status=1
fi
warns=$(grep -c 'level=WARN' "$work/k/korvet.log" || true)
errs=$(grep -c 'level=ERROR' "$work/k/korvet.log" || true)
echo "korvet log      $warns warnings, $errs errors"
if [[ $errs -gt 0 ]]; then
	grep 'level=ERROR' "$work/k/korvet.log" | head -n 5
fi
exit "$status"
