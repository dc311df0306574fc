#!/usr/bin/env bash
# Runs korvet on this machine against a local redis-server, for development.
#
#   scripts/run-local.sh
#
# State lives under KORVET_HOME (default ~/.korvet):
#   korvet.toml   dev config, written on first run (edit it freely)
#   bin/korvet    built from this checkout on every run
#   redis/        redis-server's AOF and log, when this script starts Redis
#   data/         korvet's data_dir
#
# If a Redis already answers at the config's [redis] url, korvet uses it.
# Otherwise the script starts redis-server (AOF on) on that url's port,
# 127.0.0.1 only, and stops it again when korvet stops. Ctrl-C stops both.
set -euo pipefail

# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

KORVET_HOME=${KORVET_HOME:-$HOME/.korvet}
CONFIG=$KORVET_HOME/korvet.toml
mkdir -p "$KORVET_HOME"

# --- config
if [[ ! -f $CONFIG ]]; then
	echo "writing dev config $CONFIG"
	cat >"$CONFIG" <<EOF
# korvet dev config, written by scripts/run-local.sh. Every key and its
# default is in korvet.toml at the repository root.
data_dir = "$KORVET_HOME/data"
log_level = "info"
shutdown_grace = "5s"

[kafka]
listen = "127.0.0.1:9092"

[http]
listen = "127.0.0.1:8080"

[redis]
url = "redis://127.0.0.1:6379/0"
EOF
fi

# The [redis] url of the config (default when it has none).
redis_url=$(awk '
	/^[[:space:]]*\[/ { t = $0; gsub(/[][[:space:]]/, "", t); next }
	t == "redis" && /^[[:space:]]*url[[:space:]]*=/ {
		sub(/^[^=]*=[[:space:]]*/, ""); sub(/[[:space:]]*#.*$/, ""); gsub(/"/, ""); print; exit
	}' "$CONFIG")
redis_url=${redis_url:-redis://127.0.0.1:6379/0}
# host and port, for a plain redis://[user:pass@]host:port[/db] url.
hostport=${redis_url#redis://}
hostport=${hostport##*@}
hostport=${hostport%%/*}
redis_host=${hostport%:*}
redis_port=${hostport##*:}
[[ $redis_port =~ ^[0-9]+$ ]] || redis_port=6379

REDIS_PID=""
KORVET_PID=""
# shellcheck disable=SC2317 # called by the traps
cleanup() {
	trap - INT TERM EXIT
	if [[ -n $KORVET_PID ]]; then
		stop_pid "$KORVET_PID" 15
	fi
	if [[ -n $REDIS_PID ]]; then
		echo "stopping redis-server (pid $REDIS_PID)"
		stop_pid "$REDIS_PID" 15
	fi
}

# --- redis
local_url=""
if [[ $redis_url == redis://* && ($redis_host == 127.0.0.1 || $redis_host == localhost) ]]; then
	local_url=1
fi
reply=""
if [[ -n $local_url ]]; then
	reply=$(redis_reply "$redis_port" || true)
fi
if [[ $reply == "+PONG"* || $reply == "-NOAUTH"* || $reply == "-LOADING"* ]]; then
	echo "using the Redis that answers at $redis_url"
elif [[ -n $local_url ]]; then
	if port_in_use "$redis_port"; then
		die "port $redis_port is taken by something that is not a Redis answering PING; stop it or set [redis] url in $CONFIG"
	fi
	need_cmd redis-server redis-server
	mkdir -p "$KORVET_HOME/redis"
	echo "starting redis-server on 127.0.0.1:$redis_port (AOF in $KORVET_HOME/redis)"
	trap cleanup EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	# Its own session: Ctrl-C reaches korvet first; Redis stops after it.
	setsid redis-server --port "$redis_port" --bind 127.0.0.1 --save "" \
		--appendonly yes --appendfsync everysec --dir "$KORVET_HOME/redis" \
		--daemonize no --logfile "$KORVET_HOME/redis/redis.log" </dev/null &
	REDIS_PID=$!
	if ! wait_redis "$redis_port" 30 "$REDIS_PID"; then
		tail -n 20 "$KORVET_HOME/redis/redis.log" >&2 || true
		die "redis-server did not come up on port $redis_port (log above)"
	fi
else
	echo "korvet will use $redis_url (not started by this script)"
fi

# --- korvet
echo "building korvet"
build_korvet "$KORVET_HOME/bin/korvet"
echo "korvet serve --config $CONFIG (Ctrl-C stops it)"
if [[ -z $REDIS_PID ]]; then
	exec "$KORVET_HOME/bin/korvet" serve --config "$CONFIG"
fi
# Redis is ours: run korvet as a child, so that Redis can be stopped after it.
"$KORVET_HOME/bin/korvet" serve --config "$CONFIG" </dev/null &
KORVET_PID=$!
set +e
while kill -0 "$KORVET_PID" 2>/dev/null; do
	wait "$KORVET_PID"
	rc=$?
done
set -e
KORVET_PID=""
exit "${rc:-0}"
