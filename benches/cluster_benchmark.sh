#!/usr/bin/env bash
# Throughput of 1, 2 and 3 cluster nodes, and over the etcd engine of 1, 2 and 3 etcd clusters
# holding the data, with the CPU each command costs the nodes and the etcds.
#
#   benches/cluster_benchmark.sh                        # NODES=1,2,3 STORES=1,2,3 N=10000
#   NODES=3 STORES=1,2,3 ETCD_CPU=0.2 NODE_CPU=0.3 RUNS=3 benches/cluster_benchmark.sh
#   ENGINE=fjall LOAD=cluster NODES=1,2,3 N=100000 NODE_CPU=0.1 RUNS=3 benches/cluster_benchmark.sh
#   SERVER_BIN=path/to/rediskv-server benches/cluster_benchmark.sh   # a server built elsewhere
#
# For each number of etcd clusters (STORES) and of nodes, RUNS times: starts that many etcd
# clusters of ETCD_MEMBERS members each (fsync on, limits raised as the tests do, in a temp
# dir) and that many `rediskv-server --cluster-enabled yes --threads $THREADS` on loopback:
#
# - ENGINE=etcd: nodes over the etcd engine, the first etcd cluster keeping the slot table
#   (and, alone, the data), each further one given with `--cluster-etcd-store` (the slots
#   spread over the clusters by range);
# - ENGINE=fjall: each node keeps its own slots' data in fjall, and the slot table in the one
#   etcd cluster (`--cluster-etcd`; STORES is 1).
#
# The load, per test (set, get, incr; `-n $N -P $P -c $CLIENTS -r 100000`):
#
# - LOAD=slots (the default): one `redis-benchmark` per share of the slots that one node
#   serves and one etcd cluster holds, each sending `SET key:{tag}:__rand_int__ xxx` (GET,
#   INCR counter:…) with a hash tag of its share to its node, with clients and requests in
#   proportion to the share's slots: every node and every etcd cluster gets its share of the
#   load, as keys spread over all slots give them. `redis-benchmark --cluster` does not:
#   it sends every key of a node to the node's first slot, so two of three nodes' keys can
#   land in one etcd cluster and another cluster get none.
# - LOAD=cluster: `redis-benchmark --cluster` (without `--cluster` for one node, which
#   redis-benchmark refuses), as a user runs it.
#
# The rate is the requests over the wall-clock time of the whole load. CPU is the utime +
# stime of every node and every etcd member from /proc/<pid>/stat before and after, as µs
# per command; "etcd busy" ("nodes busy") is the etcds' (nodes') CPU over the time, in cores,
# or under ETCD_CPU (NODE_CPU) in % of their caps: near 100% is the capped side at its limit.
# The load column is the 1-minute load average at the start of each test (lowest–highest).
#
# Caps, to emulate machines of a fixed size on one machine (cgroup v1's cpu controller,
# mounted at /sys/fs/cgroup/cpu; root): ETCD_CPU=0.2 puts each etcd cluster's members in a
# cgroup of its own allowed 0.2 of a core (a 10 ms period, so a capped process is never held
# back for long), NODE_CPU=0.3 each node in its own, and with either the redis-benchmarks
# share one of CLIENT_CPU (1) core. Each such cgroup also weighs 100 times a process of the
# machine's (cpu.shares), so that it gets its cap on a machine busy with other work: a machine
# of that size of its own. The cgroups are removed on exit.
#
# RUNS>1 prints each figure's median over the runs with its lowest and highest. Everything is
# stopped on exit.
set -euo pipefail

ENGINE=${ENGINE:-etcd}
NODES=${NODES:-1,2,3}
STORES=${STORES:-1,2,3}
N=${N:-10000}
P=${P:-16}
CLIENTS=${CLIENTS:-50}
TESTS=${TESTS:-set,get,incr}
RUNS=${RUNS:-1}
LOAD=${LOAD:-slots}
ETCD_MEMBERS=${ETCD_MEMBERS:-1}
ETCD_CPU=${ETCD_CPU:-}
NODE_CPU=${NODE_CPU:-}
CLIENT_CPU=${CLIENT_CPU:-1}
# Where the etcd members keep their data (a temp dir; /dev/shm for a disk whose fsync costs
# nothing).
ETCD_DIR=${ETCD_DIR:-}
# Event loops per node: over the etcd engine each waits on etcd while it runs a command.
THREADS=${THREADS:-16}
CGROUP_ROOT=/sys/fs/cgroup/cpu
CPU_PERIOD_US=10000
# A capped group's weight against the machine's other processes (1024 each): it gets its cap
# even on a busy machine.
CPU_SHARES=102400

