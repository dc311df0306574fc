#!/usr/bin/env bash
# Smoke test with kcat (librdkafka): starts redis-server and korvet (built
# from this checkout) on free 127.0.0.1 ports in a temp dir, then checks
# metadata, keyed produce/consume, headers, and every compression codec.
# Exits 1 on the first mismatch, 0 when all passed.
#
#   scripts/kcat-smoke.sh            (KORVET_BIN=path skips the build)
set -euo pipefail

# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

command -v kcat >/dev/null 2>&1 || die "kcat is missing (apt-get install kcat)"
command -v redis-server >/dev/null 2>&1 || die "redis-server is missing (apt-get install redis-server)"

TMP=$(mktemp -d "${TMPDIR:-/tmp}/korvet-kcat.XXXXXX")
REDIS_PID=""
KORVET_PID=""
cleanup() {
	local rc=$?
	stop_pid "$KORVET_PID" 10
	stop_pid "$REDIS_PID" 10
	if [[ $rc -ne 0 && $rc -ne 3 ]]; then
		echo "--- tail of korvet.log ---" >&2
		tail -n 40 "$TMP/korvet/korvet.log" >&2 2>/dev/null || true
	fi
	rm -rf "$TMP"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

BIN=${KORVET_BIN:-}
if [[ -z $BIN ]]; then
	echo "building korvet"
	BIN=$TMP/bin/korvet
	build_korvet "$BIN"
fi

start_redis "$TMP/redis"
start_korvet "$BIN" "$TMP/korvet" "$REDIS_PORT"
B=127.0.0.1:$KAFKA_PORT
echo "redis-server on 127.0.0.1:$REDIS_PORT, korvet on $B"

# Every kcat call is bounded: a hang is a failure, not a stuck CI.
KCAT=(timeout 60 kcat -b "$B" -X socket.timeout.ms=20000 -q)

checks=0
fail() {
	echo "FAIL: $*" >&2
	exit 1
}
# same NAME WANT_FILE GOT_FILE
same() {
	if ! cmp -s "$2" "$3"; then
		echo "FAIL: $1: output differs (- want, + got):" >&2
		diff -u "$2" "$3" | head -n 40 >&2 || true
		exit 1
	fi
	checks=$((checks + 1))
	echo "ok   $1"
}

# --- metadata
echo "check: kcat -L lists the broker"
"${KCAT[@]}" -L >"$TMP/meta.txt" 2>&1 || fail "kcat -L: $(cat "$TMP/meta.txt")"
grep -q "^ 1 brokers:" "$TMP/meta.txt" || fail "kcat -L does not show 1 broker: $(cat "$TMP/meta.txt")"
grep -q "broker 0 at $B" "$TMP/meta.txt" || fail "kcat -L does not show broker 0 at $B: $(cat "$TMP/meta.txt")"
checks=$((checks + 1))
echo "ok   metadata: broker 0 at $B"

# --- keyed produce, consume back
echo "check: keyed produce (-K:) and consume back"
T=smoke-keyed
{
	for i in $(seq 1 50); do
		printf 'key-%d:value %d with spaces, unicode é✓ and = signs\n' "$i" "$i"
	done
} >"$TMP/keyed.want"
"${KCAT[@]}" -P -t "$T" -K: -l "$TMP/keyed.want" || fail "produce to $T"
"${KCAT[@]}" -C -t "$T" -o beginning -c 50 -e -K: >"$TMP/keyed.got" || fail "consume $T"
same "keyed records come back as produced ($T, 50 records)" "$TMP/keyed.want" "$TMP/keyed.got"

# Key, value, partition and offset through a format string.
awk -F: '{ k=$1; sub(/^[^:]*:/, ""); printf "%s|%s|0|%d\n", k, $0, NR-1 }' "$TMP/keyed.want" >"$TMP/fmt.want"
"${KCAT[@]}" -C -t "$T" -o beginning -c 50 -e -f '%k|%s|%p|%o\n' >"$TMP/fmt.got" || fail "consume $T with -f"
same "format %k|%s|%p|%o: keys, values, partition 0, offsets 0..49" "$TMP/fmt.want" "$TMP/fmt.got"

# Consuming from an offset in the middle.
tail -n 10 "$TMP/keyed.want" >"$TMP/mid.want"
"${KCAT[@]}" -C -t "$T" -o 40 -c 10 -e -K: >"$TMP/mid.got" || fail "consume $T from offset 40"
same "consume from offset 40 returns the last 10 records" "$TMP/mid.want" "$TMP/mid.got"

# --- headers
echo "check: headers (-H) come back (%h)"
T=smoke-headers
printf 'h1:one\nh2:two\n' >"$TMP/hdr.in"
"${KCAT[@]}" -P -t "$T" -K: -H trace=abc123 -H "tenant=acme corp" -l "$TMP/hdr.in" || fail "produce to $T"
printf 'h1 one trace=abc123,tenant=acme corp\nh2 two trace=abc123,tenant=acme corp\n' >"$TMP/hdr.want"
"${KCAT[@]}" -C -t "$T" -o beginning -c 2 -e -f '%k %s %h\n' >"$TMP/hdr.got" || fail "consume $T"
same "keys, values and headers via -f '%k %s %h'" "$TMP/hdr.want" "$TMP/hdr.got"

# --- compression codecs
for codec in none gzip snappy lz4 zstd; do
	echo "check: produce with -z $codec, consume back"
	T=smoke-codec-$codec
	{
		for i in $(seq 1 500); do
			# Repetitive values, so that compression has something to do.
			printf 'k%04d:%s-%d-%s\n' "$i" "$codec" "$i" "aaaaaaaaaabbbbbbbbbbccccccccccdddddddddd"
		done
	} >"$TMP/$codec.want"
	"${KCAT[@]}" -P -t "$T" -K: -z "$codec" -X linger.ms=50 -l "$TMP/$codec.want" || fail "produce to $T with -z $codec"
	"${KCAT[@]}" -C -t "$T" -o beginning -c 500 -e -K: >"$TMP/$codec.got" || fail "consume $T"
	same "codec $codec: 500 records come back as produced" "$TMP/$codec.want" "$TMP/$codec.got"
done

# --- null keys and values (tombstones)
echo "check: null key and null value (-Z)"
T=smoke-nulls
printf 'no key on this line\ntombstone-key:\n' >"$TMP/null.in"
"${KCAT[@]}" -P -t "$T" -K: -Z -l "$TMP/null.in" || fail "produce to $T"
printf 'NULL|no key on this line\ntombstone-key|NULL\n' >"$TMP/null.want"
"${KCAT[@]}" -C -t "$T" -o beginning -c 2 -e -Z -f '%k|%s\n' >"$TMP/null.got" || fail "consume $T"
same "null key and null value come back as null" "$TMP/null.want" "$TMP/null.got"

# --- end of partition: kcat -e must stop there by itself. (The checks above
# stop after a count, so that they test content even when this fails.)
echo "check: kcat -C -e exits at the end of the partition"
T=smoke-keyed
set +e
timeout 10 kcat -b "$B" -C -t "$T" -o beginning -e -K: >"$TMP/eof.got" 2>"$TMP/eof.err"
rc=$?
set -e
if [[ $rc -ne 0 ]]; then
	echo "FAIL: kcat -C -e exited $rc on $T (124: it never saw the end; it got $(wc -l <"$TMP/eof.got") of 50 records)." >&2
	echo "      librdkafka says:" >&2
	grep -m3 -i -E 'error|invalid|fail' "$TMP/eof.err" >&2 || true
	exit 1
else
	[[ $rc -eq 0 ]] || fail "kcat -C -e exited $rc: $(cat "$TMP/eof.err")"
	same "kcat -e reads all 50 records of $T and stops at its end" "$TMP/keyed.want" "$TMP/eof.got"
fi

# korvet must still be running and must not have logged errors.
kill -0 "$KORVET_PID" 2>/dev/null || fail "korvet exited during the smoke test"
if grep -E 'level=(ERROR|WARN)' "$TMP/korvet/korvet.log" >"$TMP/errors.txt"; then
	echo "FAIL: korvet logged warnings or errors:" >&2
	cat "$TMP/errors.txt" >&2
	exit 1
fi
checks=$((checks + 1))
echo "ok   korvet logged no warnings or errors"

echo "kcat smoke: $checks checks passed"
