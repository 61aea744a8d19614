#!/usr/bin/env bash
# What a dataset costs in memory and on disk: redis-server against rediskv-server.
#
#   benches/storage_cost.sh                     # N=1000000, engines memory and fjall
#   N=200000 ENGINES=fjall benches/storage_cost.sh
#   BIN=path/to/rediskv-server benches/storage_cost.sh   # a server built elsewhere
#   ENGINES=fjall,rocksdb ARGS='--cache-size 64mb' benches/storage_cost.sh
#
# Loads N `HSET bigh <random> 0123456789`, N `LPUSH biglist 0123456789` and N
# `SET k:<random> 0123456789` (redis-benchmark -P 64, random ids up to 10^8) into a
# redis-server and into one `rediskv-server --threads 1` per engine, each in its own temp
# dir on a free loopback port (ARGS: more rediskv-server flags; ENGINES with rocksdb builds
# the server with `--features rocksdb`), and prints each server's RSS growth after the load,
# its peak RSS growth (VmHWM: the highest RSS the process had), its bytes on disk after SAVE
# and (rediskv) after COMPACT (allocated blocks: fjall sizes a fresh journal file ahead
# without writing it), and each load's requests per second; then what one idle connection
# costs: the RSS growth of CONNS (default 3000) connections that each sent one PING,
# divided by CONNS. Everything is stopped on exit. Below each disk engine's row: what INFO
# memory said at the RSS reading (block cache bytes of its capacity, memtable bytes, index
# and filter blocks pinned outside the cache).
set -euo pipefail

N=${N:-1000000}
ENGINES=${ENGINES:-memory,fjall}
CONNS=${CONNS:-3000}
ulimit -n $((CONNS + 100)) 2>/dev/null || true

cd "$(dirname "$0")/.."
# require_tools, free_port, wait_ready
. benches/lib.sh
require_tools redis-server redis-benchmark redis-cli python3
if [ -z "${BIN:-}" ]; then
    echo "building rediskv-server (release)…" >&2
    features=()
    case ",$ENGINES," in *,rocksdb,*) features=(--features rocksdb) ;; esac
    cargo build --release -p rediskv-server "${features[@]}" >/dev/null 2>&1
    BIN=${CARGO_TARGET_DIR:-target}/release/rediskv-server
fi

TMP=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$TMP"; }
trap cleanup EXIT

rss_kb() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }
hwm_kb() { awk '/VmHWM/ {print $2}' "/proc/$1/status"; }
mb() { python3 -c "print(f'{$1/1048576:.1f}')"; }

# Loads the three kinds of records into the server on port `$1`; sets RATES to the
# requests per second of each load.
load() {
    local port=$1 cmd rate
    RATES=()
    for cmd in "hset bigh __rand_int__ 0123456789" "lpush biglist 0123456789" "set k:__rand_int__ 0123456789"; do
        # shellcheck disable=SC2086 # cmd is the command's words
        rate=$(redis-benchmark -p "$port" -q -P 64 -n "$N" -r 100000000 $cmd | tr '\r' '\n' |
            grep -o '[0-9.]* requests per second' | tail -1 | cut -d. -f1)
        RATES+=("$rate")
    done
}

# Bytes of RSS per idle connection of the server `$2` on port `$1`.
idle_bytes() {
    python3 - "$1" "$2" "$CONNS" <<'EOF'
import socket, sys, time
port, pid, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
rss = lambda: next(int(l.split()[1]) for l in open(f"/proc/{pid}/status") if l.startswith("VmRSS"))
before = rss()
socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(n)]
for s in socks:
    s.sendall(b"PING\r\n")
for s in socks:
    s.recv(16)
time.sleep(1)
print((rss() - before) * 1024 // n)
EOF
}

printf '%-16s %12s %12s %14s %16s %12s  %s\n' server "RSS growth MB" "peak MB" "disk after SAVE" "after COMPACT" \
    "B/idle conn" "load: HSET LPUSH SET per s"

port=$(free_port); mkdir "$TMP/redis"
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$TMP/redis" \
    --maxclients $((CONNS + 50)) >/dev/null 2>&1 &
PIDS+=($!); pid=$!; wait_ready "$port"
before=$(rss_kb "$pid"); load "$port"; after=$(rss_kb "$pid"); peak=$(hwm_kb "$pid")
redis-cli -p "$port" save >/dev/null
printf '%-16s %12s %12s %14s %16s %12s  %s\n' redis-server "$(mb $(( (after - before) * 1024 )))" \
    "$(mb $(( (peak - before) * 1024 )))" "$(mb "$(( $(du -sk "$TMP/redis" | cut -f1) * 1024 ))")" - \
    "$(idle_bytes "$port" "$pid")" "${RATES[*]}"

for engine in ${ENGINES//,/ }; do
    port=$(free_port); dir="$TMP/$engine"; mkdir "$dir"
    # shellcheck disable=SC2086 # ARGS is several flags
    "$BIN" --port "$port" --engine "$engine" --save "" --dir "$dir/data" --threads 1 --maxclients $((CONNS + 50)) \
        ${ARGS:-} >/dev/null 2>&1 &
    PIDS+=($!); pid=$!; wait_ready "$port"
    before=$(rss_kb "$pid"); load "$port"; after=$(rss_kb "$pid"); peak=$(hwm_kb "$pid")
    info=$(redis-cli -p "$port" info memory | tr -d '\r')
    field() { echo "$info" | awk -F: -v k="$1" '$1 == k {print $2}'; }
    redis-cli -p "$port" save >/dev/null
    rm -f "$dir/data/dump.rdb" # SAVE also writes an RDB file: the figure is the engine's own bytes
    saved=$(( $(du -sk "$dir" | cut -f1) * 1024 ))
    redis-cli -p "$port" compact >/dev/null
    compacted=$(( $(du -sk "$dir" | cut -f1) * 1024 ))
    if [ "$engine" = memory ]; then saved=0; compacted=0; fi
    printf '%-16s %12s %12s %14s %16s %12s  %s\n' "rediskv $engine" "$(mb $(( (after - before) * 1024 )))" \
        "$(mb $(( (peak - before) * 1024 )))" "$(mb "$saved")" "$(mb "$compacted")" \
        "$(idle_bytes "$port" "$pid")" "${RATES[*]}"
    if [ "$engine" != memory ]; then
        printf '  at the RSS reading: block cache %s of %s MB, memtables %s MB, pinned blocks %s MB\n' \
            "$(mb "$(field rediskv_block_cache_bytes)")" "$(mb "$(field rediskv_block_cache_capacity)")" \
            "$(mb "$(field rediskv_memtables_bytes)")" "$(mb "$(field rediskv_pinned_blocks_bytes)")"
    fi
done
