#!/usr/bin/env bash
# Compares rediskv-server with redis-server using redis-benchmark: throughput, and what each
# command costs the server in CPU time.
#
#   benches/redis_benchmark.sh                 # default tests, P=1 and P=16, 3 runs
#   TESTS=set,get,ping_mbulk N=100000 PS=16 RUNS=5 benches/redis_benchmark.sh
#   THREADS=1,2 benches/redis_benchmark.sh     # one rediskv-server per entry, with --threads N
#   ENGINE=fjall APPENDFSYNC=everysec benches/redis_benchmark.sh   # engine of every rediskv-server (default memory)
#   BASELINE=cf5e5d9 benches/redis_benchmark.sh  # also an older commit's server (its examples/server
#                                                # if it has one, else its rediskv-server --threads 1)
#   SERVER_BIN=/path/to/rediskv-server benches/redis_benchmark.sh  # that binary, not a release build
#   PGO=1 benches/redis_benchmark.sh            # the profile-guided build (scripts/build_pgo.sh)
#
# Builds `rediskv-server` in release, starts it and a redis-server on free loopback ports,
# and for each pipeline depth of PS (default 1,16; P=n alone means PS=n), each test of TESTS
# and each of RUNS runs (default 3) runs `redis-benchmark -q -n N -P <depth> -c CLIENTS -t <test>`
# against each server, one after the other. Around each it reads the server's utime+stime
# from /proc/<pid>/stat: CPU µs per command is that difference over N (all the server's
# threads; the clock tick is 10 ms, so keep N large enough for many ticks).
#
# Prints one table per depth: per command the median over the runs of redis-server's ops/s
# and CPU µs/command, then per rediskv --threads value the median ops/s, the median ratio of
# its ops/s to redis-server's, the median CPU µs/command and the median ratio of its CPU to
# redis-server's (each ratio taken within one run, then the median of those); with two
# --threads values the median ratio of the second's ops/s to the first's; with BASELINE the
# same for that server, and t1/base (the first rediskv's ops/s over the baseline's). Both
# servers are stopped on exit, whatever happens. A test whose command the engine rejects
# shows "error".
set -euo pipefail

N=${N:-200000}
PS=${PS:-${P:-1,16}}
RUNS=${RUNS:-3}
CLIENTS=${CLIENTS:-50}
TESTS=${TESTS:-set,get,incr,lpush,rpop,sadd,hset,zadd,ping_inline,ping_mbulk}
THREADS=${THREADS:-1}
ENGINE=${ENGINE:-memory}
APPENDFSYNC=${APPENDFSYNC:-everysec}
BASELINE=${BASELINE:-}

cd "$(dirname "$0")/.."


# require_tools, free_port, wait_ready, build_server
. benches/lib.sh
require_tools redis-server redis-benchmark redis-cli

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

build_server "$WORK"

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
REDIS_PID=$!
IFS=',' read -r -a THREAD_LIST <<<"$THREADS"
KV_PORTS=()
KV_PIDS=()
for threads in "${THREAD_LIST[@]}"; do
    port=$(free_port)
    while [ "$port" = "$REDIS_PORT" ] || [[ " ${KV_PORTS[*]} " == *" $port "* ]]; do port=$(free_port); done
    "$SERVER_BIN" --port "$port" --threads "$threads" --engine "$ENGINE" --save "" --dir "$WORK/data-$port" \
        --appendfsync "$APPENDFSYNC" >"$WORK/rediskv-$port.log" 2>&1 &
    PIDS+=($!)
    KV_PIDS+=($!)
    KV_PORTS+=("$port")
done
if [ -n "$BASELINE" ]; then
    BASE_PORT=$(free_port)
    while [ "$BASE_PORT" = "$REDIS_PORT" ] || [[ " ${KV_PORTS[*]} " == *" $BASE_PORT "* ]]; do BASE_PORT=$(free_port); done
    "$BASE_BIN" --port "$BASE_PORT" "${BASE_ARGS[@]}" >"$WORK/baseline.log" 2>&1 &
    PIDS+=($!)
    BASE_PID=$!
fi
wait_ready "$REDIS_PORT"
[ -n "$BASE_PORT" ] && wait_ready "$BASE_PORT"
for port in "${KV_PORTS[@]}"; do wait_ready "$port"; done

TICK=$(getconf CLK_TCK 2>/dev/null || echo 100)

