#!/usr/bin/env bash
# How long CLUSTERX MIGRATE takes to move a slot of N keys between two fjall nodes, and how
# long the slot is closed to writes.
#
#   benches/cluster_move.sh                  # N=100000 keys of 100 bytes, RUNS=3 moves
#   LOAD=1 benches/cluster_move.sh           # with four redis-py RedisCluster INCR loops on
#                                            # keys of the slot meanwhile
#   SERVER_BIN=path/to/rediskv-server benches/cluster_move.sh   # a server built elsewhere
#   OTHER=100000 benches/cluster_move.sh     # with 100,000 more keys over every slot, so
#                                            # that the nodes hold keys of other slots
#
# Starts a 1-member etcd and two `rediskv-server --engine fjall --threads 2 --cluster-enabled
# yes --cluster-etcd … --cluster-initial-nodes 2` in a temp dir, fills one slot of the first
# with N `SET {tag}:i <100 bytes>`, then moves it back and forth RUNS times, printing what
# CLUSTER INFO says of each move (keys copied, writes forwarded, ms in all, ms closed) and the
# target's DBSIZE, and first how long CLUSTER COUNTKEYSINSLOT of the slot and of a slot of a
# few keys take (median of 5).
# Everything is stopped on exit.
set -euo pipefail

N=${N:-100000}
RUNS=${RUNS:-3}

cd "$(dirname "$0")/.."
# require_tools, free_port, wait_ready, build_server
. benches/lib.sh
require_tools etcd redis-cli python3
WORK=$(mktemp -d)
PIDS=()
cleanup() {
    touch "$WORK/stop"
    sleep 0.5
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT
if [ -z "${SERVER_BIN:-}" ]; then
    echo "building rediskv-server (release, etcd feature)…" >&2
    cargo build --release -p rediskv-server --features etcd >"$WORK/build.log" 2>&1 || { cat "$WORK/build.log" >&2; exit 1; }
    SERVER_BIN=${CARGO_TARGET_DIR:-target}/release/rediskv-server
fi

CLIENT=$(free_port)
PEER=$(free_port)
etcd --data-dir "$WORK/etcd" --listen-client-urls "http://127.0.0.1:$CLIENT" \
    --advertise-client-urls "http://127.0.0.1:$CLIENT" --listen-peer-urls "http://127.0.0.1:$PEER" \
    --initial-advertise-peer-urls "http://127.0.0.1:$PEER" --initial-cluster "default=http://127.0.0.1:$PEER" \
    >"$WORK/etcd.log" 2>&1 &
PIDS+=($!)
sleep 1
A=$(free_port)
B=$(free_port)
for port in $A $B; do
    "$SERVER_BIN" --engine fjall --dir "$WORK/node$port" --port "$port" --threads 2 --cluster-enabled yes \
        --cluster-etcd "http://127.0.0.1:$CLIENT" --etcd-prefix move/ --cluster-initial-nodes 2 \
        >"$WORK/node$port.log" 2>&1 &
    PIDS+=($!)
    wait_ready "$port"
done
until redis-cli -p "$A" cluster info | grep -q cluster_state:ok; do sleep 0.1; done

# A hash tag whose slot the first node owns, and N keys in it.
TAG=$(python3 - "$A" <<'PY'
import sys, redis
port = int(sys.argv[1])
c = redis.Redis(port=port)
mine = [(s[0], s[1]) for s in c.execute_command('CLUSTER', 'SLOTS') if s[2][1] == port]
for i in range(100000):
    slot = c.execute_command('CLUSTER', 'KEYSLOT', 't%d' % i)
    if any(a <= slot <= b for a, b in mine):
        print('t%d' % i)
        break
PY
)
SLOT=$(redis-cli -p "$A" cluster keyslot "$TAG")
python3 - "$A" "$TAG" "$N" <<'PY'
import sys, redis
port, tag, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
p = redis.Redis(port=port).pipeline(transaction=False)
for i in range(n):
    p.set('{%s}:%d' % (tag, i), 'x' * 100)
    if i % 1000 == 999:
        p.execute()
p.execute()
PY
python3 - "$A" "${OTHER:-0}" <<'PY'
import sys, redis
port, n = int(sys.argv[1]), int(sys.argv[2])
p = redis.RedisCluster(host='127.0.0.1', port=port).pipeline(transaction=False)
for i in range(n):
    p.set('other:%d' % i, 'x' * 100)
    if i % 1000 == 999:
        p.execute()
p.execute()
PY
echo "slot $SLOT: $N keys; node dbsizes $(redis-cli -p "$A" dbsize) and $(redis-cli -p "$B" dbsize)"
python3 - "$A" "$SLOT" <<'PY'
import sys, time, redis
port, slot = int(sys.argv[1]), int(sys.argv[2])
c = redis.Redis(port=port)
# The moving slot, and a slot of the same node holding a few `other:` keys.
mine = [(s[0], s[1]) for s in c.execute_command('CLUSTER', 'SLOTS') if s[2][1] == port]
small = next((s for s in (c.execute_command('CLUSTER', 'KEYSLOT', 'other:%d' % i) for i in range(1000))
              if s != slot and any(a <= s <= b for a, b in mine)), None)
for s in [slot] + ([small] if small is not None else []):
    times = []
    for _ in range(5):
        start = time.perf_counter()
        count = c.execute_command('CLUSTER', 'COUNTKEYSINSLOT', s)
        times.append((time.perf_counter() - start) * 1000)
    print('COUNTKEYSINSLOT %s: %d, median %.1f ms' % (s, count, sorted(times)[2]))
PY
if [ -n "${LOAD:-}" ]; then
    for w in 1 2 3 4; do
        python3 - "$A" "$TAG" "$w" "$WORK/stop" <<'PY' &
import os, sys, redis
port, tag, w, stop = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
c = redis.RedisCluster(host='127.0.0.1', port=port)
while not os.path.exists(stop):
    c.incr('{%s}:load:%s' % (tag, w))
PY
        PIDS+=($!)
    done
    sleep 2
fi
from=$A
to=$B
for _ in $(seq 1 "$RUNS"); do
    redis-cli -p "$from" clusterx migrate "$SLOT" "$(redis-cli -p "$to" cluster myid)" >/dev/null
    until redis-cli -p "$from" cluster info | grep -q migrating_state:success; do
        if redis-cli -p "$from" cluster info | grep -q migrating_state:fail; then
            redis-cli -p "$from" cluster info | grep migrat >&2
            exit 1
        fi
        sleep 0.05
    done
    info=$(redis-cli -p "$from" cluster info | tr -d '\r' | grep -E 'migrating_(keys|writes|time_ms|closed_ms):' | tr '\n' ' ')
    echo "$from -> $to: $info; target dbsize $(redis-cli -p "$to" dbsize)"
    t=$from
    from=$to
    to=$t
done
