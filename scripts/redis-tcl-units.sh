#!/usr/bin/env bash
# Runs units of Redis 7.0.15's own TCL test suite against rediskv-server (or redis-server), each
# unit on a fresh server: a new process on a free loopback port with a new temporary data
# directory, stopped after the unit. Prints one line per unit and a total.
#
# Redis' test files are not part of this repository. Put them in a directory of their own
# (REDIS_TESTS, default /tmp/redis-7.0.15-tests) from Redis' repository at tag 7.0.15:
#   git clone --branch 7.0.15 --depth 1 https://github.com/redis/redis /tmp/redis
#   mkdir -p /tmp/redis-7.0.15-tests
#   git -C /tmp/redis archive 7.0.15 tests runtest | tar -x -C /tmp/redis-7.0.15-tests
#
# usage: scripts/redis-tcl-units.sh [extra runtest args]   (e.g. --only NAME, --skiptest NAME)
# env:
#   ENGINE        memory | fjall | rocksdb: rediskv-server's engine; redis: redis-server 7.0.15
#                 (default memory)
#   SERVER        the server binary; default: target/release/rediskv-server, built first by
#                 `cargo build --release -p rediskv-server` (with `--features rocksdb` for
#                 rocksdb); for ENGINE=redis, redis-server from PATH
#   THREADS       rediskv-server's --threads (default 1)
#   UNITS         space-separated units (default: the 36 of docs/compatibility.md's table)
#   UNIT_TIMEOUT  seconds a unit may take before it is stopped (default 600)
#   TEST_TIMEOUT  runtest --timeout: seconds without a test finishing before the unit is
#                 given up (default 300: geo's fuzzy tests take over a minute each)
#   TAGS          runtest --tags arguments (default "-needs:debug -needs:repl")
#   FLAGS         runtest flags (default "--durable --ignore-encoding --ignore-digest")
#   REDIS_TESTS   where Redis' tests/ and runtest are (see above)
#   LOGDIR        each unit's runtest and server logs (default target/redis-tcl-logs/ENGINE)
#   BASEPORT      runtest --baseport (default: random in 22000-31950)
# output: "UNIT passed/run ok=N err=M exception=K secs=T status=done|aborted|timeout" per unit
# (run: tests that reported ok or err), then "TOTAL passed/run ...". Exit 0 iff nothing failed.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
ENGINE=${ENGINE:-memory}
THREADS=${THREADS:-1}
UNIT_TIMEOUT=${UNIT_TIMEOUT:-600}
TEST_TIMEOUT=${TEST_TIMEOUT:-300}
TAGS=${TAGS:-"-needs:debug -needs:repl"}
FLAGS=${FLAGS:-"--durable --ignore-encoding --ignore-digest"}
REDIS_TESTS=${REDIS_TESTS:-/tmp/redis-7.0.15-tests}
LOGDIR=${LOGDIR:-$ROOT/target/redis-tcl-logs/$ENGINE}
UNITS=${UNITS:-"unit/type/string unit/type/incr unit/type/list unit/type/list-2 unit/type/list-3
 unit/type/set unit/type/zset unit/type/hash unit/type/stream unit/type/stream-cgroups
 unit/pubsub unit/expire unit/keyspace unit/multi unit/bitfield unit/bitops unit/geo unit/sort
 unit/scan unit/protocol unit/info-command unit/introspection unit/introspection-2 unit/other
 unit/quit unit/slowlog unit/pause unit/lazyfree unit/dump unit/functions unit/hyperloglog
 unit/latency-monitor unit/querybuf unit/tracking unit/scripting unit/acl"}

[ -f "$REDIS_TESTS/tests/test_helper.tcl" ] || {
    echo "Redis 7.0.15's tests are not in $REDIS_TESTS (see the head of $0)" >&2; exit 2; }
TCLSH=$(command -v tclsh8.6 || command -v tclsh) || { echo "tclsh not found" >&2; exit 2; }

case $ENGINE in
memory | fjall | rocksdb)
    if [ -z "${SERVER:-}" ]; then
        features=()
        [ "$ENGINE" = rocksdb ] && features=(--features rocksdb)
        (cd "$ROOT" && cargo build --release -p rediskv-server "${features[@]}") || exit 2
        SERVER=$ROOT/target/release/rediskv-server
    fi ;;
redis) SERVER=${SERVER:-$(command -v redis-server)} || { echo "redis-server not found" >&2; exit 2; } ;;
*) echo "ENGINE must be memory, fjall, rocksdb or redis" >&2; exit 2 ;;
esac

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Starts the server on port $1 with data directory $2, logging to $3; sets SERVER_PID.
start_server() {
    if [ "$ENGINE" = redis ]; then
        "$SERVER" --port "$1" --bind 127.0.0.1 --dir "$2" --save "" --appendonly no \
            --enable-debug-command yes > "$3" 2>&1 &
    else
        "$SERVER" --port "$1" --bind 127.0.0.1 --engine "$ENGINE" --dir "$2" \
            --threads "$THREADS" --enable-debug-command yes > "$3" 2>&1 &
    fi
    SERVER_PID=$!
    for _ in $(seq 100); do
        (exec 3<> "/dev/tcp/127.0.0.1/$1") 2> /dev/null && return 0
        kill -0 "$SERVER_PID" 2> /dev/null || break
        sleep 0.1
    done
    echo "the server did not start: see $3" >&2
    return 1
}

stop_server() {
    kill "$SERVER_PID" 2> /dev/null
    wait "$SERVER_PID" 2> /dev/null
}

mkdir -p "$LOGDIR" "$REDIS_TESTS/tests/tmp"
# The runner's own ports (its test server, the servers a unit starts itself): a range of
# this run's, so that runs side by side do not meet.
BASEPORT=${BASEPORT:-$((22000 + RANDOM % 200 * 50))}
total_ok=0 total_err=0 total_exc=0
for unit in $UNITS; do
    name=$(echo "$unit" | tr / _)
    log=$LOGDIR/$name.log
    data=$(mktemp -d)
    port=$(free_port)
    if ! start_server "$port" "$data" "$LOGDIR/$name.server.log"; then
        rm -rf "$data"
        exit 2
    fi
    start=$(date +%s)
    # shellcheck disable=SC2086
    (cd "$REDIS_TESTS" && TERM=dumb timeout -k 10 "$UNIT_TIMEOUT" "$TCLSH" tests/test_helper.tcl \
        --host 127.0.0.1 --port "$port" --single "$unit" --tags "$TAGS" $FLAGS --timeout "$TEST_TIMEOUT" --baseport "$BASEPORT" "$@") \
        > "$log" 2>&1
    rc=$?
    secs=$(($(date +%s) - start))
    stop_server
    rm -rf "$data"
    ok=$(grep -c '^\[ok\]' "$log")
    err=$(grep -c '^\[err\]' "$log")
    exc=$(grep -c '^\[exception\]' "$log")
    if [ $rc -eq 124 ] || [ $rc -eq 137 ] || grep -q '\[TIMEOUT\]' "$log"; then
        status=timeout
    elif grep -q "^\[1/1 done\]: $unit " "$log"; then
        status=done
    else
        status=aborted
    fi
    echo "$unit $ok/$((ok + err)) ok=$ok err=$err exception=$exc secs=$secs status=$status"
    total_ok=$((total_ok + ok)) total_err=$((total_err + err)) total_exc=$((total_exc + exc))
done
echo "TOTAL $total_ok/$((total_ok + total_err)) ok=$total_ok err=$total_err exception=$total_exc"
[ $((total_err + total_exc)) -eq 0 ]
