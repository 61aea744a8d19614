#!/usr/bin/env bash
# Replication, rediskv-server → rediskv-server beside redis-server → redis-server on the same
# data in the same run: a full sync's time and payload, then the replica's lag under
# pipelined writes.
#
#   benches/replication_benchmark.sh                   # 1M keys, fjall, 1 round
#   KEYS=200000 ROUNDS=3 benches/replication_benchmark.sh
#   SERVER_BIN=/path/to/rediskv-server benches/replication_benchmark.sh   # that binary
#
# Builds `rediskv-server` in release (unless SERVER_BIN). Writes KEYS keys of mixed types
# (per ten keys: five strings, one string with a TTL, one hash of three fields, one list, one
# set and one sorted set of three to four members) as a RESP file. Each round, for redis-server
# (`--save '' --appendonly no --repl-diskless-sync no`: a disk-based `$len` payload, as
# rediskv-server sends) and then for rediskv-server (`--engine ENGINE`, two event loops):
#   full sync: starts a primary, loads the file with `redis-cli --pipe`, starts a fresh
#              replica of the same kind and times REPLICAOF until the replica is up with the
#              primary's offset; the payload's bytes come from the servers' logs;
#   lag:       `redis-benchmark -P 16 -c 50 -n LAG_N -r KEYS -d 100 -t set` on the primary,
#              sampling every 0.1 s the primary's master_repl_offset minus the replica's
#              slave_repl_offset; prints the benchmark's rate, the median and largest lag (bytes),
#              and the seconds the replica took to catch up once the benchmark ended.
# The full sync's CPU (utime + stime) of the primary and of the replica is printed beside its
# time: on a shared machine it is the steadier figure. Every server is stopped on exit, whatever happens.
set -euo pipefail

ROUNDS=${ROUNDS:-1}
KEYS=${KEYS:-1000000}
LAG_N=${LAG_N:-1000000}
ENGINE=${ENGINE:-fjall}

cd "$(dirname "$0")/.."

# require_tools, free_port, wait_ready, build_server
. benches/lib.sh
require_tools redis-server redis-benchmark redis-cli python3

