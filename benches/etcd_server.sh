#!/usr/bin/env bash
# rediskv-server over etcd through one node and through two nodes, with redis-benchmark.
#
#   benches/etcd_server.sh                      # N=4000 CLIENTS=50 P=1
#   TESTS=set,get N=10000 THREADS=2 benches/etcd_server.sh
#
# Builds `rediskv-server --features etcd` in release, starts a 3-member etcd cluster on
# loopback (a temp dir, fsync on, limits raised as the tests do) and two server nodes over
# one prefix, then per test (random keys among 100,000: -r 100000): redis-benchmark against node 1 alone, then two redis-benchmark
# processes at once, one per node (each with N/2 requests and half the clients), summed.
# Everything is stopped on exit.
set -euo pipefail

N=${N:-4000}
P=${P:-1}
CLIENTS=${CLIENTS:-50}
TESTS=${TESTS:-set,get,incr,lpush,rpop,hset}
# Event loops per node: each waits on etcd while it runs a command, so more loops keep more
# requests in flight.
THREADS=${THREADS:-16}

cd "$(dirname "$0")/.."
. benches/lib.sh
require_tools etcd redis-benchmark redis-cli python3
echo "building rediskv-server --features etcd (release)…" >&2
cargo build --release -p rediskv-server --features etcd >/dev/null 2>&1
BIN=${CARGO_TARGET_DIR:-target}/release/rediskv-server

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
PIDS=()
WORK=$(mktemp -d)
cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

CLIENT_PORTS=() PEER_PORTS=() INITIAL=""
for i in 0 1 2; do
    CLIENT_PORTS+=("$(free_port)")
    PEER_PORTS+=("$(free_port)")
    INITIAL+="${INITIAL:+,}m$i=http://127.0.0.1:${PEER_PORTS[$i]}"
done
for i in 0 1 2; do
    etcd --name "m$i" --data-dir "$WORK/m$i" \
        --listen-client-urls "http://127.0.0.1:${CLIENT_PORTS[$i]}" \
        --advertise-client-urls "http://127.0.0.1:${CLIENT_PORTS[$i]}" \
        --listen-peer-urls "http://127.0.0.1:${PEER_PORTS[$i]}" \
        --initial-advertise-peer-urls "http://127.0.0.1:${PEER_PORTS[$i]}" \
        --initial-cluster "$INITIAL" --initial-cluster-state new --initial-cluster-token bench \
        --max-txn-ops 100000 --max-request-bytes 67108864 --log-level error --logger zap \
        >"$WORK/m$i.log" 2>&1 &
    PIDS+=($!)
done
ENDPOINTS=$(printf 'http://127.0.0.1:%s,' "${CLIENT_PORTS[@]}")
ENDPOINTS=${ENDPOINTS%,}

NODES=()
for n in 1 2; do
    port=$(free_port)
    start_until_ready "$port" "$WORK/node$n.log" "$BIN" --engine etcd --etcd-endpoints "$ENDPOINTS" \
        --etcd-prefix bench/ --etcd-max-txn-ops 100000 --etcd-max-request-bytes 67108864 \
        --port "$port" --threads "$THREADS"
    PIDS+=("$SERVER_PID")
    NODES+=("$port")
done

ops() { tr '\r' '\n' | awk '/requests per second/ { v=$2 } END { print (v == "" ? 0 : v) }'; }
echo "redis-benchmark -q -r 100000 -P $P; one node: -n $N -c $CLIENTS; two nodes: -n $((N / 2)) -c $((CLIENTS / 2)) each" >&2
printf '%-8s %12s %12s %8s\n' command "1 node" "2 nodes" "2n/1n"
IFS=',' read -r -a TEST_LIST <<<"$TESTS"
for test in "${TEST_LIST[@]}"; do
    one=$(redis-benchmark -p "${NODES[0]}" -q -r 100000 -n "$N" -P "$P" -c "$CLIENTS" -t "$test" 2>/dev/null </dev/null | ops)
    redis-benchmark -p "${NODES[0]}" -q -r 100000 -n $((N / 2)) -P "$P" -c $((CLIENTS / 2)) -t "$test" 2>/dev/null </dev/null | ops >"$WORK/a" &
    a=$!
    redis-benchmark -p "${NODES[1]}" -q -r 100000 -n $((N / 2)) -P "$P" -c $((CLIENTS / 2)) -t "$test" 2>/dev/null </dev/null | ops >"$WORK/b" &
    b=$!
    wait $a $b
    two=$(awk -v x="$(cat "$WORK/a")" -v y="$(cat "$WORK/b")" 'BEGIN { printf "%.0f", x + y }')
    printf '%-8s %12s %12s %8s\n' "$test" "$one" "$two" \
        "$(awk -v a="$two" -v b="$one" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }')"
done