# One test against one server (port, pid) at pipeline depth `p`: prints "ops/s cpu-µs/command",
# or "error error" (redis-benchmark stops at the first error reply, e.g. a command the
# engine does not implement yet).
bench_one() {
    local port=$1 pid=$2 p=$3 test=$4 out before after
    before=$(cpu_ticks "$pid")
    out=$(redis-benchmark -p "$port" -q -n "$N" -P "$p" -c "$CLIENTS" -t "$test" 2>&1 </dev/null | tr '\r' '\n' || true)
    after=$(cpu_ticks "$pid")
    echo "$out" >>"$WORK/bench-$port.txt"
    if echo "$out" | grep -q "Error from server"; then
        echo "$out" | grep -o "Error from server: .*" | head -1 | cut -c1-90 >&2
        echo "error error"
        return
    fi
    local ops
    ops=$(echo "$out" | awk '/requests per second/ { v=$2 } END { if (v == "") print "?"; else print v }')
    awk -v o="$ops" -v t=$((after - before)) -v hz="$TICK" -v n="$N" 'BEGIN { printf "%s %.2f\n", o, t * 1e6 / hz / n }'
}

# a / b with two decimals, "-" when either is not a positive number.
ratio() {
    awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else print "-" }'
}

# The median of the arguments; the first non-number among them if there is one.
median() {
    local bad
    bad=$(printf '%s\n' "$@" | grep -v -m1 -E '^[0-9]+(\.[0-9]+)?$' || true)
    if [ -n "$bad" ]; then echo "$bad"; return; fi
    printf '%s\n' "$@" | sort -g | awk '
        { v[NR] = $1 }
        END {
            if (NR == 0) print "-"
            else if (NR % 2) print v[(NR + 1) / 2]
            else printf "%.2f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2
        }'
}

IFS=',' read -r -a TEST_LIST <<<"$TESTS"
IFS=',' read -r -a P_LIST <<<"$PS"
echo "redis-benchmark -q -n $N -P <each of $PS> -c $CLIENTS -t <each of $TESTS>, $RUNS run(s) each" >&2
echo "redis-server on port $REDIS_PORT, rediskv ($ENGINE, appendfsync $APPENDFSYNC) --threads ${THREAD_LIST[*]} on ports ${KV_PORTS[*]}" >&2
for p in "${P_LIST[@]}"; do
    printf '\nP=%s: medians of %s run(s); ops/s, CPU µs/command (cpu), ratios to redis-server within each run\n' "$p" "$RUNS"
    printf '%-12s %12s %7s' "command" "redis-server" "cpu"
    for threads in "${THREAD_LIST[@]}"; do printf ' %13s %6s %7s %6s' "rediskv -t$threads" "ratio" "cpu" "ratio"; done
    [ "${#THREAD_LIST[@]}" = 2 ] && printf ' %7s' "t2/t1"
    [ -n "$BASE_PORT" ] && printf ' %13s %6s %7s %6s %7s' "$BASELINE" "ratio" "cpu" "ratio" "t1/base"
    printf '\n'
    for test in "${TEST_LIST[@]}"; do
        # Per column, one value per run.
        declare -A col=()
        for _ in $(seq 1 "$RUNS"); do
            read -r r_ops r_cpu < <(bench_one "$REDIS_PORT" "$REDIS_PID" "$p" "$test")
            col[r_ops]+=" $r_ops"
            col[r_cpu]+=" $r_cpu"
            first=
            for i in "${!KV_PORTS[@]}"; do
                read -r k_ops k_cpu < <(bench_one "${KV_PORTS[$i]}" "${KV_PIDS[$i]}" "$p" "$test" 2>"$WORK/kv-error.txt")
                col[k${i}_ops]+=" $k_ops"
                col[k${i}_ratio]+=" $(ratio "$k_ops" "$r_ops")"
                col[k${i}_cpu]+=" $k_cpu"
                col[k${i}_cpuratio]+=" $(ratio "$k_cpu" "$r_cpu")"
                [ "$i" = 0 ] && first=$k_ops
                [ "$i" = 1 ] && col[t2t1]+=" $(ratio "$k_ops" "$first")"
            done
            if [ -n "$BASE_PORT" ]; then
                read -r b_ops b_cpu < <(bench_one "$BASE_PORT" "$BASE_PID" "$p" "$test" 2>/dev/null)
                col[b_ops]+=" $b_ops"
                col[b_ratio]+=" $(ratio "$b_ops" "$r_ops")"
                col[b_cpu]+=" $b_cpu"
                col[b_cpuratio]+=" $(ratio "$b_cpu" "$r_cpu")"
                col[t1base]+=" $(ratio "$first" "$b_ops")"
            fi
        done
        m() { median ${col[$1]}; }
        printf '%-12s %12s %7s' "$test" "$(m r_ops)" "$(m r_cpu)"
        for i in "${!KV_PORTS[@]}"; do
            printf ' %13s %6s %7s %6s' "$(m k${i}_ops)" "$(m k${i}_ratio)" "$(m k${i}_cpu)" "$(m k${i}_cpuratio)"
        done
        [ "${#THREAD_LIST[@]}" = 2 ] && printf ' %7s' "$(m t2t1)"
        [ -n "$BASE_PORT" ] && printf ' %13s %6s %7s %6s %7s' "$(m b_ops)" "$(m b_ratio)" "$(m b_cpu)" "$(m b_cpuratio)" "$(m t1base)"
        printf '\n'
        unset col
    done
done
