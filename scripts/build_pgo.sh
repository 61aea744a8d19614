#!/usr/bin/env bash
# Builds rediskv-server in release with profile-guided optimization (PGO), the build to run
# in production: the compiler lays the code every command runs out together and keeps the
# rest out of its way, so a command's code fits the CPU's instruction cache.
#
#   scripts/build_pgo.sh                        # prints the binary's path on its last line
#   FEATURES=rocksdb scripts/build_pgo.sh       # with the server's optional engines
#   TRAIN_N=2000 scripts/build_pgo.sh           # a shorter training load (default 20000)
#
# Three steps: a release build that counts where its code goes (`-Cprofile-generate`, in
# <target>/pgo-generate), that build serving a training load from `redis-benchmark` (every
# command family, pipelined and not, on the memory engine and on fjall, stopped by SHUTDOWN
# so it writes its counts), then a release build that uses the merged counts
# (`-Cprofile-use`, in <target>/pgo). Both builds take the release profile and any RUSTFLAGS
# already set. Commands the training does not run are optimized as rarely run code: still
# correct, smaller and somewhat slower.
#
# Needs redis-benchmark and redis-cli (apt-get install redis-tools) and rustc's own
# llvm-profdata (`rustup component add llvm-tools`, which this script runs when it is
# missing). Run from anywhere; the first build of a target directory takes several minutes.
set -euo pipefail

cd "$(dirname "$0")/.."
TRAIN_N=${TRAIN_N:-20000}
FEATURES=${FEATURES:-}
TARGET=${CARGO_TARGET_DIR:-$PWD/target}

for tool in redis-benchmark redis-cli; do
    command -v "$tool" >/dev/null || { echo "build_pgo.sh: $tool not found (apt-get install redis-tools)" >&2; exit 1; }
done
host=$(rustc -vV | sed -n 's/^host: //p')
profdata="$(rustc --print sysroot)/lib/rustlib/$host/bin/llvm-profdata"
if [ ! -x "$profdata" ]; then
    rustup component add llvm-tools >&2
fi
[ -x "$profdata" ] || { echo "build_pgo.sh: $profdata not found" >&2; exit 1; }

# free_port, wait_ready
. benches/lib.sh

WORK=$(mktemp -d)
SERVER_PID=
cleanup() {
    [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null
    rm -rf "$WORK"
}
trap cleanup EXIT

features=()
[ -n "$FEATURES" ] && features=(--features "$FEATURES")
build() { # <target dir> <extra rustflags>
    echo "building rediskv-server ($2)…" >&2
    if ! RUSTFLAGS="${RUSTFLAGS:-} $2" CARGO_TARGET_DIR=$1 \
        cargo build --release -p rediskv-server "${features[@]}" >"$WORK/build.log" 2>&1; then
        cat "$WORK/build.log" >&2
        exit 1
    fi
}

build "$TARGET/pgo-generate" "-Cprofile-generate=$WORK/raw"
# Build scripts ran instrumented too: only the server's counts are wanted.
rm -rf "$WORK/raw"

# The commands of every family beside redis-benchmark's own tests, each as
# redis-benchmark sends a custom command (__rand_int__ is a random number per request).
CUSTOM=(
    "XADD xs:__rand_int__ '*' f v" "XADD stream '*' f __rand_int__" "XRANGE stream - + COUNT 10"
    "XLEN stream" "EVAL 'return redis.call(\"incr\", KEYS[1])' 1 e:__rand_int__"
    "EXPIRE key:__rand_int__ 100" "TTL key:__rand_int__" "SETEX x:__rand_int__ 100 v"
    "APPEND a:__rand_int__ v" "STRLEN a:__rand_int__" "MGET key:__rand_int__ key:1 key:2"
    "DEL x:__rand_int__" "EXISTS key:__rand_int__" "TYPE key:__rand_int__"
    "HINCRBY h:__rand_int__ f 1" "HGETALL h:__rand_int__" "HGET myhash element:__rand_int__"
    "HDEL h:__rand_int__ f" "ZRANGEBYSCORE myzset 0 100 LIMIT 0 10" "ZINCRBY myzset 1 m:__rand_int__"
    "ZSCORE myzset element:__rand_int__" "ZREM myzset m:__rand_int__" "SADD st:__rand_int__ a b c"
    "SMEMBERS st:__rand_int__" "SISMEMBER myset element:__rand_int__" "SINTER myset st:__rand_int__"
    "SREM st:__rand_int__ a" "LINDEX mylist 5" "LRANGE mylist 0 9" "LLEN mylist"
    "SETBIT b:__rand_int__ 7 1" "BITCOUNT b:__rand_int__" "PFADD hll __rand_int__" "PFCOUNT hll"
    "GEOADD geo 13.36 38.11 m:__rand_int__" "GEOSEARCH geo FROMLONLAT 15 37 BYRADIUS 200 km COUNT 5"
    "INCRBY n:__rand_int__ 5" "DECR n:__rand_int__" "GETDEL x:__rand_int__" "SCAN 0 COUNT 10"
)

train() { # <engine>
    local port
    port=$(free_port)
    mkdir -p "$WORK/data-$1"
    "$TARGET/pgo-generate/release/rediskv-server" --port "$port" --threads 1 --engine "$1" --save "" \
        --dir "$WORK/data-$1" --appendfsync everysec >"$WORK/server-$1.log" 2>&1 &
    SERVER_PID=$!
    wait_ready "$port"
    for depth in 16 1; do
        echo "training on $1, pipeline depth $depth…" >&2
        redis-benchmark -p "$port" -q -n "$TRAIN_N" -P "$depth" -c 50 -r 100000 >/dev/null
        for command in "${CUSTOM[@]}"; do
            eval "redis-benchmark -p $port -q -n $((TRAIN_N / 4)) -P $depth -c 20 -r 100000 $command" >/dev/null
        done
    done
    redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
    wait "$SERVER_PID" || { cat "$WORK/server-$1.log" >&2; exit 1; }
    SERVER_PID=
}
train memory
train fjall

"$profdata" merge -o "$WORK/merged.profdata" "$WORK"/raw/*.profraw
# The counts name the file: a changed profile rebuilds the server.
profile="$TARGET/pgo-$(cksum <"$WORK/merged.profdata" | cut -d' ' -f1).profdata"
rm -f "$TARGET"/pgo-*.profdata
cp "$WORK/merged.profdata" "$profile"
build "$TARGET/pgo" "-Cprofile-use=$profile"
echo "$TARGET/pgo/release/rediskv-server"