cd "$(dirname "$0")/.."
# require_tools, free_port, start_until_ready
. benches/lib.sh
require_tools etcd redis-benchmark redis-cli
case "$ENGINE" in
    etcd) ENGINE_FEATURES=etcd ;;
    fjall) ENGINE_FEATURES=etcd STORES=1 ;;
    *) echo "ENGINE is etcd or fjall" >&2; exit 1 ;;
esac
WORK=$(mktemp -d)
ETCD_WORK=$(mktemp -d ${ETCD_DIR:+-p "$ETCD_DIR"})
PIDS=()
CGROUPS=()
stop_all() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    PIDS=()
    for group in "${CGROUPS[@]}"; do rmdir "$group" 2>/dev/null || true; done
    CGROUPS=()
    # The data of the round (the logs stay).
    find "$ETCD_WORK" "$WORK" -mindepth 1 -maxdepth 1 -type d -exec rm -rf {} +
}
cleanup() {
    stop_all
    rm -rf "$WORK" "$ETCD_WORK"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
if [ -z "${SERVER_BIN:-}" ]; then
    echo "building rediskv-server (release, $ENGINE_FEATURES feature)…" >&2
    cargo build --release -p rediskv-server --features "$ENGINE_FEATURES" >"$WORK/build.log" 2>&1 \
        || { cat "$WORK/build.log" >&2; exit 1; }
    SERVER_BIN=${CARGO_TARGET_DIR:-target}/release/rediskv-server
fi
TICK_US=$((1000000 / $(getconf CLK_TCK)))

# Sets GROUP to a new cgroup $1 allowed $2 of a core (to nothing when $2 is empty).
make_cgroup() {
    GROUP=""
    [ -n "$2" ] || return 0
    [ -w "$CGROUP_ROOT" ] || { echo "a CPU cap needs cgroup v1's cpu controller at $CGROUP_ROOT (as root)" >&2; exit 1; }
    GROUP="$CGROUP_ROOT/rediskv-bench-$$-$1"
    mkdir "$GROUP"
    CGROUPS+=("$GROUP")
    echo "$CPU_PERIOD_US" >"$GROUP/cpu.cfs_period_us"
    echo "$CPU_SHARES" >"$GROUP/cpu.shares"
    awk -v cap="$2" -v period="$CPU_PERIOD_US" 'BEGIN { printf "%d\n", cap * period }' >"$GROUP/cpu.cfs_quota_us"
}

# Runs the command given in cgroup $1 (none when empty), every thread of it from its start,
# in place of the shell: call it in the background (`exec_in_cgroup "$group" cmd &`), so
# that $! is the command's pid.
exec_in_cgroup() {
    local group=$1
    shift
    [ -z "$group" ] || exec sh -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$group" "$@"
    exec "$@"
}

# Starts etcd cluster $1 of ETCD_MEMBERS members in cgroup $2; sets CLUSTER_URLS (the client
# URLs, comma-separated) and adds the members' pids to ETCD_PIDS.
start_etcd_cluster() {
    local name=$1 group=$2 i initial="" clients=() peers=()
    for i in $(seq 1 "$ETCD_MEMBERS"); do
        clients+=("$(free_port)")
        peers+=("$(free_port)")
        initial+="${initial:+,}$name-$i=http://127.0.0.1:${peers[-1]}"
    done
    CLUSTER_URLS=""
    for i in $(seq 1 "$ETCD_MEMBERS"); do
        local client=${clients[$((i - 1))]} peer=${peers[$((i - 1))]}
        exec_in_cgroup "$group" etcd --name "$name-$i" --data-dir "$ETCD_WORK/$name-$i" \
            --listen-client-urls "http://127.0.0.1:$client" --advertise-client-urls "http://127.0.0.1:$client" \
            --listen-peer-urls "http://127.0.0.1:$peer" --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
            --initial-cluster "$initial" --initial-cluster-state new \
            --max-txn-ops 100000 --max-request-bytes 67108864 --log-level error --logger zap \
            >"$WORK/$name-$i.log" 2>&1 &
        ETCD_PIDS+=("$!")
        PIDS+=("$!")
        CLUSTER_URLS+="${CLUSTER_URLS:+,}http://127.0.0.1:$client"
    done
}

# Starts node $1 (port $2) in cgroup $3 with the engine's flags; adds its pid to NODE_PIDS.
start_node() {
    local name=$1 port=$2 group=$3 engine
    if [ "$ENGINE" = etcd ]; then
        engine=(--engine etcd --etcd-endpoints "${ENDPOINTS[0]}" --etcd-max-txn-ops 100000
            --etcd-max-request-bytes 67108864 "${DATA[@]}")
    else
        engine=(--engine fjall --dir "$WORK/$name" --cluster-etcd "${ENDPOINTS[0]}"
            --cluster-initial-nodes "$nodes")
    fi
    start_until_ready "$port" "$WORK/$name.log" exec_in_cgroup "$group" "$SERVER_BIN" "${engine[@]}" \
        --etcd-prefix bench/ --port "$port" --threads "$THREADS" --cluster-enabled yes
    NODE_PIDS+=("$SERVER_PID")
    PIDS+=("$SERVER_PID")
}

# The slot ranges of the nodes, one "first last port" a line (CLUSTER NODES of node $1).
node_ranges() {
    redis-cli -p "$1" cluster nodes | awk '{
        split($2, address, "[:@]")
        for (i = 9; i <= NF; i++) { n = split($i, r, "-"); print r[1], r[n], address[2] }
    }'
}

