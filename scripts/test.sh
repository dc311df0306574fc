#!/usr/bin/env bash
# Runs korvet's whole test suite, installing what it needs first on a fresh
# Debian machine (redis-server, kcat, python3-kafka, python3-confluent-kafka
# with python3-requests and python3-jsonschema,
# chromium for the status page, systemd for systemd-analyze). Exits non-zero
# on any failure.
#
# As root with CI or KORVET_TEST_DEB=1 set, the suite installs the .deb it
# builds on this machine and purges it again. KORVET_ARTIFACTS=DIR keeps the
# status page screenshots there.
#
#   scripts/test.sh
#
# Steps: go vet, gofmt check, go test (all packages, real redis-server
# child processes on free 127.0.0.1 ports), the DuckDB module
# internal/duckdbtest (cgo: gcc, g++), each fuzz target for 5 s
# (scripts/fuzz.sh), then scripts/conformance.sh when it exists and is
# executable.
set -euo pipefail

# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$REPO"

started=$SECONDS
section() { printf '\n=== %s\n' "$*"; }

section "setup"
command -v go >/dev/null 2>&1 || die "go is not on PATH (korvet needs the Go toolchain named in go.mod)"
need_cmd redis-server redis-server
need_cmd kcat kcat
need_cmd chromium chromium
need_cmd systemd-analyze systemd
need_cmd dpkg-deb dpkg
# DuckDB (cgo) for internal/duckdbtest, which reads the cold tier's Parquet files.
need_cmd gcc gcc
need_cmd g++ g++
# kafka-python 2.0 (a client test drives it through Debian's python3).
/usr/bin/python3 -c 'import kafka' >/dev/null 2>&1 || apt_install "python kafka module" python3-kafka
# confluent-kafka (librdkafka; the SCRAM client tests log in with it).
/usr/bin/python3 -c 'import confluent_kafka' >/dev/null 2>&1 || apt_install "python confluent_kafka module" python3-confluent-kafka
# Its SchemaRegistryClient needs requests, its JSONSerializer jsonschema
# (the schema registry tests; fastavro, for its Avro serializer, is not
# in Debian, so franz-go covers Avro).
/usr/bin/python3 -c 'import requests, jsonschema' >/dev/null 2>&1 || apt_install "python requests and jsonschema modules" python3-requests python3-jsonschema
# versitygw (Apache-2.0), the S3 server the cold-tier tests run against.
gobin=$(go env GOBIN)
[[ -n $gobin ]] || gobin="$(go env GOPATH | cut -d: -f1)/bin"
if ! command -v versitygw >/dev/null 2>&1 && [[ ! -x $gobin/versitygw ]]; then
	log "installing versitygw v1.8.0 (about 2 minutes the first time)"
	GOFLAGS=-buildvcs=false go install github.com/versity/versitygw/cmd/versitygw@v1.8.0 || die "go install versitygw failed"
fi
export PATH="$PATH:$gobin"
go version
redis-server --version | cut -d" " -f1-3
echo "kcat $(kcat -V 2>&1 | sed -n 's/^Version \([^ ]*\).*/\1/p')"
chromium --version 2>/dev/null
systemd-analyze --version | head -n 1
versitygw --version 2>/dev/null | head -n 1 || true

section "go vet ./..."
go vet ./...
echo "ok"

section "staticcheck ./..."
if ! command -v staticcheck >/dev/null 2>&1 && [[ ! -x $gobin/staticcheck ]]; then
	log "installing staticcheck 2026.2.2"
	GOFLAGS=-buildvcs=false go install honnef.co/go/tools/cmd/staticcheck@v0.8.2 || die "go install staticcheck failed"
fi
staticcheck ./...
echo "ok"

section "gofmt"
unformatted=$(gofmt -l .)
if [[ -n $unformatted ]]; then
	echo "these files are not gofmt-formatted (run gofmt -w on them):"
	printf '%s\n' "$unformatted" | sed 's/^/  /'
	exit 1
fi
echo "ok"

section "go test -count=1 -timeout 30m ./..."
go test -count=1 -timeout 30m ./...

section "internal/duckdbtest (its own module: DuckDB reads the cold tier's typed columns)"
(cd internal/duckdbtest && go vet ./... && go test -count=1 -timeout 10m ./...)

section "scripts/fuzz.sh (FUZZTIME=5s)"
FUZZTIME=5s scripts/fuzz.sh

if [[ -x scripts/conformance.sh ]]; then
	section "scripts/conformance.sh"
	scripts/conformance.sh
	section "REDIS_CLUSTER=1 scripts/conformance.sh (korvet on 3 masters + 3 replicas)"
	REDIS_CLUSTER=1 scripts/conformance.sh
else
	section "scripts/conformance.sh: not present or not executable, skipped"
fi

section "all passed in $((SECONDS - started))s"
