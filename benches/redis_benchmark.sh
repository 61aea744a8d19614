#!/usr/bin/env bash
# Compares rediskv-server with redis-server using redis-benchmark.
#
#   benches/redis_benchmark.sh                 # default tests
#   TESTS=set,get,ping_mbulk N=100000 P=16 benches/redis_benchmark.sh
#   THREADS=1,2 benches/redis_benchmark.sh     # one rediskv-server per entry, with --threads N
#   ENGINE=fjall APPENDFSYNC=everysec benches/redis_benchmark.sh   # engine of every rediskv-server (default memory)
#   BASELINE=cf5e5d9 benches/redis_benchmark.sh  # also an older commit's server (its examples/server
#                                                # if it has one, else its rediskv-server --threads 1)
#
# Builds `rediskv-server` in release, starts it and a redis-server on free loopback
# ports, runs `redis-benchmark -q -n N -P P -t TESTS` against each (one after the other),
# and prints: command, redis-server ops/s, then per rediskv --threads value its ops/s and
# ratio to redis-server (and, with two values, the second's ratio to the first). Both servers are stopped
# on exit, whatever happens. A test whose command the engine rejects shows "error".
set -euo pipefail

N=${N:-200000}
P=${P:-16}
CLIENTS=${CLIENTS:-50}
TESTS=${TESTS:-set,get,incr,lpush,rpop,sadd,hset,zadd,ping_inline,ping_mbulk}
THREADS=${THREADS:-1}
ENGINE=${ENGINE:-memory}
APPENDFSYNC=${APPENDFSYNC:-everysec}
BASELINE=${BASELINE:-}

cd "$(dirname "$0")/.."
for tool in redis-server redis-benchmark redis-cli; do
    command -v "$tool" >/dev/null || { echo "redis_benchmark.sh: $tool not found" >&2; exit 1; }
done


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
    [ -n "$BASELINE" ] && git worktree remove --force "$WORK/baseline" >/dev/null 2>&1
    rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

echo "building rediskv-server (release)…" >&2
if ! cargo build --release -p rediskv-server >"$WORK/build.log" 2>&1; then
    cat "$WORK/build.log" >&2
    exit 1
fi
SERVER_BIN=${CARGO_TARGET_DIR:-target}/release/rediskv-server

wait_ready() {
    local port=$1
    for _ in $(seq 1 100); do
        if [ "$(redis-cli -p "$port" ping 2>/dev/null)" = "PONG" ]; then return 0; fi
        sleep 0.05
    done
    echo "redis_benchmark.sh: server on port $port did not answer PING" >&2
    exit 1
}

# The baseline commit, built in a worktree (its own target directory, kept between runs).
BASE_PORT=
if [ -n "$BASELINE" ]; then
    echo "building $BASELINE's server (release)…" >&2
    git worktree add --detach "$WORK/baseline" "$BASELINE" >/dev/null 2>&1 \
        || { echo "redis_benchmark.sh: cannot check out $BASELINE" >&2; exit 1; }
    BASE_TARGET=$PWD/target/baseline
    if [ -f "$WORK/baseline/examples/server/main.rs" ]; then
        BASE_CMD=(--example server)
        BASE_BIN=$BASE_TARGET/release/examples/server
        BASE_ARGS=()
    else
        BASE_CMD=(-p rediskv-server)
        BASE_BIN=$BASE_TARGET/release/rediskv-server
        BASE_ARGS=(--threads 1 --engine "$ENGINE" --dir "$WORK/data-baseline" --appendfsync "$APPENDFSYNC")
    fi
    if ! (cd "$WORK/baseline" && CARGO_TARGET_DIR=$BASE_TARGET cargo build --release "${BASE_CMD[@]}") >"$WORK/build-baseline.log" 2>&1; then
        cat "$WORK/build-baseline.log" >&2
        exit 1
    fi
fi

REDIS_PORT=$(free_port)
redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no \
    --daemonize no --dir "$WORK" --loglevel warning >"$WORK/redis.log" 2>&1 &
