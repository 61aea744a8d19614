#!/usr/bin/env bash
# `redis-benchmark --cluster` over 1, 2 and 3 cluster nodes (etcd engine) and 1, 2 and 3 etcd
# clusters holding the data, with the CPU each command costs the nodes and the etcds.
#
#   benches/cluster_benchmark.sh                        # NODES=1,2,3 STORES=1,2,3 N=10000
#   NODES=3 STORES=1,3 TESTS=set N=20000 benches/cluster_benchmark.sh
#   SERVER_BIN=path/to/rediskv-server benches/cluster_benchmark.sh   # a server built elsewhere
#
# For each number of etcd clusters and of nodes: starts that many single-member etcds (fsync
# on, limits raised as the tests do, each in a temp dir) and that many `rediskv-server
# --engine etcd --cluster-enabled yes --threads $THREADS` on loopback, the first etcd keeping
# the slot table (and, alone, the data), each further one given with `--cluster-etcd-store`
# (slots spread over the clusters by range). Once the nodes share the slots, per test:
# `redis-benchmark --cluster -t <test> -n $N -P $P -c $CLIENTS -r 100000 -q` (without
# `--cluster` for one node: redis-benchmark refuses a cluster of one), and the
# utime + stime of every node and every etcd from /proc/<pid>/stat before and after, as µs of
# CPU per command. Prints the load average with each row. Everything is stopped on exit.
set -euo pipefail

NODES=${NODES:-1,2,3}
STORES=${STORES:-1,2,3}
N=${N:-10000}
P=${P:-16}
CLIENTS=${CLIENTS:-50}
TESTS=${TESTS:-set,get,incr}
# Event loops per node: each waits on etcd while it runs a command.
THREADS=${THREADS:-16}

cd "$(dirname "$0")/.."
# require_tools, free_port, wait_ready
. benches/lib.sh
require_tools etcd redis-benchmark redis-cli
WORK=$(mktemp -d)
PIDS=()
stop_all() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    PIDS=()
}
cleanup() {
    stop_all
    rm -rf "$WORK"
}
trap cleanup EXIT INT TERM
if [ -z "${SERVER_BIN:-}" ]; then
    echo "building rediskv-server (release, etcd feature)…" >&2
    cargo build --release -p rediskv-server --features etcd >"$WORK/build.log" 2>&1 || { cat "$WORK/build.log" >&2; exit 1; }
    SERVER_BIN=${CARGO_TARGET_DIR:-target}/release/rediskv-server
fi
TICK_US=$((1000000 / $(getconf CLK_TCK)))

# utime + stime of the processes given, in clock ticks.
cpu_ticks() {
    local total=0 pid
    for pid in "$@"; do
        # The fields after the command's name (which may hold spaces): utime is the 12th.
        total=$((total + $(sed 's/.*) //' "/proc/$pid/stat" | awk '{ print $12 + $13 }')))
    done
    echo "$total"
}

# Starts a single-member etcd in $WORK/$1; prints its client URL and pid.
start_etcd() {
    local client peer
    client=$(free_port)
    peer=$(free_port)
    etcd --name "$1" --data-dir "$WORK/$1" --listen-client-urls "http://127.0.0.1:$client" \
        --advertise-client-urls "http://127.0.0.1:$client" --listen-peer-urls "http://127.0.0.1:$peer" \
        --initial-advertise-peer-urls "http://127.0.0.1:$peer" --initial-cluster "$1=http://127.0.0.1:$peer" \
        --max-txn-ops 100000 --max-request-bytes 67108864 --log-level error --logger zap \
        >"$WORK/$1.log" 2>&1 &
    echo "http://127.0.0.1:$client $!"
}

ops() { tr '\r' '\n' | awk '/requests per second/ { v=$2 } END { print (v == "" ? 0 : v) }'; }

