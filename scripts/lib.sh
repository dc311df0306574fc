# shellcheck shell=bash
# Helpers shared by the scripts in this folder. Source it; do not run it.
# The caller sets `set -euo pipefail` itself.

# REPO is the repository root (the folder above scripts/).
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

log() { printf '%s\n' "$*" >&2; }
die() {
	printf 'error: %s\n' "$*" >&2
	exit 1
}

# port_in_use PORT: true when something accepts TCP connections on
# 127.0.0.1:PORT.
port_in_use() {
	(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# free_port NAME: sets variable NAME to a TCP port on 127.0.0.1 that
# nothing listens on, below Linux's ephemeral range (32768 up) so that no
# outgoing connection holds it, and not given out before by this shell.
_free_ports_given=" "
free_port() {
	local p i
	for ((i = 0; i < 500; i++)); do
		p=$((20000 + RANDOM % 12000))
		[[ $_free_ports_given == *" $p "* ]] && continue
		port_in_use "$p" && continue
		_free_ports_given+="$p "
		printf -v "$1" '%s' "$p"
		return 0
	done
	die "no free TCP port found"
}

# wait_korvet LOG SECONDS PID: waits until korvet process PID has logged
# that it started (its listeners are bound then); fails if it exits.
wait_korvet() {
	local logf=$1 secs=$2 pid=$3 i
	for ((i = 0; i < secs * 20; i++)); do
		kill -0 "$pid" 2>/dev/null || return 1
		grep -q 'msg="korvet started"' "$logf" 2>/dev/null && return 0
		sleep 0.05
	done
	return 1
}

# redis_reply PORT: prints the first line of a Redis's answer to PING on
# 127.0.0.1:PORT ("+PONG", "-NOAUTH ...", "-LOADING ..."); fails when
# nothing answers. Uses bash's /dev/tcp so that redis-cli is not needed.
redis_reply() {
	(
		exec 4<>"/dev/tcp/127.0.0.1/$1" || exit 1
		printf 'PING\r\n' >&4
		IFS= read -r -t 2 line <&4 || exit 1
		printf '%s\n' "${line%$'\r'}"
	) 2>/dev/null
}

# redis_ping PORT: true when a Redis on 127.0.0.1:PORT answers PONG (not
# LOADING).
redis_ping() {
	[[ $(redis_reply "$1") == "+PONG"* ]]
}

# redis_process_id PORT: prints the process_id that the Redis on
# 127.0.0.1:PORT reports in INFO server.
redis_process_id() {
	(
		exec 4<>"/dev/tcp/127.0.0.1/$1" || exit 1
		printf 'INFO server\r\n' >&4
		while IFS= read -r -t 2 line <&4; do
			if [[ $line == process_id:* ]]; then
				line=${line#process_id:}
				printf '%s\n' "${line%$'\r'}"
				exit 0
			fi
		done
		exit 1
	) 2>/dev/null
}

# wait_redis PORT SECONDS [PID]: waits until the Redis on 127.0.0.1:PORT
# answers PONG; with PID, it must be that process (not another Redis that
# holds the port), and it fails as soon as PID exits.
wait_redis() {
	local port=$1 secs=$2 pid=${3:-} i
	for ((i = 0; i < secs * 20; i++)); do
		if [[ -n $pid ]] && ! kill -0 "$pid" 2>/dev/null; then
			return 1
		fi
		if redis_ping "$port"; then
			[[ -z $pid || $(redis_process_id "$port") == "$pid" ]] && return 0
		fi
		sleep 0.05
	done
	return 1
}

# need_cmd CMD PACKAGE: installs PACKAGE with apt-get when CMD is missing
# (running apt-get update first, once).
_apt_updated=""
need_cmd() {
	command -v "$1" >/dev/null 2>&1 && return 0
	apt_install "$1" "$2"
	command -v "$1" >/dev/null 2>&1 || die "$1 still missing after installing $2"
}

# apt_install WHAT PACKAGE...: installs every PACKAGE named (needed for WHAT) with apt-get.
apt_install() {
	local cmd=$1 sudo=""
	shift
	local pkg="$*"
	if [[ $(id -u) -ne 0 ]]; then
		command -v sudo >/dev/null 2>&1 || die "$cmd is missing: install $pkg (apt-get install $pkg)"
		sudo="sudo"
	fi
	command -v apt-get >/dev/null 2>&1 || die "$cmd is missing and there is no apt-get: install $pkg by hand"
	log "installing $pkg (for $cmd)"
	local out
	out=$(mktemp)
	if [[ -z $_apt_updated ]]; then
		$sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq >"$out" 2>&1 || {
			cat "$out" >&2
			rm -f "$out"
			die "apt-get update failed"
		}
		_apt_updated=1
	fi
	# shellcheck disable=SC2086 # $pkg is one or more package names
	$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $pkg >"$out" 2>&1 || {
		cat "$out" >&2
		rm -f "$out"
		die "apt-get install $pkg failed"
	}
	rm -f "$out"
}

# build_korvet OUT: builds korvet from the repository into OUT, without
# cgo like the .deb (CGO_ENABLED=1 overrides): with cgo, Pebble compiles
# the C zstd library, about a minute of CPU on a fresh machine's first
# build, for a binary that differs from the packaged one.
build_korvet() {
	command -v go >/dev/null 2>&1 || die "go is not on PATH"
	mkdir -p "$(dirname "$1")"
	(cd "$REPO" && CGO_ENABLED=${CGO_ENABLED:-0} go build -o "$1" .) || die "go build failed"
}

# stop_pid PID [SECONDS]: SIGTERM, wait up to SECONDS (default 10), then
# SIGKILL. Only for processes this shell started.
stop_pid() {
	local pid=$1 secs=${2:-10} i
	[[ -n $pid ]] || return 0
	kill -0 "$pid" 2>/dev/null || {
		wait "$pid" 2>/dev/null || true
		return 0
	}
	kill -TERM "$pid" 2>/dev/null || true
	for ((i = 0; i < secs * 20; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.05
	done
	if kill -0 "$pid" 2>/dev/null; then
		log "process $pid did not stop after ${secs}s; killing it"
		kill -KILL "$pid" 2>/dev/null || true
	fi
	wait "$pid" 2>/dev/null || true
}

# start_redis DIR [extra redis-server args...]: starts redis-server on a
# free 127.0.0.1 port with AOF (everysec) in DIR, retrying on another port
# if the chosen one is taken meanwhile. Sets REDIS_PORT and REDIS_PID. The
# log is DIR/redis.log.
start_redis() {
	local dir=$1 try
	shift
	mkdir -p "$dir"
	REDIS_PORT=""
	for try in 1 2 3; do
		free_port REDIS_PORT
		redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save "" \
			--appendonly yes --appendfsync everysec --dir "$dir" \
			--daemonize no --logfile "$dir/redis.log" "$@" </dev/null &
		REDIS_PID=$!
		wait_redis "$REDIS_PORT" 15 "$REDIS_PID" && return 0
		stop_pid "$REDIS_PID" 5
		REDIS_PID=""
		grep -q 'Address already in use' "$dir/redis.log" 2>/dev/null || break
		mv "$dir/redis.log" "$dir/redis.log.$try"
		log "port $REDIS_PORT was taken (try $try); trying another"
	done
	log "redis-server did not come up; tail of its log:"
	tail -n 20 "$dir/redis.log" >&2 || true
	return 1
}

# registry_toml: a [schema_registry] table on a free port chosen by the
# kernel, never the default 8081 that several brokers (or another run)
# would share; nothing for a checkout without the registry.
registry_toml() {
	grep -q '^\[schema_registry\]' "$REPO/korvet.toml" || return 0
	printf '[schema_registry]\nlisten = "127.0.0.1:0"\n'
}

# start_korvet BIN DIR REDIS_PORT: writes DIR/korvet.toml (data_dir
# DIR/data, Kafka and HTTP on free 127.0.0.1 ports) and starts korvet,
# logging to DIR/korvet.log, retrying on other ports if one is taken
# meanwhile. Sets KAFKA_PORT, HTTP_PORT and KORVET_PID. KORVET_REDIS_TOML,
# when set, holds more lines for the [redis] table.
start_korvet() {
	local bin=$1 dir=$2 redis_port=$3 try
	mkdir -p "$dir"
	for try in 1 2 3; do
		free_port KAFKA_PORT
		free_port HTTP_PORT
		cat >"$dir/korvet.toml" <<EOF
data_dir = "$dir/data"
log_level = "info"
shutdown_grace = "5s"

[kafka]
listen = "127.0.0.1:$KAFKA_PORT"

[http]
listen = "127.0.0.1:$HTTP_PORT"

$(registry_toml)

[redis]
url = "redis://127.0.0.1:$redis_port/0"
${KORVET_REDIS_TOML:-}
EOF
		"$bin" serve --config "$dir/korvet.toml" </dev/null >"$dir/korvet.log" 2>&1 &
		KORVET_PID=$!
		wait_korvet "$dir/korvet.log" 20 "$KORVET_PID" && return 0
		stop_pid "$KORVET_PID" 5
		KORVET_PID=""
		grep -q 'address already in use' "$dir/korvet.log" 2>/dev/null || break
		log "port $KAFKA_PORT or $HTTP_PORT was taken (try $try); trying others"
	done
	log "korvet did not start; its log:"
	tail -n 30 "$dir/korvet.log" >&2 || true
	return 1
}