PIDS+=($!)
IFS=',' read -r -a THREAD_LIST <<<"$THREADS"
KV_PORTS=()
for threads in "${THREAD_LIST[@]}"; do
    port=$(free_port)
    while [ "$port" = "$REDIS_PORT" ] || [[ " ${KV_PORTS[*]} " == *" $port "* ]]; do port=$(free_port); done
    "$SERVER_BIN" --port "$port" --threads "$threads" --engine "$ENGINE" --dir "$WORK/data-$port" \
        --appendfsync "$APPENDFSYNC" >"$WORK/rediskv-$port.log" 2>&1 &
    PIDS+=($!)
    KV_PORTS+=("$port")
done
if [ -n "$BASELINE" ]; then
    BASE_PORT=$(free_port)
    while [ "$BASE_PORT" = "$REDIS_PORT" ] || [[ " ${KV_PORTS[*]} " == *" $BASE_PORT "* ]]; do BASE_PORT=$(free_port); done
    "$BASE_BIN" --port "$BASE_PORT" "${BASE_ARGS[@]}" >"$WORK/baseline.log" 2>&1 &
    PIDS+=($!)
fi
wait_ready "$REDIS_PORT"
[ -n "$BASE_PORT" ] && wait_ready "$BASE_PORT"
for port in "${KV_PORTS[@]}"; do wait_ready "$port"; done

# One test against one server: prints its ops/s, or "error" (redis-benchmark stops at the
# first error reply, e.g. a command the engine does not implement yet).
bench_one() {
    local port=$1 test=$2 out
    out=$(redis-benchmark -p "$port" -q -n "$N" -P "$P" -c "$CLIENTS" -t "$test" 2>&1 </dev/null | tr '\r' '\n' || true)
    echo "$out" >>"$WORK/bench-$port.txt"
    if echo "$out" | grep -q "Error from server"; then
        echo "$out" | grep -o "Error from server: .*" | head -1 | cut -c1-90 >&2
        echo "error"
        return
    fi
    echo "$out" | awk '/requests per second/ { v=$2 } END { if (v == "") print "?"; else print v }'
}

echo "redis-benchmark -q -n $N -P $P -c $CLIENTS -t <each of $TESTS>" >&2
echo "redis-server on port $REDIS_PORT, rediskv ($ENGINE, appendfsync $APPENDFSYNC) --threads ${THREAD_LIST[*]} on ports ${KV_PORTS[*]}" >&2
printf '\n%-14s %14s' "command" "redis-server"
for threads in "${THREAD_LIST[@]}"; do printf ' %14s %6s' "rediskv -t$threads" "ratio"; done
[ "${#THREAD_LIST[@]}" = 2 ] && printf ' %8s' "t2/t1"
[ -n "$BASE_PORT" ] && printf ' %14s %6s %8s' "$BASELINE" "ratio" "t1/base"
printf '\n'
IFS=',' read -r -a TEST_LIST <<<"$TESTS"
for test in "${TEST_LIST[@]}"; do
    redis_ops=$(bench_one "$REDIS_PORT" "$test")
    printf '%-14s %14s' "$test" "$redis_ops"
    all=()
    for port in "${KV_PORTS[@]}"; do
        kv_ops=$(bench_one "$port" "$test" 2>"$WORK/kv-error.txt")
        all+=("$kv_ops")
        ratio=$(awk -v a="$kv_ops" -v b="$redis_ops" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else print "-" }')
        printf ' %14s %6s' "$kv_ops" "$ratio"
    done
    if [ "${#all[@]}" = 2 ]; then
        printf ' %8s' "$(awk -v a="${all[1]}" -v b="${all[0]}" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else print "-" }')"
    fi
    if [ -n "$BASE_PORT" ]; then
        base_ops=$(bench_one "$BASE_PORT" "$test" 2>/dev/null)
        printf ' %14s %6s %8s' "$base_ops" \
            "$(awk -v a="$base_ops" -v b="$redis_ops" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else print "-" }')" \
            "$(awk -v a="${all[0]}" -v b="$base_ops" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else print "-" }')"
    fi
    printf '\n'
done
