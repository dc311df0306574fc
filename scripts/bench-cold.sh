#!/usr/bin/env bash
# Cold tier benchmark (not a test): archiving segments of 100 B records into
# Parquet files of an Iceberg table on a real S3 server (versitygw, on a
# free 127.0.0.1 port in a temp dir), then reading them back the way a cold
# fetch does (1 MiB reads from a store with an empty footer cache). Runs
# with 1 and 4 concurrent partitions and prints the figures next to
# Korvet's (S3 archiving ~32k records/s per stream, 115k/s with four
# streams, 8-vCPU cloud machine) and the target (>= 350k records/s for a
# backlog of 1M records in 4 partitions, 1 MiB segments). The records come
# from memory; `go test ./engine -run '^$' -bench ArchiveFromRedis`
# archives the same backlog from Redis streams.
#
#   scripts/bench-cold.sh
#
# Environment: RECORDS (default 1000000), SIZE (100), SEGMENT (7812
# records per segment: about 1 MiB in Redis), VERSITYGW (binary; default: on PATH or in
# $(go env GOPATH)/bin, installed with go install when missing).
set -euo pipefail

# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

RECORDS=${RECORDS:-1000000}
SIZE=${SIZE:-100}
SEGMENT=${SEGMENT:-7812}
VERSITYGW_VERSION=v1.8.0

TMP=$(mktemp -d "${TMPDIR:-/tmp}/korvet-bench-cold.XXXXXX")
VGW_PID=""
cleanup() {
	local rc=$?
	stop_pid "$VGW_PID" 10
	if [[ $rc -ne 0 && -f $TMP/versitygw.log ]]; then
		echo "--- tail of versitygw.log ---" >&2
		tail -n 20 "$TMP/versitygw.log" >&2 || true
	fi
	rm -rf "$TMP"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

started=$SECONDS
command -v go >/dev/null 2>&1 || die "go is not on PATH"
VGW=${VERSITYGW:-}
if [[ -z $VGW ]]; then
	VGW=$(command -v versitygw || true)
	[[ -n $VGW ]] || VGW="$(go env GOPATH | cut -d: -f1)/bin/versitygw"
	if [[ ! -x $VGW ]]; then
		log "installing versitygw $VERSITYGW_VERSION (about 2 minutes the first time)"
		GOFLAGS=-buildvcs=false go install "github.com/versity/versitygw/cmd/versitygw@$VERSITYGW_VERSION" ||
			die "go install versitygw failed"
	fi
fi
echo "building benchcold"
(cd "$REPO" && go build -o "$TMP/benchcold" ./scripts/benchcold) || die "go build ./scripts/benchcold failed"

mkdir -p "$TMP/s3"
for try in 1 2 3; do
	free_port S3_PORT
	"$VGW" --access bench --secret bench-secret --port "127.0.0.1:$S3_PORT" --quiet --keep-alive \
		posix "$TMP/s3" </dev/null >"$TMP/versitygw.log" 2>&1 &
	VGW_PID=$!
	for ((i = 0; i < 200; i++)); do
		port_in_use "$S3_PORT" && break
		kill -0 "$VGW_PID" 2>/dev/null || break
		sleep 0.05
	done
	port_in_use "$S3_PORT" && kill -0 "$VGW_PID" 2>/dev/null && break
	stop_pid "$VGW_PID" 5
	VGW_PID=""
	[[ $try -lt 3 ]] || die "versitygw did not start"
done
echo "versitygw ($VGW) on 127.0.0.1:$S3_PORT, objects under $TMP/s3"
echo "$(nproc) CPUs shared by versitygw and the benchmark; $RECORDS records of $SIZE B, segments of $SEGMENT records"

# result FILE PHASE KEY: KEY of the RESULT line of PHASE in FILE.
result() { sed -n "s/^RESULT phase=$2 .*\b$3=\([^ ]*\).*/\1/p" "$1" | tail -n 1; }

bench() {
	local streams=$1
	echo
	echo "== $streams stream(s)"
	"$TMP/benchcold" -endpoint "127.0.0.1:$S3_PORT" -access bench -secret bench-secret \
		-warehouse "s3://korvet-bench/run-$streams" -records "$RECORDS" -size "$SIZE" \
		-segment "$SEGMENT" -streams "$streams" | tee "$TMP/bench-$streams.txt"
}
bench 1
bench 4

a1=$(result "$TMP/bench-1.txt" archive rps)
a4=$(result "$TMP/bench-4.txt" archive rps)
r1=$(result "$TMP/bench-1.txt" read rps)
r4=$(result "$TMP/bench-4.txt" read rps)
[[ -n $a1 && -n $a4 && -n $r1 && -n $r4 ]] || die "missing results"

echo
echo "== results ($RECORDS records of $SIZE B into versitygw on 127.0.0.1; $(nproc) CPUs)"
printf '%-32s %14s %30s\n' "measure" "records/s" "reference"
printf '%-32s %14s %30s\n' "archive, 1 stream" "$a1" "Korvet ~32k/s per stream"
printf '%-32s %14s %30s\n' "archive, 4 streams" "$a4" "Korvet 115k/s (8 vCPU)"
printf '%-32s %14s %30s\n' "cold read, 1 stream" "$r1" ""
printf '%-32s %14s %30s\n' "cold read, 4 streams" "$r4" ""
verdict=$(awk -v a="$a4" 'BEGIN { print (a >= 350000) ? "met" : "NOT met" }')
printf '%-32s %14s\n' "target archive >= 350k/s" "$verdict (4 streams)"
echo "(took $((SECONDS - started))s)"
