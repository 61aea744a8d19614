# Shared by the benchmark scripts (sourced from the repository root, not run).

# Exits, naming the first missing one, unless every command given is on PATH.
require_tools() {
    for tool in "$@"; do
        command -v "$tool" >/dev/null || { echo "$(basename "$0"): $tool not found" >&2; exit 1; }
    done
}

# A free loopback port, as the kernel hands one out (a random high one without python3).
free_port() {
    python3 - <<'PY' 2>/dev/null || echo $((20000 + RANDOM % 20000))
import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()
PY
}

# Waits until the server on port $1 answers PING (up to 10 s); else says so and exits.
wait_ready() {
    for _ in $(seq 1 100); do
        [ "$(redis-cli -p "$1" ping 2>/dev/null)" = "PONG" ] && return 0
        sleep 0.1
    done
    echo "$(basename "$0"): server on port $1 did not answer PING" >&2
    exit 1
}

# Starts the server command given after $1 (its port) and $2 (its log) in the background until
# it answers PING: a node that cannot reach etcd yet (its cluster still electing a leader)
# exits, and is started again. Sets SERVER_PID; else says so and exits.
start_until_ready() {
    local port=$1 log=$2
    shift 2
    for _ in $(seq 1 50); do
        "$@" >"$log" 2>&1 &
        SERVER_PID=$!
        for _ in $(seq 1 100); do
            [ "$(redis-cli -p "$port" ping 2>/dev/null)" = "PONG" ] && return 0
            kill -0 "$SERVER_PID" 2>/dev/null || break
            sleep 0.05
        done
        kill "$SERVER_PID" 2>/dev/null || true
        wait "$SERVER_PID" 2>/dev/null || true
        sleep 0.2
    done
    echo "$(basename "$0"): the server on port $port did not start: $(cat "$log")" >&2
    exit 1
}

# Sets SERVER_BIN to a release build of rediskv-server (with PGO=1 the profile-guided one of
# scripts/build_pgo.sh), unless it is set already; the build's output goes to $1/build.log,
# shown if the build fails.
build_server() {
    [ -n "${SERVER_BIN:-}" ] && return
    if [ -n "${PGO:-}" ]; then
        echo "building rediskv-server (release, profile-guided: scripts/build_pgo.sh)…" >&2
        if ! SERVER_BIN=$(scripts/build_pgo.sh 2>"$1/build.log" | tail -1); then
            cat "$1/build.log" >&2
            exit 1
        fi
        return
    fi
    echo "building rediskv-server (release)…" >&2
    if ! cargo build --release -p rediskv-server >"$1/build.log" 2>&1; then
        cat "$1/build.log" >&2
        exit 1
    fi
    SERVER_BIN=${CARGO_TARGET_DIR:-target}/release/rediskv-server
}

# utime + stime of the processes given and of their children waited for (redis-server's
# fork for a snapshot), in clock ticks (`getconf CLK_TCK` a second); a process that has
# exited counts 0.
cpu_ticks() {
    local total=0 pid stat
    for pid in "$@"; do
        stat=$(cat "/proc/$pid/stat" 2>/dev/null) || continue
        # The fields after the command's name (which may hold spaces): utime, stime, cutime
        # and cstime are the 12th to 15th.
        total=$((total + $(echo "${stat##*) }" | awk '{ print $12 + $13 + $14 + $15 }')))
    done
    echo "$total"
}