# A hash tag whose slot is within [$2, $3] (asks node $1).
tag_in() {
    local i slot
    for i in $(seq 1 100000); do
        slot=$(redis-cli -p "$1" cluster keyslot "t$i")
        if [ "$slot" -ge "$2" ] && [ "$slot" -le "$3" ]; then echo "t$i"; return; fi
    done
}

# The shares of the load, one "port tag clients requests" a line: each node's slots cut at
# the ranges of the etcd clusters, with clients and requests in proportion to their slots.
shares() {
    local first last port store lo hi clients requests
    while read -r first last port; do
        for store in $(seq 0 $((stores - 1))); do
            lo=$(((store * 16384 + stores - 1) / stores))
            hi=$((((store + 1) * 16384 + stores - 1) / stores - 1))
            if [ "$first" -gt "$lo" ]; then lo=$first; fi
            if [ "$last" -lt "$hi" ]; then hi=$last; fi
            # The node serves none of this cluster's slots.
            if [ "$hi" -lt "$lo" ]; then continue; fi
            clients=$(((CLIENTS * (hi - lo + 1) + 8192) / 16384))
            requests=$((N * (hi - lo + 1) / 16384))
            # A share smaller than half a client's gets no load (a few slots left by a rebalance).
            if [ "$clients" -eq 0 ] || [ "$requests" -eq 0 ]; then continue; fi
            echo "$port $(tag_in "$port" "$lo" "$hi") $clients $requests"
        done
    done < <(node_ranges "${PORTS[0]}")
}

# Runs test $1 as LOAD says; prints the requests sent.
run_load() {
    local test=$1 cluster=(--cluster) port tag clients requests sent=0 key
    if [ "$LOAD" = cluster ]; then
        # redis-benchmark refuses --cluster with one node; its keys span every slot anyway.
        [ "$nodes" -gt 1 ] || cluster=()
        exec_in_cgroup "$CLIENT_GROUP" redis-benchmark "${cluster[@]}" -p "${PORTS[0]}" -q \
            -r 100000 -n "$N" -P "$P" -c "$CLIENTS" -t "$test" >"$WORK/load.out" 2>&1 </dev/null &
        wait "$!"
        echo "$N"
        return
    fi
    local loads=()
    while read -r port tag clients requests; do
        case "$test" in
            set) key=(SET "key:{$tag}:__rand_int__" xxx) ;;
            get) key=(GET "key:{$tag}:__rand_int__") ;;
            incr) key=(INCR "counter:{$tag}:__rand_int__") ;;
            *) echo "LOAD=slots runs set, get and incr" >&2; exit 1 ;;
        esac
        exec_in_cgroup "$CLIENT_GROUP" redis-benchmark -p "$port" -q -r 100000 -n "$requests" \
            -P "$P" -c "$clients" "${key[@]}" >"$WORK/load-$port-$tag.out" 2>&1 </dev/null &
        loads+=("$!")
        sent=$((sent + requests))
    done <"$WORK/shares"
    wait "${loads[@]}"
    echo "$sent"
}

# The CPU time $1 (µs) over the time $2 (µs) of $4 processes or groups: in % of their caps of
# $3 of a core each, or in cores when $3 is empty.
busy() {
    awk -v used="$1" -v time="$2" -v cap="$3" -v count="$4" 'BEGIN {
        if (cap == "") printf "%.2f\n", used / time; else printf "%d%%\n", 100 * used / (time * cap * count)
    }'
}

# "median (lowest–highest)" of the numbers on stdin, or the one number.
median() {
    sort -n | awk '{ v[NR] = $1 } END { m = v[int((NR + 1) / 2)]; if (NR == 1) print m; else printf "%s (%s–%s)\n", m, v[1], v[NR] }'
}