echo "redis-benchmark --cluster -n $N -P $P -c $CLIENTS -r 100000 -q; nodes with --threads $THREADS; $(nproc) cores" >&2
printf '| etcd clusters | nodes | command | ops/s | node CPU µs/cmd | etcd CPU µs/cmd | load (1 min) |\n'
printf '|---|---|---|---|---|---|---|\n'
IFS=',' read -r -a STORE_COUNTS <<<"$STORES"
IFS=',' read -r -a NODE_COUNTS <<<"$NODES"
IFS=',' read -r -a TEST_LIST <<<"$TESTS"
round=0
for stores in "${STORE_COUNTS[@]}"; do
    for nodes in "${NODE_COUNTS[@]}"; do
        round=$((round + 1))
        ENDPOINTS=() ETCD_PIDS=() NODE_PIDS=() PORTS=()
        for i in $(seq 1 "$stores"); do
            read -r url pid < <(start_etcd "r$round-e$i")
            ENDPOINTS+=("$url")
            ETCD_PIDS+=("$pid")
            PIDS+=("$pid")
        done
        DATA=()
        if [ "$stores" -gt 1 ]; then
            for url in "${ENDPOINTS[@]}"; do DATA+=(--cluster-etcd-store "$url"); done
        fi
        for n in $(seq 1 "$nodes"); do
            port=$(free_port)
            # A node that cannot reach etcd yet exits: start it again.
            for _ in $(seq 1 50); do
                "$SERVER_BIN" --engine etcd --etcd-endpoints "${ENDPOINTS[0]}" --etcd-prefix bench/ \
                    --etcd-max-txn-ops 100000 --etcd-max-request-bytes 67108864 --port "$port" \
                    --threads "$THREADS" --cluster-enabled yes "${DATA[@]}" \
                    >"$WORK/r$round-node$n.log" 2>&1 &
                pid=$!
                up=0
                for _ in $(seq 1 100); do
                    if [ "$(redis-cli -p "$port" ping 2>/dev/null)" = "PONG" ]; then up=1; break; fi
                    kill -0 "$pid" 2>/dev/null || break
                    sleep 0.05
                done
                if [ "$up" = 1 ]; then break; fi
                sleep 0.2
            done
            [ "$up" = 1 ] || { echo "node $n did not start: $(cat "$WORK/r$round-node$n.log")" >&2; exit 1; }
            NODE_PIDS+=("$pid")
            PIDS+=("$pid")
            PORTS+=("$port")
        done
        # Every node sees the others and every slot served.
        for _ in $(seq 1 200); do
            info=$(redis-cli -p "${PORTS[0]}" cluster info)
            if grep -q cluster_state:ok <<<"$info" && grep -q "cluster_size:$nodes" <<<"$info"; then break; fi
            sleep 0.1
        done
        for test in "${TEST_LIST[@]}"; do
            load=$(cut -d' ' -f1 /proc/loadavg)
            node_before=$(cpu_ticks "${NODE_PIDS[@]}")
            etcd_before=$(cpu_ticks "${ETCD_PIDS[@]}")
            # redis-benchmark refuses --cluster with one node; its keys span every slot anyway.
            cluster=(--cluster)
            [ "$nodes" -gt 1 ] || cluster=()
            rate=$(redis-benchmark "${cluster[@]}" -p "${PORTS[0]}" -q -r 100000 -n "$N" -P "$P" \
                -c "$CLIENTS" -t "$test" 2>/dev/null </dev/null | ops)
            node_us=$((($(cpu_ticks "${NODE_PIDS[@]}") - node_before) * TICK_US / N))
            etcd_us=$((($(cpu_ticks "${ETCD_PIDS[@]}") - etcd_before) * TICK_US / N))
            printf '| %s | %s | %s | %s | %s | %s | %s |\n' "$stores" "$nodes" "${test^^}" "$rate" \
                "$node_us" "$etcd_us" "$load"
        done
        stop_all
    done
done
