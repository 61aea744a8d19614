#!/usr/bin/env bash
# Garbage collection through the server (memory engine): load a hash of FIELDS fields,
# measure GET/SET throughput, DEL the hash, and measure the same load again while the
# collector reclaims its records; report how long the store's byte count takes to come back
# within 5% of its value before the load, and the throughput ratio (during / before).
#
#   benches/gc_server.sh                  # FIELDS=1000000 N=400000 THREADS=2
set -euo pipefail

FIELDS=${FIELDS:-1000000}
N=${N:-400000}
THREADS=${THREADS:-2}
cd "$(dirname "$0")/.."
. benches/lib.sh
require_tools redis-cli redis-benchmark python3
cargo build --release -p rediskv-server >/dev/null 2>&1
BIN=${CARGO_TARGET_DIR:-target}/release/rediskv-server
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$BIN" --engine memory --save "" --threads "$THREADS" --port "$PORT" 2>/dev/null &
PID=$!
trap 'kill $PID 2>/dev/null || true' EXIT
for _ in $(seq 100); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.05; done

used() { redis-cli -p "$PORT" info memory | tr -d '\r' | awk -F: '/^used_memory:/ { print $2 }'; }
bench() {
    redis-benchmark -p "$PORT" -q -n "$N" -P 16 -c 50 -r 100000 -t set,get 2>/dev/null | tr '\r' '\n' |
        awk '/requests per second/ { sum += $2 } END { printf "%.0f", sum / 2 }'
}

base=$(used)
python3 - "$FIELDS" <<'EOF' | redis-cli -p "$PORT" --pipe >/dev/null
import sys
n = int(sys.argv[1])
out = sys.stdout.buffer
for start in range(0, n, 1000):
    args = [b"HSET", b"big"]
    for i in range(start, min(n, start + 1000)):
        args += [b"field:%d" % i, b"value-%d" % i]
    out.write(b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args))
EOF
loaded=$(used)
before=$(bench)
base2=$(used)
start=$(date +%s.%N)
redis-cli -p "$PORT" del big >/dev/null
OUT=$(mktemp)
bench >"$OUT" 2>/dev/null &
BPID=$!
# The benchmark's own keys stay: the target is the bytes before the load plus theirs.
limit=$((base2 - loaded + base + (loaded - base) / 20))
while [ "$(used)" -gt "$limit" ]; do sleep 0.1; done
back=$(python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.2f}')" "$start" "$(date +%s.%N)")
wait $BPID
during=$(cat "$OUT"); rm -f "$OUT"
echo "fields $FIELDS, threads $THREADS: bytes $base → $loaded (loaded) → back within 5% in ${back}s"
echo "GET/SET ops/s before DEL $before, while collecting $during, ratio $(python3 -c "print(f'{$during / $before:.2f}')")"