caps=""
[ -z "$ETCD_CPU" ] || caps+=", each etcd cluster capped at $ETCD_CPU of a core"
[ -z "$NODE_CPU" ] || caps+=", each node capped at $NODE_CPU of a core"
echo "$ENGINE nodes, LOAD=$LOAD, -n $N -P $P -c $CLIENTS -r 100000; --threads $THREADS;" \
    "$ETCD_MEMBERS-member etcd clusters$caps; $(nproc) cores; $RUNS run(s)" >&2
printf '| etcd clusters | nodes | command | ops/s | node CPU µs/cmd | etcd CPU µs/cmd | etcd busy | nodes busy | load (1 min) |\n'
printf '|---|---|---|---|---|---|---|---|---|\n'
IFS=',' read -r -a STORE_COUNTS <<<"$STORES"
IFS=',' read -r -a NODE_COUNTS <<<"$NODES"
IFS=',' read -r -a TEST_LIST <<<"$TESTS"
round=0
for stores in "${STORE_COUNTS[@]}"; do
    for nodes in "${NODE_COUNTS[@]}"; do
        for test in "${TEST_LIST[@]}"; do : >"$WORK/results-$test"; done
        for _ in $(seq 1 "$RUNS"); do
            round=$((round + 1))
            ENDPOINTS=() ETCD_PIDS=() NODE_PIDS=() PORTS=()
            CLIENT_GROUP=""
            if [ -n "$ETCD_CPU$NODE_CPU" ]; then
                make_cgroup "r$round-client" "$CLIENT_CPU"
                CLIENT_GROUP=$GROUP
            fi
            for i in $(seq 1 "$stores"); do
                make_cgroup "r$round-e$i" "$ETCD_CPU"
                start_etcd_cluster "r$round-e$i" "$GROUP"
                ENDPOINTS+=("$CLUSTER_URLS")
            done
            DATA=()
            if [ "$stores" -gt 1 ]; then
                for url in "${ENDPOINTS[@]}"; do DATA+=(--cluster-etcd-store "$url"); done
            fi
            for n in $(seq 1 "$nodes"); do
                PORTS+=("$(free_port)")
                make_cgroup "r$round-node$n" "$NODE_CPU"
                start_node "r$round-node$n" "${PORTS[-1]}" "$GROUP"
            done
            # Every node sees the others and every slot served.
            ready=0
            for _ in $(seq 1 300); do
                info=$(redis-cli -p "${PORTS[0]}" cluster info)
                if grep -q cluster_state:ok <<<"$info" && grep -q "cluster_size:$nodes" <<<"$info"; then
                    ready=1
                    break
                fi
                sleep 0.1
            done
            [ "$ready" = 1 ] || { echo "the $nodes nodes did not share the slots: $info" >&2; exit 1; }
            [ "$LOAD" = cluster ] || shares >"$WORK/shares"
            for test in "${TEST_LIST[@]}"; do
                load=$(cut -d' ' -f1 /proc/loadavg)
                node_before=$(cpu_ticks "${NODE_PIDS[@]}")
                etcd_before=$(cpu_ticks "${ETCD_PIDS[@]}")
                start=$(date +%s%N)
                sent=$(run_load "$test")
                elapsed_us=$((($(date +%s%N) - start) / 1000))
                node_us=$((($(cpu_ticks "${NODE_PIDS[@]}") - node_before) * TICK_US))
                etcd_us=$((($(cpu_ticks "${ETCD_PIDS[@]}") - etcd_before) * TICK_US))
                echo "$((sent * 1000000 / elapsed_us)) $((node_us / sent)) $((etcd_us / sent))" \
                    "$(busy "$etcd_us" "$elapsed_us" "$ETCD_CPU" "$stores")" \
                    "$(busy "$node_us" "$elapsed_us" "$NODE_CPU" "$nodes")" "$load" \
                    >>"$WORK/results-$test"
            done
            stop_all
        done
        for test in "${TEST_LIST[@]}"; do
            results="$WORK/results-$test"
            printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$stores" "$nodes" "${test^^}" \
                "$(cut -d' ' -f1 "$results" | median)" "$(cut -d' ' -f2 "$results" | median)" \
                "$(cut -d' ' -f3 "$results" | median)" "$(cut -d' ' -f4 "$results" | median)" \
                "$(cut -d' ' -f5 "$results" | median)" \
                "$(cut -d' ' -f6 "$results" | sort -n | sed -n '1p;$p' | uniq | paste -sd- | sed 's/-/–/')"
        done
    done
done
