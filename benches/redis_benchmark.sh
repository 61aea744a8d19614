#!/usr/bin/env bash
# Compares the rediskv server example with redis-server using redis-benchmark.
#
#   benches/redis_benchmark.sh                 # default tests
#   TESTS=set,get,ping_mbulk N=100000 P=16 benches/redis_benchmark.sh
#
# Builds `examples/server` in release, starts it and a redis-server on free loopback
# ports, runs `redis-benchmark -q -n N -P P -t TESTS` against each (one after the other),
# and prints: command, redis-server ops/s, rediskv ops/s, ratio. Both servers are stopped
# on exit, whatever happens. A test whose command the engine rejects shows "error".
set -euo pipefail

N=${N:-200000}
P=${P:-16}
CLIENTS=${CLIENTS:-50}
TESTS=${TESTS:-set,get,incr,lpush,rpop,sadd,hset,zadd,ping_inline,ping_mbulk}

cd "$(dirname "$0")/.."
for tool in redis-server redis-benchmark redis-cli; do
    command -v "$tool" >/dev/null || { echo "redis_benchmark.sh: $tool not found" >&2; exit 1; }
done

echo "building the server example (release)…" >&2
cargo build --release --quiet --example server
SERVER_BIN=${CARGO_TARGET_DIR:-target}/release/examples/server

free_port() {
    python3 - <<'EOF' 2>/dev/null || echo $((20000 + RANDOM % 20000))
import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()
EOF
}

PIDS=()
WORK=$(mktemp -d)
cleanup() {
    for pid in "${PIDS[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
    for pid in "${PIDS[@]}"; do
        wait "$pid" 2>/dev/null || true
    done
    rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

wait_ready() {
    local port=$1
    for _ in $(seq 1 100); do
        if [ "$(redis-cli -p "$port" ping 2>/dev/null)" = "PONG" ]; then return 0; fi
        sleep 0.05
    done
    echo "redis_benchmark.sh: server on port $port did not answer PING" >&2
    exit 1
}

REDIS_PORT=$(free_port)
redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no \
    --daemonize no --dir "$WORK" --loglevel warning >"$WORK/redis.log" 2>&1 &
PIDS+=($!)
KV_PORT=$(free_port)
while [ "$KV_PORT" = "$REDIS_PORT" ]; do KV_PORT=$(free_port); done
"$SERVER_BIN" --port "$KV_PORT" >"$WORK/rediskv.log" 2>&1 &
PIDS+=($!)
wait_ready "$REDIS_PORT"
wait_ready "$KV_PORT"

# Runs redis-benchmark and prints "test ops/s" per line ("error" when replies were errors).
bench() {
    local port=$1 out
    out=$(redis-benchmark -p "$port" -q -n "$N" -P "$P" -c "$CLIENTS" -t "$TESTS" 2>&1 </dev/null | tr '\r' '\n')
    echo "$out" >"$WORK/bench-$port.txt"
    # Final lines look like "SET: 123456.79 requests per second, p50=…"; error replies
    # are printed by redis-benchmark as "ERR …" lines.
    echo "$out" | awk '
        /requests per second/ { name=$1; sub(":", "", name); print name, $2 }
    '
    if echo "$out" | grep -q -E '^(ERR|WRONGTYPE|Error)'; then
        echo "$out" | grep -E '^(ERR|WRONGTYPE|Error)' | sort -u | sed 's/^/  /' >&2
    fi
}

echo "redis-benchmark -q -n $N -P $P -c $CLIENTS -t $TESTS" >&2
echo "  against redis-server (port $REDIS_PORT)…" >&2
bench "$REDIS_PORT" >"$WORK/redis.res"
redis-cli -p "$REDIS_PORT" flushall >/dev/null
echo "  against rediskv (port $KV_PORT)…" >&2
bench "$KV_PORT" 2>"$WORK/rediskv.err" >"$WORK/rediskv.res"

# redis-benchmark names a test whose replies were all errors as usual, so mark tests whose
# command the engine answered with an error by probing it once.
probe() {
    case "$1" in
        SET) echo "set __probe__ x" ;;
        GET) echo "get __probe__" ;;
        INCR) echo "incr __probe_counter__" ;;
        LPUSH) echo "lpush __probe_list__ x" ;;
        RPOP) echo "rpop __probe_list__" ;;
        SADD) echo "sadd __probe_set__ x" ;;
        HSET) echo "hset __probe_hash__ f x" ;;
        ZADD) echo "zadd __probe_zset__ 1 x" ;;
        *) echo "ping" ;;
    esac
}

printf '\n%-26s %16s %16s %8s\n' "command" "redis-server" "rediskv" "ratio"
printf '%-26s %16s %16s %8s\n' "-------" "------------" "-------" "-----"
while read -r name redis_ops; do
    kv_ops=$(awk -v n="$name" '$1 == n { print $2 }' "$WORK/rediskv.res")
    # shellcheck disable=SC2046
    if redis-cli -p "$KV_PORT" $(probe "$name") 2>&1 | grep -q -E '^(ERR|WRONGTYPE)'; then
        printf '%-26s %16s %16s %8s\n' "$name" "$redis_ops" "error" "-"
        continue
    fi
    ratio=$(awk -v a="$kv_ops" -v b="$redis_ops" 'BEGIN { if (b > 0 && a != "") printf "%.2f", a / b; else print "-" }')
    printf '%-26s %16s %16s %8s\n' "$name" "$redis_ops" "${kv_ops:--}" "$ratio"
done <"$WORK/redis.res"