PIDS=()
WORK=$(mktemp -d)
cleanup() {
    for pid in "${PIDS[@]}"; do
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

build_server "$WORK"
TICK=$(getconf CLK_TCK)

echo "writing $KEYS keys of mixed types…" >&2
python3 - "$KEYS" >"$WORK/data.resp" <<'PY'
import sys

out = sys.stdout.buffer
def cmd(*args):
    parts = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        parts.append(b"$%d\r\n%s\r\n" % (len(a), a))
    out.write(b"".join(parts))

for i in range(int(sys.argv[1])):
    kind = i % 10
    value = b"value-%012d" % i
    if kind < 5:
        cmd("SET", f"s:{i}", value)
    elif kind == 5:
        cmd("SET", f"e:{i}", value, "EX", 1000000)
    elif kind == 6:
        cmd("HSET", f"h:{i}", "f1", value, "f2", i, "f3", "x")
    elif kind == 7:
        cmd("RPUSH", f"l:{i}", value, i, "a", "b")
    elif kind == 8:
        cmd("SADD", f"t:{i}", value, i, "a")
    else:
        cmd("ZADD", f"z:{i}", 1, value, 2.5, i, 3, "a")
PY

# Starts a server of kind `$1` (redis or rediskv) on a fresh directory; sets PORT, PID and LOG.
start() {
    local dir
    dir=$(mktemp -d "$WORK/$1.XXXX")
    PORT=$(free_port)
    LOG=$dir.log
    if [ "$1" = redis ]; then
        redis-server --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no --daemonize no \
            --repl-diskless-sync no --repl-backlog-size 256mb --dir "$dir" --logfile "$LOG" &
    else
        "$SERVER_BIN" --port "$PORT" --threads 2 --engine "$ENGINE" --save "" --dir "$dir/data" \
            --repl-backlog-size 256mb >"$LOG" 2>&1 &
    fi
    PID=$!
    PIDS+=("$PID")
    wait_ready "$PORT"
}

stop_all() {
    for pid in "${PIDS[@]}"; do
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    PIDS=()
}

# A field of INFO's section `$2` on port `$1`.
field() {
    redis-cli -p "$1" info "$2" | tr -d '\r' | awk -F: -v f="$3" '$1 == f { print $2 }'
}

now() { date +%s.%N; }

# Whether the replica on port `$2` is up with the offset of the primary on port `$1`.
caught_up() {
    [ "$(field "$2" replication master_link_status)" = up ] &&
        [ "$(field "$2" replication slave_repl_offset)" = "$(field "$1" replication master_repl_offset)" ]
}

# The median of the numbers on stdin.
median() {
    sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

RESULTS=$WORK/results
: >"$RESULTS"
for round in $(seq 1 "$ROUNDS"); do
    for server in redis rediskv; do
        start "$server"
        primary=$PORT primary_pid=$PID primary_log=$LOG
        load_start=$(now)
        redis-cli -p "$primary" --pipe <"$WORK/data.resp" >/dev/null
        load_s=$(echo "$(now) - $load_start" | bc)
        start "$server"
        replica=$PORT replica_pid=$PID replica_log=$LOG
        primary_ticks=$(cpu_ticks "$primary_pid") replica_ticks=$(cpu_ticks "$replica_pid")
        sync_start=$(now)
        redis-cli -p "$replica" replicaof 127.0.0.1 "$primary" >/dev/null
        until caught_up "$primary" "$replica"; do sleep 0.05; done
        sync_s=$(echo "$(now) - $sync_start" | bc)
        primary_cpu=$(echo "($(cpu_ticks "$primary_pid") - $primary_ticks) / $TICK" | bc -l)
        replica_cpu=$(echo "($(cpu_ticks "$replica_pid") - $replica_ticks) / $TICK" | bc -l)
        if [ "$server" = redis ]; then
            bytes=$(grep -o 'receiving [0-9]* bytes from master' "$replica_log" | awk '{ print $2 }' | tail -1)
        else
            bytes=$(grep -o ': [0-9]* bytes of RDB' "$primary_log" | grep -o '[0-9]*' | tail -1)
        fi
        keys=$(redis-cli -p "$replica" dbsize)

        : >"$WORK/lag"
        redis-benchmark -p "$primary" -P 16 -c 50 -n "$LAG_N" -r "$KEYS" -d 100 -t set --csv \
            </dev/null >"$WORK/bench.csv" 2>/dev/null &
        bench=$!
        while kill -0 "$bench" 2>/dev/null; do
            ours=$(field "$primary" replication master_repl_offset)
            theirs=$(field "$replica" replication slave_repl_offset)
            lag=$((ours - theirs))
            echo $((lag < 0 ? 0 : lag)) >>"$WORK/lag"
            sleep 0.1
        done
        wait "$bench" || true
        ended=$(now)
        until caught_up "$primary" "$replica"; do sleep 0.05; done
        catch_up_s=$(echo "$(now) - $ended" | bc)
        rate=$(tail -1 "$WORK/bench.csv" | tr -d '"' | awk -F, '{ print $2 }')
        lag_median=$(median <"$WORK/lag")
        lag_max=$(sort -g "$WORK/lag" | tail -1)
        echo "$server $round $keys $load_s $sync_s $bytes $rate $lag_median $lag_max $catch_up_s $primary_cpu $replica_cpu" >>"$RESULTS"
        stop_all
    done
    grep " $round " "$RESULTS" | awk '{ printf "round %s %-7s %8d keys  load %6.1f s  full sync %6.2f s (CPU primary %5.2f s, replica %5.2f s) %11d bytes  SET -P 16 %9.0f ops/s  lag median %10d B  max %10d B  caught up %5.2f s after\n", $2, $1, $3, $4, $5, $11, $12, $6, $7, $8, $9, $10 }'
done

echo
echo "medians of $ROUNDS rounds ($KEYS keys; rediskv: --engine $ENGINE --threads 2)"
printf '%-8s %11s %13s %13s %13s %14s %14s %14s %12s\n' server "sync s" "primary CPU s" "replica CPU s" "sync bytes" "SET ops/s" "lag median B" "lag max B" "catch-up s"
for server in redis rediskv; do
    col() { awk -v s="$server" -v c="$1" '$1 == s { print $c }' "$RESULTS" | median; }
    printf '%-8s %11.2f %13.2f %13.2f %13.0f %14.0f %14.0f %14.0f %12.2f\n' "$server" "$(col 5)" "$(col 11)" "$(col 12)" "$(col 6)" "$(col 7)" "$(col 8)" "$(col 9)" "$(col 10)"
done
