#!/usr/bin/env bash
# Commands redis-benchmark's own tests do not cover, against redis-server and rediskv-server
# in the same run: EVALSHA of a small script (a GET and an INCR of the key it declares), FCALL
# of a function doing the same, XADD of one field to one stream, and XREAD of ten entries
# from a stream of 1000.
#
#   benches/command_benchmark.sh               # every command, N=100000 P=16 CLIENTS=50, memory
#   COMMANDS=xadd,xread RUNS=3 THREADS=1 ENGINE=fjall benches/command_benchmark.sh
#   SERVER_BIN=/path/to/rediskv-server COMMANDS=evalsha,fcall benches/command_benchmark.sh
#
# Builds rediskv-server in release (unless SERVER_BIN), starts it and a redis-server on free loopback ports,
# prepares both (SCRIPT LOAD, FUNCTION LOAD, a stream of 1000 entries), and prints per command and run each
# server's ops/s and rediskv's ratio to redis-server. Both servers are stopped on exit.
set -euo pipefail
N=${N:-100000}
P=${P:-16}
CLIENTS=${CLIENTS:-50}
THREADS=${THREADS:-1}
ENGINE=${ENGINE:-memory}
RUNS=${RUNS:-3}
COMMANDS=${COMMANDS:-evalsha,fcall,xadd,xread}
SCRIPT="local v = redis.call('get', KEYS[1]) return redis.call('incr', KEYS[1])"
LIBRARY="#!lua name=bench
redis.register_function('getincr', function(keys) local v = redis.call('get', keys[1]) return redis.call('incr', keys[1]) end)"
cd "$(dirname "$0")/.."
# require_tools, free_port, wait_ready
. benches/lib.sh
require_tools redis-server redis-benchmark redis-cli
PIDS=()
WORK=$(mktemp -d)
cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

if [ -z "${SERVER_BIN:-}" ]; then
    echo "building rediskv-server (release)…" >&2
    cargo build --release -p rediskv-server >"$WORK/build.log" 2>&1 || { cat "$WORK/build.log" >&2; exit 1; }
    SERVER_BIN=${CARGO_TARGET_DIR:-target}/release/rediskv-server
fi
REDIS_PORT=$(free_port)
redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no --dir "$WORK" \
    --loglevel warning >"$WORK/redis.log" 2>&1 &
PIDS+=($!)
KV_PORT=$(free_port)
while [ "$KV_PORT" = "$REDIS_PORT" ]; do KV_PORT=$(free_port); done
"$SERVER_BIN" --port "$KV_PORT" --threads "$THREADS" --engine "$ENGINE" --save "" --dir "$WORK/data" \
    >"$WORK/rediskv.log" 2>&1 &
PIDS+=($!)
wait_ready "$REDIS_PORT"
wait_ready "$KV_PORT"
SHA=$(redis-cli -p "$REDIS_PORT" script load "$SCRIPT")
[ "$(redis-cli -p "$KV_PORT" script load "$SCRIPT")" = "$SHA" ] || { echo "SHA1s differ" >&2; exit 1; }
for port in "$REDIS_PORT" "$KV_PORT"; do
    [ "$(redis-cli -p "$port" function load "$LIBRARY")" = bench ] || { echo "FUNCTION LOAD failed" >&2; exit 1; }
    for i in $(seq 1 1000); do echo "XADD readme * field value-$i"; done | redis-cli -p "$port" >/dev/null
done
# The argv of each command.
argv() {
    case "$1" in
        evalsha) echo "evalsha $SHA 1 counter" ;;
        fcall) echo "fcall getincr 1 counter" ;;
        xadd) echo "xadd events * field value" ;;
        xread) echo "xread count 10 streams readme 0" ;;
        *) echo "command_benchmark.sh: unknown command $1" >&2; exit 1 ;;
    esac
}
ops() {
    local -a args
    read -r -a args <<<"$(argv "$2")"
    redis-benchmark -p "$1" -q -n "$N" -P "$P" -c "$CLIENTS" "${args[@]}" \
        | tr '\r' '\n' | awk '/requests per second/ { for (i = 1; i < NF; i++) if ($(i + 1) == "requests") print $i }' \
        | tail -1
}
echo "redis-benchmark -n $N -P $P -c $CLIENTS; rediskv --threads $THREADS --engine $ENGINE"
printf '%-8s %-5s %14s %14s %7s\n' command run redis-server rediskv ratio
for command in ${COMMANDS//,/ }; do
    for run in $(seq 1 "$RUNS"); do
        r=$(ops "$REDIS_PORT" "$command")
        k=$(ops "$KV_PORT" "$command")
        awk -v c="$command" -v run="$run" -v r="$r" -v k="$k" \
            'BEGIN { printf "%-8s %-5s %14s %14s %7.2f\n", c, run, r, k, k / r }'
    done
done
