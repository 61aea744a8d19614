#!/usr/bin/env bash
# Counts the instructions each server executes per command, under valgrind's callgrind:
# redis-server beside rediskv-server, on the load redis-benchmark sends. Unlike time, a
# count does not move with what else the machine runs (two runs agree within about 1%), so
# two builds compare without alternating runs. Only user-space instructions are counted: the
# kernel's side of the socket calls, about the same for both servers, is not in them.
#
#   benches/callgrind_commands.sh                       # memory engine, P=16, the 8 commands
#   TESTS=set,lpush ENGINE=fjall APPENDFSYNC=everysec benches/callgrind_commands.sh
#   SERVER_BIN=/path/to/rediskv-server KEEP=/tmp/cg benches/callgrind_commands.sh
#   PGO=1 benches/callgrind_commands.sh                 # the profile-guided build (scripts/build_pgo.sh)
#   TESTS=evalsha,fcall benches/callgrind_commands.sh   # a script's GET and INCR, as command_benchmark.sh's
#   THREADS=2 TESTS=set,get benches/callgrind_commands.sh   # rediskv-server with two event loops
#
# Builds `rediskv-server` in release (unless SERVER_BIN), then starts redis-server and
# `rediskv-server --threads THREADS --engine ENGINE` (THREADS: 1 unless set), each under
# `valgrind --tool=callgrind` on a free loopback port, one after the other. For each test of TESTS: a warm-up run
# (`redis-benchmark -n WARM -P P -c CLIENTS -t <test>`; for `evalsha` and `fcall`, the
# script and the function of benches/command_benchmark.sh, loaded first), callgrind's counters zeroed
# (`callgrind_control -z`), the measured run of N requests, and a dump of the counters
# (`callgrind_control -d`), whose total over N is the figure. Every thread of the server is
# counted (fjall's flushes and compactions too). Prints per command redis-server's and
# rediskv-server's instructions per command and their ratio, then those of rediskv-server's
# event loop alone (the inclusive count of `conn::EventLoop::run`, named with or without
# debug info: under valgrind, which runs one thread at a time, fjall's workers can spin far
# longer than they do outside it), and each server's locked instructions per command
# (`benches/locked_instructions.py`, with python3 and objdump; "-" without them): a locked
# add or compare-exchange costs about as much as dozens of plain instructions, which the
# instruction count hides.
# CACHE=1 also simulates the caches (`--cache-sim=yes`, the host's sizes) and prints a second
# table: each server's first-level instruction cache misses per command, and the code it runs
# for every command (`benches/hot_code.py`: the 64-byte lines of instructions run at least
# once per two commands, in KiB), which the misses follow once it passes that cache's size.
# KEEP=<dir> keeps the dumps there, one per server and test, for
# `callgrind_annotate --inclusive=yes <dump>`.
set -euo pipefail

N=${N:-100000}
WARM=${WARM:-20000}
P=${P:-16}
CLIENTS=${CLIENTS:-50}
THREADS=${THREADS:-1}
TESTS=${TESTS:-set,get,incr,lpush,rpop,sadd,hset,zadd}
CACHE=${CACHE:-}
ENGINE=${ENGINE:-memory}
APPENDFSYNC=${APPENDFSYNC:-everysec}

cd "$(dirname "$0")/.."

# require_tools, free_port, build_server
. benches/lib.sh
require_tools redis-server redis-benchmark redis-cli valgrind callgrind_control

PID=
WORK=$(mktemp -d)
# Stops the server under valgrind: TERM, then KILL after 10 s (a valgrind whose threads spin
# can let TERM wait for a long while).
stop() {
    kill "$PID" 2>/dev/null || true
    for _ in $(seq 1 100); do
        # Running (any state but a zombie's Z after the name), or done.
        grep -q ') [^Z]' "/proc/$PID/stat" 2>/dev/null || break
        sleep 0.1
    done
    kill -9 "$PID" 2>/dev/null || true
    wait "$PID" 2>/dev/null || true
    PID=
}
cleanup() {
    [ -n "$PID" ] && stop
    rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

build_server "$WORK"
[ -n "${KEEP:-}" ] && mkdir -p "$KEEP"

SCRIPT="local v = redis.call('get', KEYS[1]) return redis.call('incr', KEYS[1])"
LIBRARY="#!lua name=bench
redis.register_function('getincr', function(keys) local v = redis.call('get', keys[1]) return redis.call('incr', keys[1]) end)"
# What redis-benchmark runs for a test: one of its own (-t), or a script command.
bench_args() {
    case "$1" in
        evalsha) echo "evalsha $(printf '%s' "$SCRIPT" | sha1sum | cut -d' ' -f1) 1 counter" ;;
        fcall) echo "fcall getincr 1 counter" ;;
        *) echo "-t $1" ;;
    esac
}

