#!/usr/bin/env bash
# EVALSHA of a small script (a GET and an INCR of the key it declares) through redis-benchmark,
# against redis-server and rediskv-server in the same run.
#
#   benches/eval_benchmark.sh                  # N=100000 P=16 CLIENTS=50, memory engine
#   RUNS=3 THREADS=1 ENGINE=fjall benches/eval_benchmark.sh
#
# Builds rediskv-server in release, starts it and a redis-server on free loopback ports,
# SCRIPT LOADs the script into both, and prints per run each server's EVALSHA ops/s and
# rediskv's ratio to redis-server. Both servers are stopped on exit.
set -euo pipefail
N=${N:-100000}
P=${P:-16}
CLIENTS=${CLIENTS:-50}
THREADS=${THREADS:-1}
ENGINE=${ENGINE:-memory}
RUNS=${RUNS:-3}
SCRIPT="local v = redis.call('get', KEYS[1]) return redis.call('incr', KEYS[1])"
cd "$(dirname "$0")/.."
for tool in redis-server redis-benchmark redis-cli; do
    command -v "$tool" >/dev/null || { echo "eval_benchmark.sh: $tool not found" >&2; exit 1; }
done
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
PIDS=()
WORK=$(mktemp -d)
cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

echo "building rediskv-server (release)…" >&2
cargo build --release -p rediskv-server >"$WORK/build.log" 2>&1 || { cat "$WORK/build.log" >&2; exit 1; }
SERVER_BIN=${CARGO_TARGET_DIR:-target}/release/rediskv-server
wait_ready() {
    for _ in $(seq 1 100); do
        [ "$(redis-cli -p "$1" ping 2>/dev/null)" = "PONG" ] && return 0
        sleep 0.05
    done
    echo "eval_benchmark.sh: server on port $1 did not answer PING" >&2
    exit 1
}
REDIS_PORT=$(free_port)
redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no --dir "$WORK" \
    --loglevel warning >"$WORK/redis.log" 2>&1 &
PIDS+=($!)
KV_PORT=$(free_port)
while [ "$KV_PORT" = "$REDIS_PORT" ]; do KV_PORT=$(free_port); done
"$SERVER_BIN" --port "$KV_PORT" --threads "$THREADS" --engine "$ENGINE" --dir "$WORK/data" \
    >"$WORK/rediskv.log" 2>&1 &
PIDS+=($!)
wait_ready "$REDIS_PORT"
wait_ready "$KV_PORT"
SHA=$(redis-cli -p "$REDIS_PORT" script load "$SCRIPT")
[ "$(redis-cli -p "$KV_PORT" script load "$SCRIPT")" = "$SHA" ] || { echo "SHA1s differ" >&2; exit 1; }
ops() {
    redis-benchmark -p "$1" -q -n "$N" -P "$P" -c "$CLIENTS" evalsha "$SHA" 1 counter \
        | tr '\r' '\n' | awk '/requests per second/ { print $2 }' | tail -1
}
echo "EVALSHA (GET + INCR of one key), redis-benchmark -n $N -P $P -c $CLIENTS; rediskv --threads $THREADS --engine $ENGINE"
printf '%-5s %14s %14s %7s\n' run redis-server rediskv ratio
for run in $(seq 1 "$RUNS"); do
    r=$(ops "$REDIS_PORT")
    k=$(ops "$KV_PORT")
    awk -v run="$run" -v r="$r" -v k="$k" 'BEGIN { printf "%-5s %14s %14s %7.2f\n", run, r, k, k / r }' 
done
