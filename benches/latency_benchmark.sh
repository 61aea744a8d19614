#!/usr/bin/env bash
# Compares rediskv-server with redis-server where a disk engine differs most: the latency
# tail of unpipelined requests on random keys, and the rate of large values.
#
#   benches/latency_benchmark.sh                        # fjall, everysec, 5 rounds
#   ROUNDS=3 ENGINE=memory benches/latency_benchmark.sh
#   SERVER_BIN=/path/to/rediskv-server benches/latency_benchmark.sh   # that binary
#   PGO=1 benches/latency_benchmark.sh                  # the profile-guided build (scripts/build_pgo.sh)
#   BASE_BIN=/path/to/older/rediskv-server benches/latency_benchmark.sh   # also that binary
#
# Builds `rediskv-server` in release (unless SERVER_BIN). Each of ROUNDS rounds starts
# redis-server (`--save '' --appendonly no`), then `rediskv-server --threads 1 --engine ENGINE
# --appendfsync APPENDFSYNC`, each on a fresh directory and a free loopback port, and runs
# against each in turn:
#   tail:  redis-benchmark -n N -c CLIENTS -r KEYSPACE -d 3 -t set, then -t get on the store
#          the SETs left (with the defaults about a tenth of the GETs find their key)
#   large: on fresh servers again, redis-benchmark -n LARGE_N -c LARGE_CLIENTS -d LARGE_BYTES
#          -t set, then -t get
# and stops it. Prints each round's ops/s, p99 and longest request (ms, from `--csv`), then
# per test the median of each over the rounds and the medians of two ratios taken within
# each round: rediskv's ops/s over redis-server's, and rediskv's p99 over redis-server's.
# With BASE_BIN, each round also runs that rediskv-server the same way, after the other two,
# and its columns follow (its ratios to redis-server taken within each round, as rediskv's).
# Every server is stopped on exit, whatever happens.
set -euo pipefail

ROUNDS=${ROUNDS:-5}
N=${N:-100000}
CLIENTS=${CLIENTS:-50}
KEYSPACE=${KEYSPACE:-1000000}
LARGE_N=${LARGE_N:-20000}
LARGE_CLIENTS=${LARGE_CLIENTS:-10}
LARGE_BYTES=${LARGE_BYTES:-100000}
ENGINE=${ENGINE:-fjall}
BASE_BIN=${BASE_BIN:-}
APPENDFSYNC=${APPENDFSYNC:-everysec}

cd "$(dirname "$0")/.."

# require_tools, free_port, wait_ready, build_server
. benches/lib.sh
require_tools redis-server redis-benchmark redis-cli

PID=
WORK=$(mktemp -d)
cleanup() {
    [ -n "$PID" ] && { kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; }
    rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

build_server "$WORK"

# Starts server `$1` (redis or rediskv) on a fresh directory; sets PID and PORT.
start() {
    local dir
    dir=$(mktemp -d "$WORK/$1.XXXX")
    PORT=$(free_port)
    local bin=$SERVER_BIN
    [ "$1" = base ] && bin=$BASE_BIN
    if [ "$1" = redis ]; then
        redis-server --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no --daemonize no \
            --dir "$dir" --loglevel warning >"$dir.log" 2>&1 &
    else
        "$bin" --port "$PORT" --threads 1 --engine "$ENGINE" --save "" --dir "$dir/data" \
            --appendfsync "$APPENDFSYNC" >"$dir.log" 2>&1 &
    fi
    PID=$!
    wait_ready "$PORT"
}

stop() {
    kill "$PID" 2>/dev/null || true
    wait "$PID" 2>/dev/null || true
    PID=
}

# Runs redis-benchmark with the arguments given against PORT; prints "ops/s p99 max".
bench() {
    redis-benchmark -p "$PORT" --csv "$@" </dev/null 2>/dev/null | tail -1 | tr -d '"' \
        | awk -F, '{ print $2, $7, $8 }'
}

RESULTS=$WORK/results
: >"$RESULTS"
for round in $(seq 1 "$ROUNDS"); do
    for server in redis rediskv ${BASE_BIN:+base}; do
        start "$server"
        echo "tail-set $server $round $(bench -n "$N" -c "$CLIENTS" -r "$KEYSPACE" -d 3 -t set)" >>"$RESULTS"
        echo "tail-get $server $round $(bench -n "$N" -c "$CLIENTS" -r "$KEYSPACE" -d 3 -t get)" >>"$RESULTS"
        stop
        start "$server"
        echo "large-set $server $round $(bench -n "$LARGE_N" -c "$LARGE_CLIENTS" -d "$LARGE_BYTES" -t set)" >>"$RESULTS"
        echo "large-get $server $round $(bench -n "$LARGE_N" -c "$LARGE_CLIENTS" -d "$LARGE_BYTES" -t get)" >>"$RESULTS"
        stop
    done
    grep " $round " "$RESULTS" | awk '{ printf "round %s %-9s %-7s %10.0f ops/s  p99 %7.3f ms  max %7.3f ms\n", $3, $1, $2, $4, $5, $6 }'
done

# The median of the numbers on stdin.
median() {
    sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

SERVERS="rediskv ${BASE_BIN:+base}"
echo
echo "medians of $ROUNDS rounds (rediskv: --engine $ENGINE --appendfsync $APPENDFSYNC --threads 1${BASE_BIN:+; base: $BASE_BIN})"
printf '%-10s %12s %9s %9s' test "redis ops/s" "p99 ms" "max ms"
for server in $SERVERS; do
    printf ' %13s %9s %9s %10s %10s' "$server ops/s" "p99 ms" "max ms" "ops ratio" "p99 ratio"
done
printf '\n'
for test in tail-set tail-get large-set large-get; do
    col() { awk -v t="$test" -v s="$1" -v c="$2" '$1 == t && $2 == s { print $c }' "$RESULTS" | median; }
    # Per round: server $1's figure over redis-server's.
    ratio() {
        awk -v t="$test" -v s="$1" -v c="$2" '$1 == t { v[$2 " " $3] = $c; r[$3] = 1 }
            END { for (i in r) if (v["redis " i] > 0) print v[s " " i] / v["redis " i] }' "$RESULTS" | median
    }
    printf '%-10s %12.0f %9.3f %9.3f' "$test" "$(col redis 4)" "$(col redis 5)" "$(col redis 6)"
    for server in $SERVERS; do
        printf ' %13.0f %9.3f %9.3f %10.2f %10.2f' "$(col "$server" 4)" "$(col "$server" 5)" "$(col "$server" 6)" \
            "$(ratio "$server" 4)" "$(ratio "$server" 5)"
    done
    printf '\n'
done