# measure NAME PORT -- command…: prints "test instructions-per-command" per test.
measure() {
    local name=$1 port=$2
    shift 3
    local sim=()
    [ -n "$CACHE" ] && sim=(--cache-sim=yes)
    valgrind --tool=callgrind --dump-instr=yes "${sim[@]}" --callgrind-out-file="$WORK/$name.%p" "$@" >"$WORK/$name.log" 2>&1 &
    PID=$!
    for _ in $(seq 1 600); do
        [ "$(redis-cli -p "$port" ping 2>/dev/null)" = "PONG" ] && break
        kill -0 "$PID" 2>/dev/null || { cat "$WORK/$name.log" >&2; exit 1; }
        sleep 0.1
    done
    redis-cli -p "$port" script load "$SCRIPT" >/dev/null
    redis-cli -p "$port" function load "$LIBRARY" >/dev/null
    local test dump total args
    for test in ${TESTS//,/ }; do
        read -r -a args <<<"$(bench_args "$test")"
        redis-benchmark -p "$port" -q -n "$WARM" -P "$P" -c "$CLIENTS" "${args[@]}" >/dev/null 2>&1
        callgrind_control -z "$PID" >/dev/null 2>&1
        redis-benchmark -p "$port" -q -n "$N" -P "$P" -c "$CLIENTS" "${args[@]}" >/dev/null 2>&1
        callgrind_control -d "$test" "$PID" >/dev/null 2>&1
        dump=$(ls -t "$WORK/$name.$PID".* | head -1)
        total=$(awk '/^(summary|totals):/ { print $2; exit }' "$dump")
        # rediskv's event loop alone: its inclusive count (redis-server runs in one thread).
        loop=$total
        if [ "$name" = rediskv ]; then
            loop=$(callgrind_annotate --inclusive=yes "$dump" 2>/dev/null |
                awk '/rediskv_server::conn::EventLoop::run \[/ && !found {
                    gsub(",", "", $1); print $1; found = 1 }')
        fi
        locked=-
        if command -v python3 >/dev/null && command -v objdump >/dev/null; then
            locked=$(python3 benches/locked_instructions.py "$dump" "$N")
        fi
        # I1 misses: the fourth event of a cache-simulating dump (Ir Dr Dw I1mr …).
        i1=- hot=-
        if [ -n "$CACHE" ]; then
            i1=$(awk -v n="$N" '/^(summary|totals):/ { printf "%.1f", $5 / n; exit }' "$dump")
            command -v python3 >/dev/null && hot=$(python3 benches/hot_code.py "$dump" "$N" | cut -d' ' -f1)
        fi
        [ -n "${KEEP:-}" ] && cp "$dump" "$KEEP/$name.$test"
        echo "$test $((total / N)) $((${loop:-0} / N)) $locked $i1 $hot"
    done
    stop
}

REDIS_PORT=$(free_port)
echo "redis-server under callgrind…" >&2
measure redis "$REDIS_PORT" -- redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' \
    --appendonly no --daemonize no --dir "$WORK" --loglevel warning >"$WORK/redis.counts"
KV_PORT=$(free_port)
echo "rediskv-server ($ENGINE) under callgrind…" >&2
measure rediskv "$KV_PORT" -- "$SERVER_BIN" --port "$KV_PORT" --threads "$THREADS" --engine "$ENGINE" --save "" \
    --dir "$WORK/data" --appendfsync "$APPENDFSYNC" >"$WORK/rediskv.counts"

echo "instructions per command, P=$P, -c $CLIENTS, N=$N ($ENGINE engine)"
printf '%-8s %14s %14s %7s %14s %7s %14s %9s\n' command redis-server rediskv ratio "event loop" ratio \
    "locked redis" rediskv
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
paste -d' ' "$WORK/redis.counts" "$WORK/rediskv.counts" |
    while read -r test redis _ redis_locked _ _ _ kv loop kv_locked _ _; do
        printf '%-8s %14s %14s %7s %14s %7s %14s %9s\n' "${test^^}" "$redis" "$kv" "$(ratio "$kv" "$redis")" \
            "$loop" "$(ratio "$loop" "$redis")" "$redis_locked" "$kv_locked"
    done
if [ -n "$CACHE" ]; then
    echo
    echo "first-level instruction cache misses per command, and KiB of code run for every command"
    printf '%-8s %14s %9s %14s %9s\n' command "I1 miss redis" rediskv "code redis" rediskv
    paste -d' ' "$WORK/redis.counts" "$WORK/rediskv.counts" |
        while read -r test _ _ _ redis_i1 redis_hot _ _ _ _ kv_i1 kv_hot; do
            printf '%-8s %14s %9s %14s %9s\n' "${test^^}" "$redis_i1" "$kv_i1" "$redis_hot" "$kv_hot"
        done
fi
