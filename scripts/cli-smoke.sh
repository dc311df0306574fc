#!/usr/bin/env bash
# Smoke test of the admin command line against a running korvet: creates a
# topic, reads it back with --output json, alters it, produces and tails a
# record, deletes it, and checks the documented exit codes. The arguments
# say how to reach korvet and are passed to every command:
#
#   scripts/cli-smoke.sh --config /etc/korvet/korvet.toml
#   KORVET_PASSWORD=... scripts/cli-smoke.sh --url http://127.0.0.1:8080 --user admin
#
# KORVET_BIN is the korvet binary (default: korvet on PATH). It needs a
# principal that may create and delete topics. Exits 1 on the first
# mismatch, 0 when all passed.
set -euo pipefail

# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

BIN=${KORVET_BIN:-korvet}
command -v "$BIN" >/dev/null 2>&1 || die "no korvet binary: set KORVET_BIN"
command -v python3 >/dev/null 2>&1 || die "python3 is missing (it parses the JSON answers)"
CONN=("$@")
TOPIC="cli-smoke-$$-$RANDOM"

# k ARGS...: runs korvet ARGS with the connection flags; its output is in
# $OUT, its exit code in $RC.
k() {
	set +e
	OUT=$("$BIN" "$@" "${CONN[@]}" 2>"$ERRF")
	RC=$?
	set -e
}
ERRF=$(mktemp "${TMPDIR:-/tmp}/cli-smoke.XXXXXX")
cleanup() {
	local rc=$?
	"$BIN" topics delete "$TOPIC" "${CONN[@]}" >/dev/null 2>&1 || true
	rm -f "$ERRF"
	exit "$rc"
}
trap cleanup EXIT

# expect CODE WHAT: the last command exited with CODE.
expect() {
	if [[ $RC -ne $1 ]]; then
		die "$2: exit code $RC, want $1; stdout: $OUT; stderr: $(cat "$ERRF")"
	fi
	log "ok: $2"
}

# pyjson EXPR: evaluates EXPR with d = the JSON document in $OUT.
pyjson() {
	printf '%s' "$OUT" | python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"
}

k topics create "$TOPIC" --partitions 3 --topic-config retention.ms=86400000
expect 0 "topics create $TOPIC --partitions 3"

k topics list --output json
expect 0 "topics list --output json"
n=$(pyjson "[len(t['partitions']) for t in d if t['name'] == '$TOPIC']")
[[ $n == "[3]" ]] || die "topics list --output json: $TOPIC with partitions $n, want [3]"

k topics list --output names
expect 0 "topics list --output names"
grep -qx "$TOPIC" <<<"$OUT" || die "topics list --output names does not list $TOPIC: $OUT"

k topics alter "$TOPIC" --set retention.ms=3600000
expect 0 "topics alter --set retention.ms=3600000"

k topics describe "$TOPIC" --output json
expect 0 "topics describe --output json"
v=$(pyjson "[c['value'] for c in d['configs'] if c['name'] == 'retention.ms']")
[[ $v == "['3600000']" ]] || die "describe: retention.ms is $v, want ['3600000']"
n=$(pyjson "len(d['partitions'])")
[[ $n == 3 ]] || die "describe: $n partitions, want 3"

k topics add-partitions "$TOPIC" --count 4
expect 0 "topics add-partitions --count 4"

k topics produce "$TOPIC" --partition 1 --key k1 --value smoke-value
expect 0 "topics produce"

k topics tail "$TOPIC" --partition 1 --output json
expect 0 "topics tail --output json"
v=$(pyjson "[r['value'].get('text') for r in d['records']]")
[[ $v == "['smoke-value']" ]] || die "tail: values $v, want ['smoke-value']"

k topics delete-records "$TOPIC" --partition 1 --before -1
expect 0 "topics delete-records --before -1"

k topics delete "$TOPIC"
expect 0 "topics delete"

k topics describe "$TOPIC"
expect 3 "topics describe of a deleted topic exits 3"

k topics create
expect 2 "topics create without a name exits 2"

k topics bogus-verb
expect 2 "an unknown verb exits 2"

log "cli smoke test passed"
